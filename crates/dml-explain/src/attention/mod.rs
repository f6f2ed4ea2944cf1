//! Similarity attention (Zheng et al., "Learning Similarity Attention"): Grad-CAM maps that
//! explain why the images of a Siamese pair, triplet or quadruplet are (dis)similar, and the
//! similarity-mining loss that trains with them.

pub mod cam;
pub mod closed_form;
pub mod grad_cam;
pub mod mining;
pub mod normalize;
pub mod tuple;
pub mod upsample;
