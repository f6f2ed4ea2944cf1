//! Multi-scale re-ranking through `dml_eval::evaluate_with_reranker` on a synthetic set where the
//! global embedding ranks a wrong-class image first and the spatial structure fixes it.

use dml_eval::{
    AccuracyConfig, Distance, Embeddings, EvalSets, Metric, Neighbour, Reranker, evaluate, evaluate_with_reranker,
};
use dml_ot::{
    FeatureBank, Marginals, OtError, SinkhornConfig, StructuralConfig, StructuralReranker, StructuralRerankerConfig,
};

const CHANNELS: usize = 4;
const LOCATIONS: usize = 4;
const EMBEDDING: usize = 3;

/// A 2 × 2 map in `[channels, locations]` layout whose location `k` holds the one-hot part
/// `parts[k]` ("parts" images), or the flat vector (1, 1, 1, 1) / 4 everywhere ("texture" images).
/// Both kinds have the same mean feature, so only structure tells them apart: a parts image matches
/// another parts image location by location (cosine 1), but every texture location only at 0.5.
fn map(parts: Option<[usize; 4]>) -> Vec<f32> {
    let mut m = vec![0f32; CHANNELS * LOCATIONS];
    for loc in 0..LOCATIONS {
        for ch in 0..CHANNELS {
            m[ch * LOCATIONS + loc] = match parts {
                Some(p) => f32::from(p[loc] == ch),
                None => 0.25,
            };
        }
    }
    m
}

/// Embedding on the unit circle at `angle` radians plus a class-specific third coordinate of 0.
fn embedding(angle: f32) -> [f32; EMBEDDING] {
    [angle.cos(), angle.sin(), 0.0]
}

struct Set {
    maps: Vec<f32>,
    embeddings: Vec<f32>,
    labels: Vec<u32>,
}

impl Set {
    fn bank(&self) -> FeatureBank<'_> {
        FeatureBank {
            maps: &self.maps,
            embeddings: &self.embeddings,
            rows: self.labels.len(),
            channels: CHANNELS,
            locations: LOCATIONS,
            embedding_dim: EMBEDDING,
        }
    }
}

/// Three queries (parts images of classes 0, 1, 2). Each has in the gallery a same-class parts image
/// (locations permuted, so only transport matches them) at a global cosine of cos(0.3) ≈ 0.955, and a
/// texture image of another class at global cosine 1: the global ranking is wrong for every query.
fn data() -> (Set, Set) {
    let mut query = Set {
        maps: vec![],
        embeddings: vec![],
        labels: vec![],
    };
    let mut gallery = Set {
        maps: vec![],
        embeddings: vec![],
        labels: vec![],
    };
    let layouts = [[0, 1, 2, 3], [1, 0, 3, 2], [3, 2, 1, 0]];
    for (class, layout) in layouts.iter().enumerate() {
        // Classes sit 2 radians apart on the circle.
        let angle = 2.0 * class as f32;
        query.maps.extend(map(Some(*layout)));
        query.embeddings.extend(embedding(angle));
        query.labels.push(class as u32);
        let permuted = [layout[2], layout[3], layout[0], layout[1]];
        gallery.maps.extend(map(Some(permuted)));
        gallery.embeddings.extend(embedding(angle + 0.3));
        gallery.labels.push(class as u32);
        gallery.maps.extend(map(None));
        gallery.embeddings.extend(embedding(angle));
        gallery.labels.push(10 + class as u32);
    }
    (query, gallery)
}

fn config(depth: usize) -> StructuralRerankerConfig {
    StructuralRerankerConfig {
        depth,
        structural: StructuralConfig {
            marginals: Marginals::CrossCorrelation,
            sinkhorn: SinkhornConfig {
                tolerance: 1e-9,
                max_iters: 10_000,
                ..SinkhornConfig::default()
            },
        },
    }
}

/// The re-ranker as a `dml_eval::Reranker` (dml-ot does not depend on the evaluation crate; the
/// `train` crate holds the adapter its evaluation uses, and this test needs its own).
struct Eval<'a>(&'a StructuralReranker);

impl Reranker for Eval<'_> {
    fn depth(&self) -> usize {
        self.0.depth()
    }

    fn rerank(&self, query: usize, neighbours: &mut [Neighbour]) {
        let mut pairs: Vec<(u32, f32)> = neighbours.iter().map(|nb| (nb.index, nb.score)).collect();
        self.0.rerank(query, &mut pairs);
        for (nb, (_, score)) in neighbours.iter_mut().zip(pairs) {
            nb.score = score;
        }
    }
}

#[test]
fn structural_reranking_fixes_a_wrong_global_ranking() {
    let (query, gallery) = data();
    let sets = EvalSets::QueryGallery {
        query: Embeddings::new(&query.embeddings, 3, EMBEDDING).unwrap(),
        query_labels: &query.labels,
        gallery: Embeddings::new(&gallery.embeddings, 6, EMBEDDING).unwrap(),
        gallery_labels: &gallery.labels,
    };
    let accuracy = AccuracyConfig::new(Distance::Cosine).with_metrics([Metric::PrecisionAt1, Metric::RecallAt(2)]);
    let baseline = evaluate(&sets, &accuracy).unwrap();
    assert_eq!(
        baseline.precision_at_1,
        Some(0.0),
        "the synthetic set must fool the global ranking"
    );
    assert_eq!(baseline.recall_at_k[&2], 1.0);

    let reranker = config(2).init(&query.bank(), &gallery.bank()).unwrap();
    let reranked = evaluate_with_reranker(&sets, &accuracy, &Eval(&reranker)).unwrap();
    assert_eq!(reranked.precision_at_1, Some(1.0));

    // The scores themselves: same-class parts ≈ -(cos 0.3 + 1), texture = -(1 + 0.5).
    let scores = reranker.scores(0, &[0, 1]);
    assert!(
        (scores[0].0 - 0.3f64.cos()).abs() < 1e-6 && (scores[0].1 - 1.0).abs() < 1e-6,
        "{scores:?}"
    );
    assert!(
        (scores[1].0 - 1.0).abs() < 1e-6 && (scores[1].1 - 0.5).abs() < 1e-6,
        "{scores:?}"
    );
    let mut neighbours = [(1, 0.0), (0, 0.0)];
    reranker.rerank(0, &mut neighbours);
    assert!((neighbours[1].1 as f64 + 0.3f64.cos() + 1.0).abs() < 1e-5);
    assert!((neighbours[0].1 as f64 + 1.5).abs() < 1e-5);

    // Depth 0 turns re-ranking off; depth 1 re-scores only the (wrong) first neighbour.
    for depth in [0, 1] {
        let off = config(depth).init(&query.bank(), &gallery.bank()).unwrap();
        assert_eq!(off.depth(), depth);
        assert_eq!(evaluate_with_reranker(&sets, &accuracy, &Eval(&off)).unwrap(), baseline);
    }
}

#[test]
fn banks_are_validated_with_named_errors() {
    let (query, gallery) = data();
    let mut short = gallery.bank();
    short.maps = &gallery.maps[1..];
    let e = config(2).init(&query.bank(), &short).unwrap_err();
    assert!(
        matches!(
            e,
            OtError::Length {
                input: "gallery.maps",
                ..
            }
        ),
        "{e}"
    );
    let mut wide = gallery.bank();
    wide.embedding_dim = 2;
    wide.embeddings = &gallery.embeddings[..12];
    let e = config(2).init(&query.bank(), &wide).unwrap_err();
    assert!(
        matches!(
            e,
            OtError::Mismatch {
                what: "embedding_dim",
                ..
            }
        ),
        "{e}"
    );
    let nan = vec![f32::NAN; query.embeddings.len()];
    let mut bad = query.bank();
    bad.embeddings = &nan;
    let e = config(2).init(&bad, &gallery.bank()).unwrap_err();
    assert!(
        matches!(
            e,
            OtError::NotFinite {
                input: "query.embeddings",
                index: 0,
                ..
            }
        ),
        "{e}"
    );
}
