//! AVSL's training objective (Zhang et al., Eq. 10): `L(d̂) + Σ_l w_l L(d^l)` for a pair-based
//! metric-learning loss `L` or Proxy-Anchor in distance form (Eq. 14, [`Criterion`]), where the
//! overall distance `d̂` trains only the reliability regression and the per-level distances `d^l`
//! train the backbone and the embedder.
//!
//! A training step runs in the code's order: the batch's CAM edges update the moving average
//! first, then the graph is inferred with the updated edges.

use burn::module::{Module, Param};
use burn::tensor::{Device, Tensor};
use dml_losses::{MetricLoss, Miner};
use dml_models::AvslLevelOutput;

use super::certainty::{Certainty, certainty};
use super::graph::{AvslGraph, LevelInput, Reliability, infer};
use super::links::{LinkMemory, batch_links};
use super::proxy_anchor::{LevelProxies, ProxyAnchorDistance};
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

/// `[B, M]` squared Euclidean distances of the L2-normalised rows of `e` `[B, r]` and `reference`
/// `[M, r]`: the level distance `d^l = Σ_r δ^l`.
fn level_distance(e: Tensor<2>, reference: Tensor<2>) -> Tensor<2> {
    let (n, m) = (l2_normalize(e), l2_normalize(reference));
    (n.unsqueeze_dim::<3>(1) - m.unsqueeze_dim::<3>(0))
        .square()
        .sum_dim(2)
        .squeeze_dim::<2>(2)
}

/// The loss AVSL trains with (Zhang et al., Appendix A.1).
pub enum Criterion<'a> {
    /// A pair-based loss of the catalogue on the batch's `[B, B]` distance matrices (e.g. Margin,
    /// Eq. 12), as in DIML training; the miner, if any, mines on the same matrices.
    Pairs {
        /// The loss (pair-based: it sees distance matrices).
        loss: &'a MetricLoss,
        /// The optional miner.
        miner: Option<&'a Miner>,
        /// The step's seed for the miner.
        seed: u64,
    },
    /// Proxy-Anchor in distance form (Eq. 14) on the `[B, C]` distances of the batch to one
    /// proxy per class at every level. A proxy has no CAM: its certainty is taken as 1, so that
    /// a node's reliability depends on the image's certainty alone.
    ProxyAnchor {
        /// The constants of Eq. 14.
        loss: &'a ProxyAnchorDistance,
        /// The per-level proxies (trained by the level terms).
        proxies: &'a LevelProxies,
    },
}

impl Criterion<'_> {
    fn evaluate(&self, d: Tensor<2>, labels: &[u32]) -> Result<Tensor<1>, ExplainError> {
        match self {
            Criterion::Pairs { loss, miner, seed } => loss
                .forward_with_matrix(d, false, labels, *miner, *seed)
                .map(|o| o.loss)
                .map_err(|e| ExplainError::Config(format!("AVSL loss: {e}"))),
            Criterion::ProxyAnchor { loss, .. } => loss.forward(d, labels),
        }
    }
}

/// One step's objective from the levels' outputs (embeddings and CAMs of the batch, on the graph):
/// updates `memory` with the batch's edges, infers the graph with the reliability of `params`, and
/// returns `L(d̂) + Σ_l w_l L(d^l)` (Eq. 10). With [`Criterion::Pairs`] the graph compares the
/// batch with itself, with [`Criterion::ProxyAnchor`] the batch with the proxies.
pub fn avsl_loss(
    outputs: &[AvslLevelOutput],
    params: &ReliabilityParams,
    memory: &mut LinkMemory,
    settings: &AvslSettings,
    criterion: &Criterion<'_>,
    labels: &[u32],
) -> Result<AvslLoss, ExplainError> {
    if settings.level_weights.len() != outputs.len() {
        return Err(ExplainError::Config(format!(
            "avsl.level_weights: {} weights for {} levels",
            settings.level_weights.len(),
            outputs.len()
        )));
    }
    let proxies = match criterion {
        Criterion::ProxyAnchor { proxies, .. } => {
            let values = proxies.values();
            if values.len() != outputs.len() {
                return Err(ExplainError::Shape {
                    what: "AVSL proxies",
                    message: format!("{} levels of proxies for {} levels", values.len(), outputs.len()),
                });
            }
            Some(values)
        }
        Criterion::Pairs { .. } => None,
    };
    let cams: Vec<Tensor<4>> = outputs.iter().map(|o| o.cam.clone().detach()).collect();
    let edges = cams
        .windows(2)
        .map(|w| batch_links(w[0].clone(), w[1].clone()))
        .collect::<Result<Vec<_>, _>>()?;
    memory.update(&edges)?;
    let links = memory.stars(settings.topk)?;
    // The overall distance trains the reliability only: nodes and certainties are constants.
    let levels: Vec<LevelInput> = outputs
        .iter()
        .zip(&cams)
        .enumerate()
        .map(|(i, (o, cam))| {
            let e = o.embedding.clone().detach();
            let eta = certainty(cam.clone(), settings.certainty);
            let (reference, reference_certainty) = match &proxies {
                Some(p) => {
                    let p = p[i].clone().detach();
                    let ones = p.ones_like();
                    (p, ones)
                }
                None => (e.clone(), eta.clone()),
            };
            LevelInput {
                query: e,
                reference,
                query_certainty: eta,
                reference_certainty,
            }
        })
        .collect();
    let graph = infer(&levels, &links, &params.regressions(), settings.gamma)?;
    let mut total = criterion.evaluate(graph.distance.clone(), labels)?;
    for (i, (o, &w)) in outputs.iter().zip(&settings.level_weights).enumerate() {
        if w != 0.0 {
            let reference = match &proxies {
                Some(p) => p[i].clone(),
                None => o.embedding.clone(),
            };
            let d = level_distance(o.embedding.clone(), reference);
            total = total + criterion.evaluate(d, labels)?.mul_scalar(w);
        }
    }
    Ok(AvslLoss {
        loss: total,
        graph,
        links,
    })
}
