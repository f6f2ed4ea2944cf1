//! Statistics that compare what deep-metric-learning models have learned (Kobs et al., "Do
//! Different Deep Metric Learning Losses Lead to Similar Learned Features?", ICCV 2021), on
//! plain host slices, without Burn:
//!
//! - [`comparison`]: pixel level (Sec. 3.1): the Pearson correlation and Jensen–Shannon
//!   divergence of two models' saliency maps of the same image, correlations averaged in
//!   Fisher-z space, and the all-pairs matrix over `N` models;
//! - [`nr_precision`](mod@nr_precision): property level (Sec. 4.1, Eq. 4–5): R-Precision and
//!   Normalized R-Precision of embeddings grouped by an image property, with the paper's 2.576
//!   rule;
//! - [`mann_whitney`]: the Mann–Whitney U test with which the paper compares loss families
//!   (Sec. 4.2), as scipy's asymptotic `mannwhitneyu`.
//!
//! The numbers follow the authors' code where it and the paper differ (each module says where),
//! and are checked against numpy/scipy oracles (`saliency_comparison`, `nr_precision`,
//! `mann_whitney` reference cases).

pub mod comparison;
mod error;
pub mod mann_whitney;
pub mod nr_precision;

pub use comparison::{
    ComparisonMatrix, FISHER_Z_LIMIT, FisherSummary, Jsd, MapComparison, compare_maps, comparison_matrix,
    fisher_aggregate, fisher_z, jsd, pearson,
};
pub use error::AnalysisError;
pub(crate) use mann_whitney::mid_ranks;
pub use mann_whitney::{MannWhitney, mann_whitney_u};
pub use nr_precision::{NR_PRECISION_CRITICAL_VALUE, NrPrecision, is_significant, nr_precision, nr_precision_many};
