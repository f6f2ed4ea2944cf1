//! Explanation metrics on plain maps, one family per file, each checked against the reference
//! toolkits (Quantus 0.6, SciPy, scikit-image) on the shipped reference cases:
//!
//! - localisation against a ground-truth mask: [`pointing_game`],
//!   [`relevance_mass_accuracy`], [`top_k_intersection`], [`relevance_rank_accuracy`],
//!   [`roc_auc`];
//! - complexity, with no ground truth: [`sparseness`] (Gini), [`complexity`] (entropy),
//!   [`effective_complexity`];
//! - similarity of two maps, for randomisation and partner-sensitivity tests: [`spearman`]
//!   (signed or of magnitudes), [`ssim`];
//! - ROAD's noisy linear imputation of removed pixels, for deletion curves that stay in
//!   distribution: [`noisy_linear_imputation`], and ROAD's curves of a map under a scorer
//!   (most and least relevant first, random orders, normalised by the untouched score):
//!   [`road_curves`].
//!
//! A map is a row-major `[h, w]` slice of finite `f32` or `f64` values (larger is more
//! relevant), a mask a `[h, w]` slice of `bool` or `u8` (`> 0` is object); every function
//! returns one score, as `f64`, or a [`FaithError`](crate::faithfulness::FaithError) naming the
//! input at fault.

mod complexity;
mod imputation;
mod input;
mod localisation;
mod road_curves;
mod similarity;

pub use complexity::{complexity, effective_complexity, sparseness};
pub use imputation::{DIAGONAL_WEIGHT, EDGE_WEIGHT, noisy_linear_imputation};
pub use localisation::{pointing_game, relevance_mass_accuracy, relevance_rank_accuracy, roc_auc, top_k_intersection};
pub use road_curves::{RoadCurves, relevance_order, road_curve, road_curves};
pub use similarity::{SSIM_WINDOW, spearman, ssim};
