//! The re-ranking hook with real re-rankers, checked against brute-force predictions.

mod common;

use common::{Data, Dist, PmlK, assert_report, full_rankings, indices, int_data, pml_metrics};
use dml_eval::{
    AccuracyConfig, Distance, EvalError, EvalSets, KPolicy, Metric, Neighbour, Reranker, SearchOptions, evaluate,
    evaluate_with_reranker, knn_with,
};

/// Re-scores candidates with the Manhattan (L1) distance between the query and the reference.
struct Manhattan<'a> {
    query: &'a Data,
    reference: &'a Data,
    depth: usize,
}

fn l1(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).sum()
}

impl Reranker for Manhattan<'_> {
    fn depth(&self) -> usize {
        self.depth
    }

    fn rerank(&self, query: usize, neighbours: &mut [Neighbour]) {
        for n in neighbours.iter_mut() {
            n.score = l1(self.query.row(query), self.reference.row(n.index as usize));
        }
        // Reverse the slice to check that the order the re-ranker leaves is ignored.
        neighbours.reverse();
    }
}

/// An oracle that moves same-label references to the front (score 0) and the others behind (score 1).
struct Oracle<'a> {
    qlabels: &'a [u32],
    rlabels: &'a [u32],
    depth: usize,
}

impl Reranker for Oracle<'_> {
    fn depth(&self) -> usize {
        self.depth
    }

    fn rerank(&self, query: usize, neighbours: &mut [Neighbour]) {
        for n in neighbours.iter_mut() {
            n.score = if self.rlabels[n.index as usize] == self.qlabels[query] {
                0.0
            } else {
                1.0
            };
        }
    }
}

/// The predicted lists: the Euclidean full ranking whose first `depth` entries are re-sorted by
/// `(score, index)`.
fn predicted(rankings: &[Vec<usize>], depth: usize, score: impl Fn(usize, usize) -> f32) -> Vec<Vec<usize>> {
    rankings
        .iter()
        .enumerate()
        .map(|(q, r)| {
            let d = depth.min(r.len());
            let mut head: Vec<(f32, usize)> = r[..d].iter().map(|&j| (score(q, j), j)).collect();
            head.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            head.iter().map(|x| x.1).chain(r[d..].iter().copied()).collect()
        })
        .collect()
}

fn metrics() -> Vec<Metric> {
    let mut m = Metric::PML_KNN.to_vec();
    m.extend([Metric::RecallAt(1), Metric::RecallAt(4)]);
    m
}

#[test]
fn manhattan_reranker_changes_metrics_exactly_as_predicted() {
    // Integer data: Euclidean and L1 distances are exact, so the predicted order is unambiguous.
    let data = int_data(200, 4, 3, 71);
    let labels = common::random_labels(200, 4, 72);
    let sets = EvalSets::QueryIsReference {
        embeddings: data.emb(),
        labels: &labels,
    };
    let cfg = AccuracyConfig::new(Distance::Euclidean).with_metrics(metrics());
    let base_rankings = indices(&full_rankings(Dist::Euclidean, &data, &data, true));
    let plain = evaluate(&sets, &cfg).unwrap();
    for depth in [1, 10, 80] {
        let rr = Manhattan {
            query: &data,
            reference: &data,
            depth,
        };
        let got = evaluate_with_reranker(&sets, &cfg, &rr).unwrap();
        let lists = predicted(&base_rankings, depth, |q, j| l1(data.row(q), data.row(j)));
        let want = pml_metrics(&lists, &labels, &labels, true, PmlK::MaxBinCount, &[1, 4]);
        assert_report(&got, &want);
        if depth > 1 {
            assert_ne!(
                got.mean_average_precision_at_r, plain.mean_average_precision_at_r,
                "depth {depth} should matter"
            );
        }
    }
    // Depth 1 re-scores only the nearest neighbour, which cannot change any metric.
    let rr = Manhattan {
        query: &data,
        reference: &data,
        depth: 1,
    };
    assert_eq!(evaluate_with_reranker(&sets, &cfg, &rr).unwrap(), plain);
}

#[test]
fn oracle_reranker_raises_precision_and_depth_beyond_k_is_retrieved() {
    let gallery = int_data(150, 3, 4, 81);
    let query = int_data(40, 3, 4, 82);
    let glabels = common::random_labels(150, 5, 83);
    let qlabels = common::random_labels(40, 5, 84);
    let sets = EvalSets::QueryGallery {
        query: query.emb(),
        query_labels: &qlabels,
        gallery: gallery.emb(),
        gallery_labels: &glabels,
    };
    // Only P@1 and Recall@4: the plain search needs 4 neighbours, but the re-ranker's depth of 60 must be
    // retrieved so that it can pull a same-label reference from rank 60 to rank 1.
    let cfg = AccuracyConfig::new(Distance::Euclidean).with_metrics([Metric::PrecisionAt1, Metric::RecallAt(4)]);
    let plain = evaluate(&sets, &cfg).unwrap();
    let rr = Oracle {
        qlabels: &qlabels,
        rlabels: &glabels,
        depth: 60,
    };
    let got = evaluate_with_reranker(&sets, &cfg, &rr).unwrap();
    assert_eq!(got.search.neighbours_per_query, 60);
    let base = indices(&full_rankings(Dist::Euclidean, &query, &gallery, false));
    let lists = predicted(&base, 60, |q, j| if glabels[j] == qlabels[q] { 0.0 } else { 1.0 });
    let want = pml_metrics(&lists, &qlabels, &glabels, false, PmlK::Fixed(60), &[4]);
    common::assert_close("precision_at_1", got.precision_at_1, want.precision_at_1);
    common::assert_close("recall_at_4", got.recall_at_k.get(&4).copied(), want.recall[0].1);
    assert!(
        got.precision_at_1 > plain.precision_at_1,
        "{:?} vs {:?}",
        got.precision_at_1,
        plain.precision_at_1
    );
    // MAP@R under the oracle with depth covering every neighbour is 1 for every query (all relevant first).
    let cfg = AccuracyConfig::new(Distance::Euclidean)
        .with_k(KPolicy::All)
        .with_metrics([Metric::MeanAveragePrecisionAtR]);
    let rr = Oracle {
        qlabels: &qlabels,
        rlabels: &glabels,
        depth: 150,
    };
    let got = evaluate_with_reranker(&sets, &cfg, &rr).unwrap();
    common::assert_close("mean_average_precision_at_r", got.mean_average_precision_at_r, 1.0);
}

#[test]
fn knn_with_reranker_returns_the_reranked_head() {
    let reference = int_data(120, 3, 3, 91);
    let query = int_data(15, 3, 3, 92);
    let rr = Manhattan {
        query: &query,
        reference: &reference,
        depth: 30,
    };
    let got = knn_with(
        &query.emb(),
        &reference.emb(),
        5,
        Distance::Euclidean,
        false,
        &SearchOptions::default(),
        Some(&rr),
    )
    .unwrap();
    let base = indices(&full_rankings(Dist::Euclidean, &query, &reference, false));
    let lists = predicted(&base, 30, |q, j| l1(query.row(q), reference.row(j)));
    for (q, list) in lists.iter().enumerate() {
        let (idx, scores) = got.row(q);
        let want: Vec<u32> = list[..5].iter().map(|&j| j as u32).collect();
        assert_eq!(idx, &want[..], "query {q}");
        for (&j, &s) in idx.iter().zip(scores) {
            assert_eq!(
                s,
                l1(query.row(q), reference.row(j as usize)),
                "scores are the re-ranker's"
            );
        }
    }
}

/// Misbehaving re-rankers.
struct Broken {
    mode: u8,
}

impl Reranker for Broken {
    fn depth(&self) -> usize {
        3
    }

    fn rerank(&self, _query: usize, neighbours: &mut [Neighbour]) {
        match self.mode {
            0 => neighbours[1].score = f32::NAN,
            1 => neighbours[0] = neighbours[1],
            _ => neighbours[2].index += 1000,
        }
    }
}

#[test]
fn misbehaving_rerankers_are_reported() {
    let data = int_data(30, 2, 5, 95);
    let labels = common::random_labels(30, 3, 96);
    let sets = EvalSets::QueryIsReference {
        embeddings: data.emb(),
        labels: &labels,
    };
    let cfg = AccuracyConfig::new(Distance::Euclidean);
    let err = evaluate_with_reranker(&sets, &cfg, &Broken { mode: 0 }).unwrap_err();
    assert!(matches!(err, EvalError::RerankerNan { .. }), "{err:?}");
    for mode in [1, 2] {
        let err = evaluate_with_reranker(&sets, &cfg, &Broken { mode }).unwrap_err();
        assert!(
            matches!(err, EvalError::RerankerChangedCandidates { .. }),
            "mode {mode}: {err:?}"
        );
    }
}
