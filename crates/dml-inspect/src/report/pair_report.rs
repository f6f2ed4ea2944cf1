//! What the pair view of a report holds: the numbers of every method for one pair of images
//! ([`PairReport`], written as `report.json`) and the settings they were computed with.

use std::path::PathBuf;

use dml_explain::TupleKind;
use dml_explain::saliency::smoothgrad::MapOrder;
use dml_ot::{Convergence, FlowPair};
use serde::Serialize;

use crate::avsl::{Decomposition, LevelReport};

/// Settings shared by every pair a report explains.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportOptions {
    /// SmoothGrad samples per image (Kobs et al.: 50).
    pub samples: usize,
    /// SmoothGrad noise scale relative to the image's value range (Kobs et al.: 0.15).
    pub spread: f64,
    /// Seed of the SmoothGrad noise.
    pub seed: u64,
    /// Location pairs drawn as flows (those with the largest contribution).
    pub flows: usize,
    /// Side `G` of DIML's grid (the last feature map is reduced to `G × G`).
    pub grid: usize,
    /// AVSL nodes shown per level (1 or 2: the two images of two nodes fill a panel).
    pub avsl_top: usize,
}

impl Default for ReportOptions {
    /// Kobs et al.'s SmoothGrad settings, DIML's grid of 4, 8 flows, 2 AVSL nodes per level.
    fn default() -> Self {
        Self {
            samples: 50,
            spread: 0.15,
            seed: 0,
            flows: 8,
            grid: 4,
            avsl_top: 2,
        }
    }
}

/// A method's result, or why the run cannot give it (shown as a "not available" cell, never faked).
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Availability<T> {
    /// The method ran.
    Available(T),
    /// The method does not apply to this run.
    NotAvailable {
        /// Why, naming the run setting it needs.
        reason: String,
    },
}

/// The similarity of the two global embeddings `f¹, f²` `[D]`.
#[derive(Debug, Clone, Serialize)]
pub struct GlobalSimilarity {
    /// `cos(f¹, f²)`.
    pub cosine: f32,
    /// `‖f¹ − f²‖₂`.
    pub euclidean: f32,
    /// The distance retrieval ranks by: `cosine` (`1 − cos`, normalised embeddings) or `euclidean`.
    pub retrieval_distance: String,
    /// That distance's value for the pair.
    pub distance: f32,
}

/// DIML's structural matching of the pair (Zhao et al., Sec. 3.3 and Figure 5).
#[derive(Debug, Clone, Serialize)]
pub struct DimlPair {
    /// Side `G` of the grid; each image has `G·G` locations, row-major.
    pub grid: usize,
    /// `s_struct = Σ T* ⊙ S` (Eq. 5).
    pub structural_similarity: f64,
    /// `d_struct = Σ T* ⊙ (1 − S)` (Eq. 6).
    pub structural_distance: f64,
    /// `cos(f¹, f²) + s_struct`: what DIML's multi-scale re-ranking sorts by (Appendix A.2).
    pub rerank_similarity: f64,
    /// Cosine of the two mean local embeddings.
    pub mean_local_cosine: f64,
    /// The marginals `μ¹` and `μ²` `[G·G]` (cross-correlation, Eq. 8–9), row-major over the grid.
    pub marginals: [Vec<f64>; 2],
    /// The location pairs with the largest contributions `T*_ij S_ij`, largest first.
    pub top_flows: Vec<FlowPair>,
    /// How the Sinkhorn solver converged.
    pub convergence: Convergence,
}

/// Similarity attention of the pair as a same-class pair (Zheng et al., Sec. 3.1).
#[derive(Debug, Clone, Serialize)]
pub struct AttentionPair {
    /// The explained stage (the backbone's last).
    pub stage: String,
    /// The tuple form (`siamese_same`: why the two are similar).
    pub kind: TupleKind,
    /// The scores `sⁱ = wᵀfⁱ` of both images.
    pub scores: [f32; 2],
    /// `[h, w]` of the maps.
    pub map_shape: [usize; 2],
    /// The attention `Mⁱ` `[h, w]` of both images, row-major.
    pub maps: [Vec<f32>; 2],
}

/// AVSL's graph of the pair (Zhang et al., Eq. 9–11).
#[derive(Debug, Clone, Serialize)]
pub struct AvslPairReport {
    /// The overall distance `d̂` (Eq. 9).
    pub d_hat: f32,
    /// `Σ_l Σ λ ⊙ δ`, equal to `d̂` (Property 1).
    pub recomposed: f32,
    /// Every level with its nodes of largest attribution (their CAMs included).
    pub levels: Vec<LevelReport>,
    /// The least reliable top-level node and the lower-level nodes it is rectified with.
    pub decomposition: Decomposition,
}

/// SmoothGrad saliency of both images (Kobs et al., Eq. 1–2, the authors' map order).
#[derive(Debug, Clone, Serialize)]
pub struct SaliencyPair {
    /// Noisy samples per image.
    pub samples: usize,
    /// Noise scale relative to the image's value range.
    pub spread: f64,
    /// Seed of the noise.
    pub seed: u64,
    /// The post-processing order.
    pub order: MapOrder,
    /// The distance to the black image's embedding that is differentiated (the run's loss's).
    pub distance: String,
    /// The 99th percentile each raw map was divided by (the maps are shown clipped to `[0, 1]`).
    pub p99: [f64; 2],
}

/// The figures of a pair, as file names relative to the pair's folder.
#[derive(Debug, Clone, Serialize)]
pub struct PairFiles {
    /// Both inputs as the model sees them (after the evaluation transform).
    pub images: [String; 2],
    /// DIML's marginals over both images.
    pub marginals: String,
    /// DIML's top flows between the images.
    pub flows: String,
    /// Similarity attention of both images.
    pub attention: String,
    /// AVSL's node CAMs, one figure per level (empty when AVSL is not available).
    pub avsl: Vec<String>,
    /// SmoothGrad saliency of both images.
    pub saliency: String,
}

/// Everything the pair view shows (`report.json` of a pair).
#[derive(Debug, Clone, Serialize)]
pub struct PairReport {
    /// The checkpoint explained.
    pub checkpoint: PathBuf,
    /// The two image files.
    pub images: [PathBuf; 2],
    /// `[H, W]` of the network input.
    pub input_size: [usize; 2],
    /// Global similarity of the embeddings.
    pub global: GlobalSimilarity,
    /// DIML's structural similarity, marginals and flows.
    pub diml: DimlPair,
    /// Similarity attention.
    pub attention: AttentionPair,
    /// AVSL's graph (AVSL runs only).
    pub avsl: Availability<AvslPairReport>,
    /// SmoothGrad saliency.
    pub saliency: SaliencyPair,
    /// The figures.
    pub files: PairFiles,
}
