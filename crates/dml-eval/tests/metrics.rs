//! `evaluate` against hand-computed values and a brute-force transcription of PML's formulas.

mod common;

use common::{Dist, Expected, PmlK, assert_close, assert_report, full_rankings, indices, int_data, pml_metrics};
use dml_eval::{
    AccuracyConfig, Distance, Embeddings, EvalError, EvalSets, KPolicy, Kernel, Metric, SearchOptions, evaluate, knn,
};

const RECALL: [usize; 4] = [1, 2, 4, 8];

fn all_metrics() -> Vec<Metric> {
    let mut m = Metric::PML_KNN.to_vec();
    m.extend(RECALL.iter().map(|&k| Metric::RecallAt(k)));
    m
}

fn config(distance: Distance, k: KPolicy, kernel: Kernel) -> AccuracyConfig {
    AccuracyConfig::new(distance)
        .with_k(k)
        .with_metrics(all_metrics())
        .with_search(SearchOptions {
            kernel,
            ..SearchOptions::default()
        })
}

fn kernels() -> Vec<Kernel> {
    let mut k = vec![Kernel::Gemm];
    if std::arch::is_x86_feature_detected!("avx512f") {
        k.push(Kernel::Avx512);
    }
    k
}

fn pml_k(k: KPolicy) -> PmlK {
    match k {
        KPolicy::MaxBinCount => PmlK::MaxBinCount,
        KPolicy::Fixed(k) => PmlK::Fixed(k),
        KPolicy::All => PmlK::All,
    }
}

/// Five points on a line, labels A B A A B; every value below was worked out by hand (see comments).
fn line() -> (Vec<f32>, Vec<u32>) {
    (vec![0.0, 1.0, 3.0, 6.0, 10.0], vec![0, 1, 0, 0, 1])
}

/// The PML metrics plus Recall@{1,2,3,4} (only 4 references per query exist in [`line`]).
fn line_config(k: KPolicy, kernel: Kernel) -> AccuracyConfig {
    let mut m = Metric::PML_KNN.to_vec();
    m.extend((1..=4).map(Metric::RecallAt));
    config(Distance::Euclidean, k, kernel).with_metrics(m)
}

#[test]
fn hand_computed_example_with_max_bin_count() {
    // Neighbour labels (self excluded, ties by index) and R: q0 [B A A B] R2, q1 [A A A B] R1,
    // q2 [B A A B] R2 (refs 0 and 3 tie at 3; 0 first), q3 [A B B A] R2, q4 [A A B A] R1; k = 3 - 1 = 2.
    let (x, labels) = line();
    let e = Embeddings::new(&x, 5, 1).unwrap();
    let sets = EvalSets::QueryIsReference {
        embeddings: e,
        labels: &labels,
    };
    for kernel in kernels() {
        let r = evaluate(&sets, &line_config(KPolicy::MaxBinCount, kernel)).unwrap();
        assert_eq!((r.k, r.evaluated_queries, r.excluded_queries), (2, 5, 0));
        assert_close("precision_at_1", r.precision_at_1, 1.0 / 5.0);
        // (1/2 + 0 + 1/2 + 1/2 + 0) / 5
        assert_close("r_precision", r.r_precision, 0.3);
        // (0.5/2 + 0 + 0.5/2 + 1/2 + 0) / 5
        assert_close("mean_average_precision_at_r", r.mean_average_precision_at_r, 0.2);
        assert_close("mean_average_precision", r.mean_average_precision, 0.2);
        // (1/2 + 0 + 1/2 + 1 + 0) / 5: q4's only B is at rank 3 > k.
        assert_close("mean_reciprocal_rank", r.mean_reciprocal_rank, 0.4);
        let recall: Vec<(usize, f64)> = r.recall_at_k.iter().map(|(&k, &v)| (k, v)).collect();
        assert_eq!(recall.len(), 4);
        // A hit within 1: q3; within 2: + q0, q2; within 3: + q4; within 4: + q1.
        for ((k, got), want) in recall.iter().zip([0.2, 0.6, 0.8, 1.0]) {
            assert!((got - want).abs() < 1e-15, "recall@{k}: {got} vs {want}");
        }
    }
}

#[test]
fn hand_computed_example_with_fixed_k() {
    let (x, labels) = line();
    let e = Embeddings::new(&x, 5, 1).unwrap();
    let sets = EvalSets::QueryIsReference {
        embeddings: e,
        labels: &labels,
    };
    // k = 3 > R: MAP now also counts hits at rank 3 but still divides by R:
    // q0 (1/2 + 2/3)/2, q1 0, q2 (1/2 + 2/3)/2, q3 1/2, q4 (1/3)/1 → sum 2.0.
    let r = evaluate(&sets, &line_config(KPolicy::Fixed(3), Kernel::Auto)).unwrap();
    assert_close("mean_average_precision", r.mean_average_precision, 2.0 / 5.0);
    assert_close("mean_average_precision_at_r", r.mean_average_precision_at_r, 0.2);
    assert_close("r_precision", r.r_precision, 0.3);
    // MRR over 3: 1/2 + 0 + 1/2 + 1 + 1/3.
    assert_close(
        "mean_reciprocal_rank",
        r.mean_reciprocal_rank,
        (0.5 + 0.5 + 1.0 + 1.0 / 3.0) / 5.0,
    );
    // k = 1 < R: R-precision's window and divisor shrink to min(R, k) = 1 while MAP@R still divides by R
    // (PML's relevance mask is truncated to k columns): only q3 hits, 1/1 and 1/2 respectively.
    let r = evaluate(&sets, &line_config(KPolicy::Fixed(1), Kernel::Auto)).unwrap();
    assert_close("r_precision", r.r_precision, 0.2);
    assert_close("mean_average_precision_at_r", r.mean_average_precision_at_r, 0.1);
    assert_close("mean_average_precision", r.mean_average_precision, 0.1);
    assert_close("mean_reciprocal_rank", r.mean_reciprocal_rank, 0.2);
    assert_eq!(r.k, 1);
}

#[test]
fn ties_are_broken_by_index_in_metrics() {
    // Query 0 at 0 has two neighbours at distance 1 (rows 1 and 2); the lower index decides Precision@1.
    let x = [0.0f32, -1.0, 1.0, 5.0, 5.0];
    let e = Embeddings::new(&x, 5, 1).unwrap();
    let cfg = AccuracyConfig::new(Distance::Euclidean).with_metrics([Metric::PrecisionAt1]);
    let first_is_other = [0u32, 1, 0, 1, 9];
    let first_is_same = [0u32, 0, 1, 1, 9];
    // Row 4 (label 9) is lone. Row 3's nearest is row 4 (distance 0), then row 2.
    let a = evaluate(
        &EvalSets::QueryIsReference {
            embeddings: e,
            labels: &first_is_other,
        },
        &cfg,
    )
    .unwrap();
    let b = evaluate(
        &EvalSets::QueryIsReference {
            embeddings: e,
            labels: &first_is_same,
        },
        &cfg,
    )
    .unwrap();
    assert_eq!((a.evaluated_queries, a.excluded_queries), (4, 1));
    // first_is_other: q0 → row 1 (label 1 ≠ 0), q1 → row 0 (1 vs 0, no), q2 → row 0 (yes), q3 → row 4 (no).
    assert_close("precision_at_1", a.precision_at_1, 0.25);
    // first_is_same: q0 → row 1 (yes), q1 → row 0 (yes), q2 → row 0 (1 vs 0, no), q3 → row 4 (no).
    assert_close("precision_at_1", b.precision_at_1, 0.5);
}

#[test]
fn lone_queries_are_excluded_from_every_knn_metric() {
    // Labels 7 and 8 occur once: with query = reference they have no other reference and are excluded.
    let data = int_data(12, 3, 3, 5);
    let labels = [0u32, 0, 1, 1, 1, 7, 0, 8, 2, 2, 1, 0];
    let sets = EvalSets::QueryIsReference {
        embeddings: data.emb(),
        labels: &labels,
    };
    let r = evaluate(&sets, &config(Distance::Euclidean, KPolicy::MaxBinCount, Kernel::Auto)).unwrap();
    assert_eq!((r.evaluated_queries, r.excluded_queries), (10, 2));
    let want = pml_metrics(
        &indices(&full_rankings(Dist::Euclidean, &data, &data, true)),
        &labels,
        &labels,
        true,
        PmlK::MaxBinCount,
        &RECALL,
    );
    assert_eq!(want.excluded, 2);
    assert_report(&r, &want);
    // Every query lone: PML returns NaN; the report says so and serialises it as null.
    let distinct: Vec<u32> = (0..12).collect();
    let sets = EvalSets::QueryIsReference {
        embeddings: data.emb(),
        labels: &distinct,
    };
    let r = evaluate(&sets, &config(Distance::Euclidean, KPolicy::MaxBinCount, Kernel::Auto)).unwrap();
    assert_eq!((r.evaluated_queries, r.excluded_queries, r.k), (0, 12, 0));
    assert!(r.precision_at_1.is_some_and(f64::is_nan) && r.mean_average_precision_at_r.is_some_and(f64::is_nan));
    let json = serde_json::to_value(&r).unwrap();
    assert!(json["precision_at_1"].is_null(), "{json}");
}

#[test]
fn query_is_reference_matches_brute_force_for_every_k_policy() {
    // Integer data: exact distances with many ties, so the expected order is unambiguous.
    let data = int_data(240, 6, 2, 17);
    let mut labels = common::random_labels(240, 9, 18);
    labels[17] = 100; // one lone query
    let sets = EvalSets::QueryIsReference {
        embeddings: data.emb(),
        labels: &labels,
    };
    let rankings = indices(&full_rankings(Dist::Euclidean, &data, &data, true));
    for k in [
        KPolicy::MaxBinCount,
        KPolicy::Fixed(5),
        KPolicy::Fixed(60),
        KPolicy::All,
    ] {
        let want = pml_metrics(&rankings, &labels, &labels, true, pml_k(k), &RECALL);
        for kernel in kernels() {
            let got = evaluate(&sets, &config(Distance::Euclidean, k, kernel)).unwrap();
            assert_report(&got, &want);
        }
    }
}

#[test]
fn query_gallery_matches_brute_force() {
    let gallery = int_data(300, 5, 2, 23);
    let query = int_data(90, 5, 2, 24);
    let glabels = common::random_labels(300, 12, 25);
    // Query labels 0..14: labels 12 and 13 never occur in the gallery, so those queries are lone.
    let qlabels = common::random_labels(90, 14, 26);
    let lone = qlabels.iter().filter(|&&l| l >= 12).count();
    assert!(lone > 0, "the test needs lone queries");
    let sets = EvalSets::QueryGallery {
        query: query.emb(),
        query_labels: &qlabels,
        gallery: gallery.emb(),
        gallery_labels: &glabels,
    };
    let rankings = indices(&full_rankings(Dist::Euclidean, &query, &gallery, false));
    for k in [KPolicy::MaxBinCount, KPolicy::Fixed(7)] {
        let want = pml_metrics(&rankings, &qlabels, &glabels, false, pml_k(k), &RECALL);
        assert_eq!(want.excluded, lone);
        for kernel in kernels() {
            assert_report(
                &evaluate(&sets, &config(Distance::Euclidean, k, kernel)).unwrap(),
                &want,
            );
        }
    }
}

/// Expected metrics for cosine data computed from neighbour lists whose correctness is checked against an
/// `f64` full sort up to rounding-level near-ties (float data cannot promise a unique order).
fn cosine_expectation(
    query: &common::Data,
    reference: &common::Data,
    qlabels: &[u32],
    rlabels: &[u32],
    same: bool,
) -> Expected {
    let probe = pml_metrics(
        &indices(&full_rankings(Dist::Cosine, query, reference, same)),
        qlabels,
        rlabels,
        same,
        PmlK::MaxBinCount,
        &RECALL,
    );
    let k = probe.k.max(8);
    let lists = knn(&query.emb(), &reference.emb(), k, Distance::Cosine, same).unwrap();
    let exact = full_rankings(Dist::Cosine, query, reference, same);
    let mut rankings = Vec::new();
    for (q, w) in exact.iter().enumerate() {
        let idx: Vec<usize> = lists.row(q).0.iter().map(|&j| j as usize).collect();
        for (t, &j) in idx.iter().enumerate() {
            let d = common::dist64(Dist::Cosine, query.row(q), reference.row(j));
            assert!((d - w[t].0).abs() <= 1e-6, "query {q} rank {t}: {d} vs {}", w[t].0);
        }
        rankings.push(idx);
    }
    pml_metrics(&rankings, qlabels, rlabels, same, PmlK::MaxBinCount, &RECALL)
}

#[test]
fn cosine_metrics_match_pml_formulas_on_verified_neighbour_lists() {
    let labels = common::random_labels(200, 5, 31);
    let data = common::blob_data(&labels, 16, 0.9, 32);
    let want = cosine_expectation(&data, &data, &labels, &labels, true);
    let sets = EvalSets::QueryIsReference {
        embeddings: data.emb(),
        labels: &labels,
    };
    for kernel in kernels() {
        assert_report(
            &evaluate(&sets, &config(Distance::Cosine, KPolicy::MaxBinCount, kernel)).unwrap(),
            &want,
        );
    }
    let qlabels = common::random_labels(70, 5, 33);
    let query = common::blob_data(&qlabels, 16, 0.9, 34);
    let want = cosine_expectation(&query, &data, &qlabels, &labels, false);
    let sets = EvalSets::QueryGallery {
        query: query.emb(),
        query_labels: &qlabels,
        gallery: data.emb(),
        gallery_labels: &labels,
    };
    assert_report(
        &evaluate(&sets, &config(Distance::Cosine, KPolicy::MaxBinCount, Kernel::Auto)).unwrap(),
        &want,
    );
}

#[test]
fn precision_and_recall_alone_retrieve_only_max_k_neighbours() {
    let data = int_data(500, 4, 3, 41);
    let labels = common::random_labels(500, 3, 42);
    let sets = EvalSets::QueryIsReference {
        embeddings: data.emb(),
        labels: &labels,
    };
    let cfg = AccuracyConfig::new(Distance::Euclidean).with_metrics([
        Metric::PrecisionAt1,
        Metric::RecallAt(4),
        Metric::RecallAt(16),
    ]);
    let r = evaluate(&sets, &cfg).unwrap();
    assert_eq!(
        r.search.neighbours_per_query, 16,
        "P@1 + Recall@{{4,16}} should retrieve 16, not max_bin_count"
    );
    assert_eq!(r.k, 0);
    assert!(r.r_precision.is_none() && r.mean_average_precision_at_r.is_none());
    let want = pml_metrics(
        &indices(&full_rankings(Dist::Euclidean, &data, &data, true)),
        &labels,
        &labels,
        true,
        PmlK::Fixed(16),
        &[4, 16],
    );
    assert_close("precision_at_1", r.precision_at_1, want.precision_at_1);
    assert_close("recall_at_4", r.recall_at_k.get(&4).copied(), want.recall[0].1);
    assert_close("recall_at_16", r.recall_at_k.get(&16).copied(), want.recall[1].1);
    // With MAP@R requested, the policy k (about 500 / 3) is retrieved instead.
    let cfg = cfg.with_metrics([Metric::PrecisionAt1, Metric::MeanAveragePrecisionAtR]);
    let r = evaluate(&sets, &cfg).unwrap();
    assert_eq!(r.search.neighbours_per_query, r.k);
    assert!(r.k > 150);
}

#[test]
fn results_are_identical_across_threads_block_sizes_and_kernels() {
    let labels = common::random_labels(1_500, 7, 51);
    let data = common::blob_data(&labels, 20, 1.0, 52);
    let sets = EvalSets::QueryIsReference {
        embeddings: data.emb(),
        labels: &labels,
    };
    let base = evaluate(&sets, &config(Distance::Euclidean, KPolicy::MaxBinCount, Kernel::Auto)).unwrap();
    for (block_size, threads) in [(1, Some(1)), (13, Some(2)), (512, None)] {
        let mut cfg = config(Distance::Euclidean, KPolicy::MaxBinCount, Kernel::Auto);
        cfg.search = SearchOptions {
            block_size,
            threads,
            kernel: Kernel::Auto,
        };
        let r = evaluate(&sets, &cfg).unwrap();
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            serde_json::to_string(&base).unwrap(),
            "block {block_size} threads {threads:?}"
        );
    }
}

#[test]
fn report_serialises_requested_metrics_only() {
    let (x, labels) = line();
    let e = Embeddings::new(&x, 5, 1).unwrap();
    let sets = EvalSets::QueryIsReference {
        embeddings: e,
        labels: &labels,
    };
    let cfg = AccuracyConfig::new(Distance::Euclidean).with_metrics([
        Metric::PrecisionAt1,
        Metric::RecallAt(2),
        Metric::RecallAt(1),
    ]);
    let json = serde_json::to_value(evaluate(&sets, &cfg).unwrap()).unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "precision_at_1": 0.2,
            "recall_at_k": {"1": 0.2, "2": 0.6},
            "k": 0,
            "evaluated_queries": 5,
            "excluded_queries": 0
        })
    );
}

#[test]
fn empty_sets_evaluate_to_nothing() {
    let e = Embeddings::new(&[], 0, 4).unwrap();
    let sets = EvalSets::QueryIsReference {
        embeddings: e,
        labels: &[],
    };
    let r = evaluate(
        &sets,
        &AccuracyConfig::new(Distance::Euclidean).with_metrics([Metric::PrecisionAt1, Metric::Nmi]),
    )
    .unwrap();
    assert_eq!((r.evaluated_queries, r.excluded_queries, r.k), (0, 0, 0));
    assert!(r.precision_at_1.is_some_and(f64::is_nan));
    assert_eq!(r.nmi, Some(1.0), "sklearn scores two empty labelings as 1.0");
    // A single embedding has no other reference: it is lone.
    let one = [1.0f32, 2.0, 3.0, 4.0];
    let e = Embeddings::new(&one, 1, 4).unwrap();
    let r = evaluate(
        &EvalSets::QueryIsReference {
            embeddings: e,
            labels: &[3],
        },
        &AccuracyConfig::new(Distance::Cosine),
    )
    .unwrap();
    assert_eq!((r.evaluated_queries, r.excluded_queries, r.k), (0, 1, 0));
}

#[test]
fn invalid_inputs_are_errors_naming_the_input() {
    let data = int_data(10, 3, 2, 61);
    let labels = vec![0u32, 1, 0, 1, 0, 1, 0, 1, 0, 1];
    let e = data.emb();
    let cfg = AccuracyConfig::new(Distance::Euclidean);
    let err = evaluate(
        &EvalSets::QueryIsReference {
            embeddings: e,
            labels: &labels[..9],
        },
        &cfg,
    )
    .unwrap_err();
    assert_eq!(
        err,
        EvalError::LabelCount {
            input: "labels",
            labels: 9,
            rows: 10
        }
    );
    let g = int_data(4, 2, 2, 62);
    let err = evaluate(
        &EvalSets::QueryGallery {
            query: e,
            query_labels: &labels,
            gallery: g.emb(),
            gallery_labels: &[0, 1, 0, 1],
        },
        &cfg,
    )
    .unwrap_err();
    assert_eq!(
        err,
        EvalError::DimMismatch {
            query_dim: 3,
            reference_dim: 2
        }
    );
    let sets = EvalSets::QueryIsReference {
        embeddings: e,
        labels: &labels,
    };
    let err = evaluate(&sets, &cfg.clone().with_k(KPolicy::Fixed(10))).unwrap_err();
    assert!(
        matches!(
            err,
            EvalError::KTooLarge {
                what: "k",
                k: 10,
                available: 9,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("minus the query itself"), "{err}");
    let err = evaluate(&sets, &cfg.clone().with_metrics([Metric::RecallAt(0)])).unwrap_err();
    assert_eq!(err, EvalError::ZeroK { what: "recall_at_k" });
    let err = evaluate(&sets, &cfg.clone().with_metrics([Metric::RecallAt(10)])).unwrap_err();
    assert!(
        matches!(
            err,
            EvalError::KTooLarge {
                what: "recall_at_k",
                k: 10,
                available: 9,
                ..
            }
        ),
        "{err:?}"
    );
    let err = evaluate(&sets, &cfg.clone().with_k(KPolicy::Fixed(0))).unwrap_err();
    assert_eq!(err, EvalError::ZeroK { what: "k" });
    let mut zero = data.values.clone();
    zero[6..9].fill(0.0);
    let z = Embeddings::new(&zero, 10, 3).unwrap();
    let err = evaluate(
        &EvalSets::QueryIsReference {
            embeddings: z,
            labels: &labels,
        },
        &AccuracyConfig::new(Distance::Cosine),
    )
    .unwrap_err();
    assert_eq!(err, EvalError::ZeroNorm { input: "query", row: 2 });
    let err = evaluate(
        &sets,
        &cfg.clone().with_search(SearchOptions {
            threads: Some(0),
            ..SearchOptions::default()
        }),
    )
    .unwrap_err();
    assert!(matches!(err, EvalError::Options(_)), "{err:?}");
    let err = evaluate(
        &sets,
        &cfg.with_search(SearchOptions {
            block_size: 0,
            ..SearchOptions::default()
        }),
    )
    .unwrap_err();
    assert!(matches!(err, EvalError::Options(_)), "{err:?}");
}
