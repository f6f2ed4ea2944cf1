//! The re-ranking hook applied to the head of every query's neighbour list.

/// One retrieved reference of a query.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Neighbour {
    /// Row of the reference in the reference (gallery) set.
    pub index: u32,
    /// Distance-like score; smaller is closer. Before re-ranking it is the reported distance of the search
    /// ([`crate::Distance`]); a re-ranker overwrites it with its own score.
    pub score: f32,
}

/// Re-scores the first [`Reranker::depth`] neighbours of every query before metrics are computed.
///
/// The search retrieves `max(k, depth)` neighbours per query (fewer when the reference set is smaller),
/// sorted by `(distance, index)`. The first `depth` of them are handed to [`Reranker::rerank`]; afterwards
/// the evaluator sorts that prefix by `(score, index)` ascending, so a re-ranker only has to assign scores
/// (it may also reorder the slice; the order it leaves is ignored). The neighbours after the prefix keep
/// their distance order. Metrics are computed on the resulting list, so a re-ranker with `depth >= 1` can
/// change Precision@1, MAP@R and every other metric.
///
/// A re-ranker must not change the set of indices it receives (duplicating or replacing an entry is
/// reported as [`crate::EvalError::RerankerChangedCandidates`]) and must not produce NaN scores
/// ([`crate::EvalError::RerankerNan`]). It is called from several threads at once, hence `Sync`.
pub trait Reranker: Sync {
    /// How many of the nearest neighbours of each query are re-scored.
    fn depth(&self) -> usize;

    /// Assigns new scores to `neighbours` (the `min(depth, available)` nearest references of query row
    /// `query`, nearest first).
    fn rerank(&self, query: usize, neighbours: &mut [Neighbour]);
}
