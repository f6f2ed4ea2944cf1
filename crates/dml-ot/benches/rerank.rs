//! Re-ranking cost per query: K = 100 candidates, G = 4 (16 locations), C = 256 channels, 1,000
//! queries against a gallery of 3,000. One measurement line (`dml_testkit::bench`) per line:
//! `rerank/scores_single_thread` (seconds per query on one thread) and
//! `rerank/evaluate_with_reranker` (seconds of the whole evaluation, queries in parallel).
//!
//! Run with `cargo bench -p dml-ot --bench rerank`. DIML's target is at most 5 ms per query;
//! `cargo xtask bench --peers` times DIML's batched PyTorch re-ranking of the same problem
//! (`xtask/peers/rerank.py`) in the same run.

use std::time::Instant;

use dml_eval::{
    AccuracyConfig, Distance, Embeddings, EvalSets, Metric, Neighbour, Reranker, evaluate, evaluate_with_reranker,
};
use dml_ot::{FeatureBank, StructuralReranker, StructuralRerankerConfig};

const QUERIES: usize = 1000;
const GALLERY: usize = 3000;
const CHANNELS: usize = 256;
const LOCATIONS: usize = 16;
const EMBEDDING: usize = 128;
const DEPTH: usize = 100;
const CLASSES: usize = 100;

/// SplitMix64 normal samples, so that the bench needs no random-number crate.
struct Rng(u64);

impl Rng {
    fn uniform(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }

    fn normal(&mut self) -> f32 {
        let u = self.uniform().max(1e-300);
        ((-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * self.uniform()).cos()) as f32
    }
}

/// Maps and embeddings of `rows` images: a class prototype plus noise, rectified like ResNet features.
fn images(rng: &mut Rng, prototypes: &[f32], rows: usize) -> (Vec<f32>, Vec<f32>, Vec<u32>) {
    let per_map = CHANNELS * LOCATIONS;
    let mut maps = Vec::with_capacity(rows * per_map);
    let mut embeddings = Vec::with_capacity(rows * EMBEDDING);
    let mut labels = Vec::with_capacity(rows);
    for r in 0..rows {
        let class = r % CLASSES;
        labels.push(class as u32);
        let proto = &prototypes[class * per_map..(class + 1) * per_map];
        maps.extend(proto.iter().map(|p| (p + rng.normal()).max(0.0)));
        let map = &maps[r * per_map..];
        // The embedding: a fixed projection of the channel means (first EMBEDDING channels).
        embeddings.extend((0..EMBEDDING).map(|c| map[c * LOCATIONS..(c + 1) * LOCATIONS].iter().sum::<f32>()));
    }
    (maps, embeddings, labels)
}

fn main() {
    let mut rng = Rng(42);
    let prototypes: Vec<f32> = (0..CLASSES * CHANNELS * LOCATIONS).map(|_| rng.normal()).collect();
    let (q_maps, q_emb, q_labels) = images(&mut rng, &prototypes, QUERIES);
    let (g_maps, g_emb, g_labels) = images(&mut rng, &prototypes, GALLERY);
    let bank = |maps: &'static [f32], embeddings: &'static [f32], rows| FeatureBank {
        maps,
        embeddings,
        rows,
        channels: CHANNELS,
        locations: LOCATIONS,
        embedding_dim: EMBEDDING,
    };
    let (q_maps, q_emb, g_maps, g_emb) = (q_maps.leak(), q_emb.leak(), g_maps.leak(), g_emb.leak());
    let reranker = StructuralRerankerConfig {
        depth: DEPTH,
        ..StructuralRerankerConfig::default()
    }
    .init(&bank(q_maps, q_emb, QUERIES), &bank(g_maps, g_emb, GALLERY))
    .expect("valid banks");

    // Single thread: the structural scores of 100 candidates for 200 queries.
    let measured = 200;
    let candidates: Vec<Vec<usize>> = (0..measured)
        .map(|_| (0..DEPTH).map(|_| (rng.uniform() * GALLERY as f64) as usize).collect())
        .collect();
    let _ = reranker.scores(0, &candidates[0]);
    let t = Instant::now();
    let mut checksum = 0.0;
    for (q, c) in candidates.iter().enumerate() {
        checksum += reranker.scores(q, c).iter().map(|s| s.1).sum::<f64>();
    }
    let single = t.elapsed().as_secs_f64() / measured as f64;
    assert!(checksum.is_finite());
    dml_testkit::bench::emit(
        "rerank/scores_single_thread",
        single,
        "query (100 candidates)",
        serde_json::json!({"depth": DEPTH, "grid": 4, "channels": CHANNELS, "queries": measured, "threads": 1}),
    );

    // Whole evaluation, queries in parallel, with and without the re-ranker.
    let sets = EvalSets::QueryGallery {
        query: Embeddings::new(q_emb, QUERIES, EMBEDDING).expect("finite"),
        query_labels: &q_labels,
        gallery: Embeddings::new(g_emb, GALLERY, EMBEDDING).expect("finite"),
        gallery_labels: &g_labels,
    };
    let config = AccuracyConfig::new(Distance::Cosine).with_metrics(Metric::PML_KNN);
    let t = Instant::now();
    let base = evaluate(&sets, &config).expect("evaluation");
    let base_ms = t.elapsed().as_secs_f64() * 1e3;
    let t = Instant::now();
    let reranked = evaluate_with_reranker(&sets, &config, &Eval(&reranker)).expect("evaluation");
    let rerank_ms = t.elapsed().as_secs_f64() * 1e3;
    let threads = rayon::current_num_threads();
    dml_testkit::bench::emit(
        "rerank/evaluate_with_reranker",
        rerank_ms / 1e3,
        "evaluation (1,000 queries)",
        serde_json::json!({
            "depth": DEPTH,
            "grid": 4,
            "channels": CHANNELS,
            "queries": QUERIES,
            "gallery": GALLERY,
            "threads": threads,
            "evaluate_seconds": base_ms / 1e3,
            "rerank_ms_per_query_wall": (rerank_ms - base_ms) / QUERIES as f64,
            "precision_at_1": [base.precision_at_1, reranked.precision_at_1],
            "map_at_r": [base.mean_average_precision_at_r, reranked.mean_average_precision_at_r],
        }),
    );
}

/// The re-ranker as a `dml_eval::Reranker`, as the `train` crate adapts it (dml-ot does not depend on
/// the evaluation crate).
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
