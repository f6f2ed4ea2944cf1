//! The crate's error type.

use thiserror::Error;

/// Every way an evaluation can reject its input.
///
/// Messages name the offending input (`"query"`, `"reference"`, `"labels_true"`, ...), the row and the
/// shapes involved, so that a training loop can log them without extra context.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum EvalError {
    /// The flat buffer does not hold `rows × dim` values.
    #[error("embeddings: buffer has {len} values but rows × dim = {rows} × {dim} = {expected}")]
    ShapeMismatch {
        /// Length of the flat buffer that was passed.
        len: usize,
        /// Declared number of rows.
        rows: usize,
        /// Declared number of columns.
        dim: usize,
        /// `rows * dim`, or `usize::MAX` when that product overflows.
        expected: usize,
    },
    /// Embeddings with zero columns cannot be compared.
    #[error("embeddings: dim must be at least 1 (got rows = {rows}, dim = 0)")]
    ZeroDim {
        /// Declared number of rows.
        rows: usize,
    },
    /// A value is NaN or infinite.
    #[error("embeddings: row {row}, column {col} is {value}; embeddings must be finite")]
    NonFinite {
        /// Row of the offending value.
        row: usize,
        /// Column of the offending value.
        col: usize,
        /// The offending value.
        value: f32,
    },
    /// A row's squared norm is so large that squared distances would overflow `f32`.
    #[error(
        "{input}: row {row} has squared norm {squared_norm:e}, above the supported {limit:e} (distances would overflow f32)"
    )]
    MagnitudeTooLarge {
        /// Which input (`"query"` or `"reference"`).
        input: &'static str,
        /// Offending row.
        row: usize,
        /// Its squared norm, computed in `f64`.
        squared_norm: f64,
        /// The largest supported squared norm.
        limit: f64,
    },
    /// Cosine distance is undefined for an all-zero row.
    #[error("{input}: row {row} has zero norm, so its cosine distance is undefined")]
    ZeroNorm {
        /// Which input (`"query"` or `"reference"`).
        input: &'static str,
        /// Offending row.
        row: usize,
    },
    /// Query and reference embeddings have different widths.
    #[error("query has dim {query_dim} but reference has dim {reference_dim}")]
    DimMismatch {
        /// Columns of the query embeddings.
        query_dim: usize,
        /// Columns of the reference embeddings.
        reference_dim: usize,
    },
    /// A label slice does not have one label per embedding row.
    #[error("{input}: {labels} labels for {rows} embedding rows")]
    LabelCount {
        /// Which input (`"query_labels"`, `"reference_labels"`, ...).
        input: &'static str,
        /// Number of labels passed.
        labels: usize,
        /// Number of embedding rows.
        rows: usize,
    },
    /// Self-exclusion pairs query row `i` with reference row `i`, so the query set cannot be larger.
    #[error(
        "exclude_self needs query rows ({query_rows}) <= reference rows ({reference_rows}): query i is reference i"
    )]
    SelfExclusionShape {
        /// Rows of the query embeddings.
        query_rows: usize,
        /// Rows of the reference embeddings.
        reference_rows: usize,
    },
    /// A neighbour count of zero was requested.
    #[error("{what} must be at least 1")]
    ZeroK {
        /// Which parameter (`"k"`, `"recall_at_k"`, `"n_clusters"`, ...).
        what: &'static str,
    },
    /// More neighbours were requested than there are references to return.
    #[error(
        "{what} = {k} but only {available} references are available per query (reference rows {reference_rows}{self_note})"
    )]
    KTooLarge {
        /// Which parameter asked for them.
        what: &'static str,
        /// The requested count.
        k: usize,
        /// References available per query after self-exclusion.
        available: usize,
        /// Rows of the reference embeddings.
        reference_rows: usize,
        /// `", minus the query itself"` when self-exclusion applies, else empty.
        self_note: &'static str,
    },
    /// Invalid search options.
    #[error("search options: {0}")]
    Options(String),
    /// A re-ranker produced a NaN score.
    #[error("re-ranker returned a NaN score for query {query}, reference {reference}")]
    RerankerNan {
        /// Query row being re-ranked.
        query: usize,
        /// Reference row whose score is NaN.
        reference: u32,
    },
    /// A re-ranker changed the set of candidate indices it was given.
    #[error("re-ranker changed the candidate indices of query {query}; it may only change scores and order")]
    RerankerChangedCandidates {
        /// Query row being re-ranked.
        query: usize,
    },
    /// Two label vectors that must be paired have different lengths.
    #[error("labels_true has {true_len} entries but labels_pred has {pred_len}")]
    LabelingLength {
        /// Length of the ground-truth labeling.
        true_len: usize,
        /// Length of the predicted labeling.
        pred_len: usize,
    },
    /// k-means was asked for more clusters than there are points.
    #[error("k-means: {n_clusters} clusters requested for {rows} points")]
    TooManyClusters {
        /// Requested number of clusters.
        n_clusters: usize,
        /// Number of points.
        rows: usize,
    },
}
