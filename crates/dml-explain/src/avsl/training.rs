//! AVSL's training objective (Zhang et al., Eq. 10): `L(d̂) + Σ_l w_l L(d^l)` for a pair-based
//! metric-learning loss `L`, where the overall distance `d̂` trains only the reliability
//! regression and the per-level distances `d^l` train the backbone and the embedder.
//!
//! A training step runs in the code's order: the batch's CAM edges update the moving average
//! first, then the graph is inferred with the updated edges.

use burn::module::{Module, Param};
use burn::tensor::{Device, Tensor};
use dml_losses::{MetricLoss, Miner};
use dml_models::AvslLevelOutput;

use super::certainty::{Certainty, certainty};
use super::graph::{AvslGraph, LevelInput, Reliability, infer};
use super::link_star::link_star;
use super::links::{LinkMemory, batch_links};
use crate::error::ExplainError;
use dml_ot::l2_normalize;

/// The learnable reliability regression `p = σ(γ (α ⊙ η ⊙ η′ + β))` of every level above the
/// lowest: `α` and `β` start at 0, so every node starts with reliability 0.5.
#[derive(Module, Debug)]
pub struct ReliabilityParams {
    /// `α` `[r]` per level `1..L`.
    pub coef: Vec<Param<Tensor<1>>>,
    /// `β` `[r]` per level `1..L`.
    pub bias: Vec<Param<Tensor<1>>>,
}

impl ReliabilityParams {
    /// Zero `α`, `β` for levels of `dims` `[r_0, …, r_L]`.
    pub fn new(dims: &[usize], device: &Device) -> Self {
        let zeros = |r: usize| Param::from_tensor(Tensor::zeros([r], device));
        Self {
            coef: dims[1..].iter().map(|&r| zeros(r)).collect(),
            bias: dims[1..].iter().map(|&r| zeros(r)).collect(),
        }
    }

    /// The regressions as the graph takes them (on the autodiff graph).
    pub fn regressions(&self) -> Vec<Reliability> {
        self.coef
            .iter()
            .zip(&self.bias)
            .map(|(c, b)| Reliability {
                coef: c.val(),
                bias: b.val(),
            })
            .collect()
    }
}

/// The graph's constants.
#[derive(Debug, Clone, PartialEq)]
pub struct AvslSettings {
    /// Lower-level nodes kept per higher-level node (`k` of Eq. 7).
    pub topk: usize,
    /// The reliability's factor γ (the code: 10).
    pub gamma: f64,
    /// The certainty definition.
    pub certainty: Certainty,
    /// `w_l` of each level's own loss term, low to high.
    pub level_weights: Vec<f64>,
}

/// What one training step's objective computed.
#[derive(Debug, Clone)]
pub struct AvslLoss {
    /// `L(d̂) + Σ_l w_l L(d^l)` `[1]`.
    pub loss: Tensor<1>,
    /// The graph of the batch against itself (nodes detached: it carries only the reliability's
    /// gradient).
    pub graph: AvslGraph,
    /// The top-k edges `W̃` the graph used.
    pub links: Vec<Tensor<2>>,
}

/// `[B, B]` squared Euclidean distances of the L2-normalised rows of `e` `[B, r]`: the level
/// distance `d^l = Σ_r δ^l` on the graph of the embeddings.
fn level_distance(e: Tensor<2>) -> Tensor<2> {
    let n = l2_normalize(e);
    (n.clone().unsqueeze_dim::<3>(1) - n.unsqueeze_dim::<3>(0))
        .square()
        .sum_dim(2)
        .squeeze_dim::<2>(2)
}

/// One step's objective from the levels' outputs (embeddings and CAMs of the batch, on the graph):
/// updates `memory` with the batch's edges, infers the graph with the reliability of `params`, and
/// returns `L(d̂) + Σ_l w_l L(d^l)`. The loss must be pair-based (it sees distance matrices, as in
/// DIML training).
#[allow(clippy::too_many_arguments)]
pub fn avsl_loss(
    outputs: &[AvslLevelOutput],
    params: &ReliabilityParams,
    memory: &mut LinkMemory,
    settings: &AvslSettings,
    loss: &MetricLoss,
    labels: &[u32],
    miner: Option<&Miner>,
    seed: u64,
) -> Result<AvslLoss, ExplainError> {
    if settings.level_weights.len() != outputs.len() {
        return Err(ExplainError::Config(format!(
            "avsl.level_weights: {} weights for {} levels",
            settings.level_weights.len(),
            outputs.len()
        )));
    }
    let cams: Vec<Tensor<4>> = outputs.iter().map(|o| o.cam.clone().detach()).collect();
    let edges = cams
        .windows(2)
        .map(|w| batch_links(w[0].clone(), w[1].clone()))
        .collect::<Result<Vec<_>, _>>()?;
    memory.update(&edges)?;
    let links = memory
        .values()
        .into_iter()
        .map(|l| link_star(l, settings.topk).map(|(star, _)| star))
        .collect::<Result<Vec<_>, _>>()?;
    // The overall distance trains the reliability only: nodes and certainties are constants.
    let levels: Vec<LevelInput> = outputs
        .iter()
        .zip(&cams)
        .map(|(o, cam)| {
            let e = o.embedding.clone().detach();
            let eta = certainty(cam.clone(), settings.certainty);
            LevelInput {
                query: e.clone(),
                reference: e,
                query_certainty: eta.clone(),
                reference_certainty: eta,
            }
        })
        .collect();
    let graph = infer(&levels, &links, &params.regressions(), settings.gamma)?;
    let fail = |e: dml_losses::LossError| ExplainError::Config(format!("AVSL loss: {e}"));
    let mut total = loss
        .forward_with_matrix(graph.distance.clone(), false, labels, miner, seed)
        .map_err(fail)?
        .loss;
    for (o, &w) in outputs.iter().zip(&settings.level_weights) {
        if w != 0.0 {
            let d = level_distance(o.embedding.clone());
            let term = loss
                .forward_with_matrix(d, false, labels, miner, seed)
                .map_err(fail)?
                .loss;
            total = total + term.mul_scalar(w);
        }
    }
    Ok(AvslLoss {
        loss: total,
        graph,
        links,
    })
}
