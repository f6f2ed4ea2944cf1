//! `knn` against brute-force full sorts, on both kernels, both distances and both set layouts.

mod common;

use common::{Data, Dist, full_rankings, int_data, min_relative_gap};
use dml_eval::{Distance, Embeddings, Kernel, SearchOptions, knn, knn_with};

/// The kernels this CPU can run.
fn kernels() -> Vec<Kernel> {
    let mut k = vec![Kernel::Gemm];
    if std::arch::is_x86_feature_detected!("avx512f") {
        k.push(Kernel::Avx512);
    }
    k
}

fn opts(kernel: Kernel) -> SearchOptions {
    SearchOptions {
        kernel,
        ..SearchOptions::default()
    }
}

/// Asserts that `knn` returns exactly the first `k` entries of the brute-force ranking (indices) and the
/// matching distances. Only valid where `f32` rounding cannot reorder neighbours (integer data).
fn assert_exact(kind: Dist, query: &Data, reference: &Data, k: usize, same: bool, options: &SearchOptions) {
    let distance = if kind == Dist::Euclidean {
        Distance::Euclidean
    } else {
        Distance::Cosine
    };
    let got = knn_with(&query.emb(), &reference.emb(), k, distance, same, options, None).unwrap();
    let want = full_rankings(kind, query, reference, same);
    assert_eq!(got.queries(), query.rows);
    for (q, w) in want.iter().enumerate() {
        let (idx, dist) = got.row(q);
        let want_idx: Vec<u32> = w[..k].iter().map(|x| x.1 as u32).collect();
        assert_eq!(
            idx,
            &want_idx[..],
            "query {q} ({:?}, k {k}, same {same})",
            options.kernel
        );
        for (t, (&d, &(wd, _))) in dist.iter().zip(&w[..k]).enumerate() {
            let want_d = if kind == Dist::Euclidean { wd.sqrt() } else { wd };
            assert!(
                (f64::from(d) - want_d).abs() <= 1e-5 * want_d.max(1.0),
                "query {q} rank {t}: {d} vs {want_d}"
            );
        }
    }
}

/// For float data, where `f32` rounding may swap neighbours whose exact distances differ by less than
/// the rounding error: asserts that the returned list, evaluated in `f64`, is the sorted sequence of the
/// `k` smallest exact distances up to `tol` (relative), with distinct indices and no self-match.
fn assert_equivalent(
    kind: Dist,
    query: &Data,
    reference: &Data,
    k: usize,
    same: bool,
    options: &SearchOptions,
    tol: f64,
) {
    let distance = if kind == Dist::Euclidean {
        Distance::Euclidean
    } else {
        Distance::Cosine
    };
    let got = knn_with(&query.emb(), &reference.emb(), k, distance, same, options, None).unwrap();
    let want = full_rankings(kind, query, reference, same);
    for (q, w) in want.iter().enumerate() {
        let (idx, dist) = got.row(q);
        let mut seen = std::collections::HashSet::new();
        let scale = w.last().map_or(1.0, |x| x.0.abs().max(1e-12));
        for (t, &j) in idx.iter().enumerate() {
            assert!(seen.insert(j), "query {q}: index {j} returned twice");
            assert!(!(same && j as usize == q), "query {q}: retrieved itself");
            let exact = common::dist64(kind, query.row(q), reference.row(j as usize));
            assert!(
                (exact - w[t].0).abs() <= tol * scale,
                "query {q} rank {t}: index {j} at {exact}, sorted {}",
                w[t].0
            );
            let want_d = if kind == Dist::Euclidean { exact.sqrt() } else { exact };
            assert!(
                (f64::from(dist[t]) - want_d).abs() <= 1e-4 * want_d.abs().max(1.0),
                "query {q} rank {t} distance"
            );
        }
    }
}

#[test]
fn euclidean_matches_full_sort_on_integer_data_with_many_ties() {
    // Values in -2..=2 over 5 dimensions: many exactly equal distances, so tie-breaking is exercised.
    let reference = int_data(257, 5, 2, 1);
    let query = int_data(40, 5, 2, 2);
    for kernel in kernels() {
        for k in [1, 3, 17, 256] {
            assert_exact(Dist::Euclidean, &reference, &reference, k, true, &opts(kernel));
        }
        for k in [1, 9, 257] {
            assert_exact(Dist::Euclidean, &query, &reference, k, false, &opts(kernel));
        }
    }
}

#[test]
fn cosine_matches_full_sort_on_float_data() {
    let labels = common::random_labels(180, 6, 3);
    let data = common::blob_data(&labels, 12, 0.4, 10);
    let query = common::blob_data(&labels[..50], 12, 0.4, 5);
    for kernel in kernels() {
        assert_equivalent(Dist::Cosine, &data, &data, 40, true, &opts(kernel), 1e-6);
        assert_equivalent(Dist::Cosine, &query, &data, 40, false, &opts(kernel), 1e-6);
    }
    // On a subset without near-ties the order must match exactly.
    let small = Data {
        values: data.values[..40 * 12].to_vec(),
        rows: 40,
        dim: 12,
    };
    let gap = min_relative_gap(&full_rankings(Dist::Cosine, &small, &small, true), 8);
    assert!(
        gap > 1e-5,
        "test data has near-ties (relative gap {gap:e}); pick another seed"
    );
    for kernel in kernels() {
        assert_exact(Dist::Cosine, &small, &small, 8, true, &opts(kernel));
    }
}

#[test]
fn euclidean_float_data_matches_within_rounding() {
    let labels = common::random_labels(300, 4, 8);
    let data = common::blob_data(&labels, 24, 0.7, 9);
    for kernel in kernels() {
        assert_equivalent(Dist::Euclidean, &data, &data, 30, true, &opts(kernel), 1e-6);
    }
}

#[test]
fn ties_are_broken_by_reference_index() {
    // References 1, 3 and 4 are all at distance 1 from the query; 0 and 2 are farther; 5 is a duplicate
    // of 3 placed last.
    let reference = [3.0f32, 0.0, 1.0, 0.0, 2.0, 2.0, 0.0, 1.0, -1.0, 0.0, 0.0, 1.0];
    let r = Embeddings::new(&reference, 6, 2).unwrap();
    let q = Embeddings::new(&[0.0f32, 0.0], 1, 2).unwrap();
    for kernel in kernels() {
        let n = knn_with(&q, &r, 6, Distance::Euclidean, false, &opts(kernel), None).unwrap();
        assert_eq!(n.indices, vec![1, 3, 4, 5, 2, 0], "{kernel:?}");
        assert_eq!(n.distances, vec![1.0, 1.0, 1.0, 1.0, 8f32.sqrt(), 3.0]);
    }
}

#[test]
fn self_exclusion_is_by_index_so_duplicates_are_still_found() {
    // Rows 0 and 2 are identical: each must retrieve the other at distance 0, never itself.
    let data = [1.0f32, 1.0, 5.0, 5.0, 1.0, 1.0, 9.0, 9.0];
    let e = Embeddings::new(&data, 4, 2).unwrap();
    let n = knn(&e, &e, 3, Distance::Euclidean, true).unwrap();
    assert_eq!(n.row(0).0, &[2, 1, 3]);
    assert_eq!(n.row(2).0, &[0, 1, 3]);
    assert_eq!(n.row(0).1[0], 0.0);
    assert_eq!(n.row(3).0, &[1, 0, 2]);
    // Without self-exclusion the query itself comes first (lowest index among the zero distances).
    let n = knn(&e, &e, 2, Distance::Euclidean, false).unwrap();
    assert_eq!(n.row(2).0, &[0, 2]);
}

#[test]
fn sampled_thresholds_give_exact_results_on_large_reference_sets() {
    // 20,000 references and small k: the engine samples thresholds instead of keeping every reference.
    let reference = int_data(20_000, 6, 3, 11);
    let query = int_data(120, 6, 3, 12);
    for kernel in kernels() {
        let got = knn_with(
            &query.emb(),
            &reference.emb(),
            25,
            Distance::Euclidean,
            false,
            &opts(kernel),
            None,
        )
        .unwrap();
        assert!(got.stats.thresholded, "{kernel:?}: expected the sampled-threshold path");
        assert_exact(Dist::Euclidean, &query, &reference, 25, false, &opts(kernel));
    }
    // Query set = reference set on the first 9,000 rows, with k large enough to need many candidates.
    let data = Data {
        values: reference.values[..9_000 * 6].to_vec(),
        rows: 9_000,
        dim: 6,
    };
    let sub = Data {
        values: data.values[..150 * 6].to_vec(),
        rows: 150,
        dim: 6,
    };
    for kernel in kernels() {
        let got = knn_with(
            &sub.emb(),
            &data.emb(),
            700,
            Distance::Euclidean,
            true,
            &opts(kernel),
            None,
        )
        .unwrap();
        assert!(got.stats.thresholded);
        assert_exact(Dist::Euclidean, &sub, &data, 700, true, &opts(kernel));
    }
}

#[test]
fn unrepresentative_samples_fall_back_to_exact_rows() {
    // With 16,384 references the sample takes every 4th one. Making the sampled references far away
    // pushes thresholds up (candidate overflow); making only them near leaves fewer candidates than k
    // (the threshold sits at a sample rank of about k/4 + 2√k, all of them near). Both must fall back to
    // full rows and still be exact.
    let n = 16_384;
    let base = int_data(n, 4, 2, 21);
    let query = int_data(30, 4, 2, 22);
    for sampled_far in [true, false] {
        let mut reference = base.clone();
        for j in 0..n {
            let far = (j % 4 == 0) == sampled_far;
            if far {
                for v in &mut reference.values[j * 4..(j + 1) * 4] {
                    *v += 40.0;
                }
            }
        }
        for kernel in kernels() {
            let got = knn_with(
                &query.emb(),
                &reference.emb(),
                100,
                Distance::Euclidean,
                false,
                &opts(kernel),
                None,
            )
            .unwrap();
            assert!(
                got.stats.fallbacks > 0,
                "sampled_far {sampled_far}, {kernel:?}: no fallback exercised"
            );
            assert_exact(Dist::Euclidean, &query, &reference, 100, false, &opts(kernel));
        }
    }
}

#[test]
fn collapsed_embeddings_tie_everywhere_and_return_the_lowest_indices() {
    // A collapsed model maps every input to the same point: every distance ties, every sampled threshold
    // admits every reference, every query overflows and is recomputed, and ties go to the lowest index.
    let n = 10_000;
    let values = vec![0.25f32; n * 4];
    let e = Embeddings::new(&values, n, 4).unwrap();
    for kernel in kernels() {
        let got = knn_with(&e, &e, 5, Distance::Euclidean, true, &opts(kernel), None).unwrap();
        assert!(got.stats.thresholded && got.stats.fallbacks == n, "{:?}", got.stats);
        assert_eq!(got.row(0).0, &[1, 2, 3, 4, 5]);
        assert_eq!(got.row(3).0, &[0, 1, 2, 4, 5]);
        assert_eq!(got.row(n - 1).0, &[0, 1, 2, 3, 4]);
        assert!(got.distances.iter().all(|&d| d == 0.0));
    }
}

#[test]
fn results_do_not_depend_on_block_size_threads_or_kernel() {
    let data = int_data(3_000, 9, 4, 31);
    let e = data.emb();
    let reference = knn_with(&e, &e, 40, Distance::Euclidean, true, &opts(Kernel::Gemm), None).unwrap();
    for kernel in kernels() {
        for block_size in [1, 7, 64, 5_000] {
            for threads in [Some(1), Some(2), None] {
                let o = SearchOptions {
                    block_size,
                    threads,
                    kernel,
                };
                let got = knn_with(&e, &e, 40, Distance::Euclidean, true, &o, None).unwrap();
                assert_eq!(got.indices, reference.indices, "{o:?}");
                assert_eq!(got.distances, reference.distances, "{o:?}");
            }
        }
    }
}

#[test]
fn empty_query_set_returns_no_rows() {
    let r = int_data(10, 3, 2, 41);
    let q = Embeddings::new(&[], 0, 3).unwrap();
    let n = knn(&q, &r.emb(), 4, Distance::Cosine, false).unwrap();
    assert_eq!(n.queries(), 0);
    assert!(n.indices.is_empty() && n.distances.is_empty());
}
