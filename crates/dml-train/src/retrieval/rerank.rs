//! DIML's multi-scale re-ranking (Sec. 3.3 "MM", Appendix A.2) plugged into the evaluator.
//!
//! `dml_ot` keeps its re-ranker free of the evaluation crate: [`StructuralReranker::rerank`] re-scores
//! plain `(gallery row, score)` pairs. This adapter is the one place that connects it to
//! [`dml_eval::Reranker`], which `dml_eval::evaluate_with_reranker` calls for every query.

use dml_eval::{Neighbour, Reranker};
use dml_ot::StructuralReranker;

/// A [`StructuralReranker`] as the evaluator's [`Reranker`]: the first `depth` neighbours of each query
/// are re-scored with `-(cos(ψ^q, ψ^g) + s_struct(z^q, z^g))` (DIML Eq. 5 plus the global cosine;
/// smaller is closer), exactly as [`StructuralReranker::rerank`] scores them.
#[derive(Debug, Clone)]
pub struct StructuralRerankerAdapter(pub StructuralReranker);

impl Reranker for StructuralRerankerAdapter {
    fn depth(&self) -> usize {
        self.0.depth()
    }

    fn rerank(&self, query: usize, neighbours: &mut [Neighbour]) {
        // The evaluator's neighbour type belongs to dml_eval, so the pairs are copied out and the new
        // scores written back (at most `depth` entries per query, next to a Sinkhorn solve per entry).
        let mut pairs: Vec<(u32, f32)> = neighbours.iter().map(|nb| (nb.index, nb.score)).collect();
        self.0.rerank(query, &mut pairs);
        for (nb, (_, score)) in neighbours.iter_mut().zip(pairs) {
            nb.score = score;
        }
    }
}

#[cfg(test)]
mod tests {
    use dml_ot::{FeatureBank, StructuralRerankerConfig};

    use super::*;

    const CHANNELS: usize = 4;
    const LOCATIONS: usize = 4;
    const EMBEDDING: usize = 3;

    /// Deterministic values in `[-1, 1)` (a small linear congruential generator), so that the test
    /// needs no random-number crate.
    fn values(len: usize, seed: u64) -> Vec<f32> {
        let mut state = seed;
        (0..len)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
            })
            .collect()
    }

    fn bank<'a>(maps: &'a [f32], embeddings: &'a [f32], rows: usize) -> FeatureBank<'a> {
        FeatureBank {
            maps,
            embeddings,
            rows,
            channels: CHANNELS,
            locations: LOCATIONS,
            embedding_dim: EMBEDDING,
        }
    }

    #[test]
    fn the_adapter_reproduces_the_inherent_rerank() {
        let (queries, gallery) = (3, 5);
        let (q_maps, q_emb) = (
            values(queries * CHANNELS * LOCATIONS, 1),
            values(queries * EMBEDDING, 2),
        );
        let (g_maps, g_emb) = (
            values(gallery * CHANNELS * LOCATIONS, 3),
            values(gallery * EMBEDDING, 4),
        );
        let reranker = StructuralRerankerConfig {
            depth: 4,
            ..StructuralRerankerConfig::default()
        }
        .init(&bank(&q_maps, &q_emb, queries), &bank(&g_maps, &g_emb, gallery))
        .expect("valid banks");
        let adapter = StructuralRerankerAdapter(reranker.clone());
        assert_eq!(adapter.depth(), 4);
        for query in 0..queries {
            let rows = [(query + 1) % gallery, 4, 0, 2];
            let mut pairs: Vec<(u32, f32)> = rows.iter().map(|&r| (r as u32, 9.0)).collect();
            reranker.rerank(query, &mut pairs);
            let mut neighbours: Vec<Neighbour> = rows
                .iter()
                .map(|&r| Neighbour {
                    index: r as u32,
                    score: 9.0,
                })
                .collect();
            adapter.rerank(query, &mut neighbours);
            let adapted: Vec<(u32, f32)> = neighbours.iter().map(|nb| (nb.index, nb.score)).collect();
            assert_eq!(adapted, pairs, "query {query}");
            assert!(pairs.iter().all(|&(_, s)| s != 9.0 && s.is_finite()), "{pairs:?}");
        }
        // No neighbours: nothing to re-score, on both sides.
        adapter.rerank(0, &mut []);
    }
}
