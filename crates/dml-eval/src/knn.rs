//! Plain k-nearest-neighbour lists for callers that want them (small k).

use crate::distance::Distance;
use crate::embeddings::Embeddings;
use crate::error::EvalError;
use crate::rerank::Reranker;
use crate::search::{self, SearchOptions, SearchSpec, SearchStats};

/// The `k` nearest references of every query, nearest first.
///
/// Equality compares `k`, indices and distances, not the timing in [`Neighbours::stats`].
#[derive(Debug, Clone)]
pub struct Neighbours {
    /// Neighbours per query.
    pub k: usize,
    /// `queries × k` reference rows, row-major: query `q`'s list is `indices[q * k .. (q + 1) * k]`,
    /// ordered by `(distance, index)` ascending.
    pub indices: Vec<u32>,
    /// `queries × k` distances matching `indices` (see [`Distance`] for what is reported); a re-ranked
    /// prefix holds the re-ranker's scores instead.
    pub distances: Vec<f32>,
    /// Where the search spent its time.
    pub stats: SearchStats,
}

impl PartialEq for Neighbours {
    fn eq(&self, other: &Self) -> bool {
        self.k == other.k && self.indices == other.indices && self.distances == other.distances
    }
}

impl Neighbours {
    /// Number of queries.
    pub fn queries(&self) -> usize {
        self.indices.len().checked_div(self.k).unwrap_or(0)
    }

    /// Query `q`'s `(indices, distances)`, each of length `k`.
    ///
    /// # Panics
    /// When `q >= queries()`, like slice indexing.
    pub fn row(&self, q: usize) -> (&[u32], &[f32]) {
        let r = q * self.k..(q + 1) * self.k;
        (&self.indices[r.clone()], &self.distances[r])
    }
}

/// Exact k-NN of every `query` row among the `reference` rows with default [`SearchOptions`].
///
/// With `exclude_self`, query row `i` never retrieves reference row `i` (by index, so duplicates of the
/// query elsewhere in the reference set are still retrieved); this is the "query set = reference set"
/// evaluation, and requires `query.rows() <= reference.rows()`.
///
/// # Errors
/// [`EvalError::ZeroK`] for `k == 0`; [`EvalError::KTooLarge`] when `k` exceeds the references available
/// per query; [`EvalError::DimMismatch`], [`EvalError::SelfExclusionShape`], and the preparation errors of
/// [`Distance`] ([`EvalError::ZeroNorm`], [`EvalError::MagnitudeTooLarge`]).
pub fn knn(
    query: &Embeddings<'_>,
    reference: &Embeddings<'_>,
    k: usize,
    distance: Distance,
    exclude_self: bool,
) -> Result<Neighbours, EvalError> {
    knn_with(
        query,
        reference,
        k,
        distance,
        exclude_self,
        &SearchOptions::default(),
        None,
    )
}

/// [`knn`] with explicit [`SearchOptions`] and an optional [`Reranker`] applied to the first
/// `reranker.depth()` neighbours (the search retrieves `max(k, depth)` and returns the first `k` after
/// re-ranking).
///
/// # Errors
/// Those of [`knn`], invalid options ([`EvalError::Options`]) and re-ranker misbehaviour
/// ([`EvalError::RerankerNan`], [`EvalError::RerankerChangedCandidates`]).
pub fn knn_with(
    query: &Embeddings<'_>,
    reference: &Embeddings<'_>,
    k: usize,
    distance: Distance,
    exclude_self: bool,
    options: &SearchOptions,
    reranker: Option<&dyn Reranker>,
) -> Result<Neighbours, EvalError> {
    check_pair(query, reference, exclude_self)?;
    let available = available_refs(reference.rows(), exclude_self);
    check_k("k", k, available, reference.rows(), exclude_self)?;
    let q = distance.prepare(query, "query")?;
    let r = distance.prepare(reference, "reference")?;
    let depth = reranker.map_or(0, |rr| rr.depth());
    let spec = SearchSpec {
        query: &q,
        reference: &r,
        distance,
        exclude_self,
        kk: k.max(depth).min(available),
        want_distances: true,
        reranker,
    };
    let rows: Vec<u32> = (0..query.rows() as u32).collect();
    let init = || (Vec::<u32>::new(), Vec::<f32>::new());
    let (blocks, stats) = search::search(&spec, &rows, options, init, |s, _q, idx, dist| {
        s.0.extend_from_slice(&idx[..k]);
        s.1.extend_from_slice(&dist[..k]);
    })?;
    let mut indices = Vec::with_capacity(query.rows() * k);
    let mut distances = Vec::with_capacity(query.rows() * k);
    for (i, d) in blocks {
        indices.extend_from_slice(&i);
        distances.extend_from_slice(&d);
    }
    Ok(Neighbours {
        k,
        indices,
        distances,
        stats,
    })
}

/// References available to each query.
pub(crate) fn available_refs(reference_rows: usize, exclude_self: bool) -> usize {
    reference_rows.saturating_sub(usize::from(exclude_self))
}

/// Shape checks shared by [`knn_with`] and the evaluation.
pub(crate) fn check_pair(
    query: &Embeddings<'_>,
    reference: &Embeddings<'_>,
    exclude_self: bool,
) -> Result<(), EvalError> {
    if query.dim() != reference.dim() {
        return Err(EvalError::DimMismatch {
            query_dim: query.dim(),
            reference_dim: reference.dim(),
        });
    }
    if exclude_self && query.rows() > reference.rows() {
        return Err(EvalError::SelfExclusionShape {
            query_rows: query.rows(),
            reference_rows: reference.rows(),
        });
    }
    Ok(())
}

/// Checks a requested neighbour count `k` (named `what`) against the available references.
pub(crate) fn check_k(
    what: &'static str,
    k: usize,
    available: usize,
    reference_rows: usize,
    exclude_self: bool,
) -> Result<(), EvalError> {
    if k == 0 {
        return Err(EvalError::ZeroK { what });
    }
    if k > available {
        let self_note = if exclude_self { ", minus the query itself" } else { "" };
        return Err(EvalError::KTooLarge {
            what,
            k,
            available,
            reference_rows,
            self_note,
        });
    }
    Ok(())
}
