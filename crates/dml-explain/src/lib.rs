//! Explanations of similarity: Grad-CAM similarity attention and the similarity-mining loss
//! (Zheng et al.), with the steps that turn an attention map into an image-sized one;
//! map-agnostic faithfulness and localisation metrics ([`faithfulness`]: deletion curves, the
//! pointing game, IoU against object masks, the centre-prior baseline); and rendering of maps
//! as PNG overlays with a colour bar ([`render`]); explanation metrics on plain maps, checked
//! against Quantus, SciPy and scikit-image ([`metrics`]: localisation, complexity, map similarity).
//!
//! This crate is the explanation layer of the workspace (see `ARCHITECTURE.md` at the
//! repository root: it sits on `dml-models`, `dml-losses` and `dml-ot`). Every method takes an
//! [`dml_models::EmbeddingModel`] and returns maps as tensors.
#![warn(missing_docs)]

pub mod analysis;
pub mod attention;
pub mod avsl;
mod error;
pub mod faithfulness;
pub mod metrics;
pub mod render;
pub mod saliency;

pub use attention::cam::cam;
pub use attention::closed_form::{head_alpha, head_gradient, stage_alpha};
pub use attention::grad_cam::{AlphaMethod, SimilarityAttention, similarity_attention};
pub use attention::mining::{MiningOutput, MiningTuples, SimilarityMining, SimilarityMiningConfig, soft_mask};
pub use attention::normalize::min_max_normalize;
pub use attention::tuple::{TupleKind, weight_vectors};
pub use attention::upsample::{interpolation_matrix, upsample_bilinear};
pub use error::ExplainError;
