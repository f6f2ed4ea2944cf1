//! Similarity nodes, their reliability, top-down rectification and attribution (Zhang et al.,
//! Eq. 1, 6, 9–11 and Property 1), for every pair of a query set and a reference set.

use burn::tensor::Tensor;
use burn::tensor::activation::sigmoid;

use crate::error::ExplainError;
use dml_ot::l2_normalize;

/// One level's inputs to the graph.
#[derive(Debug, Clone)]
pub struct LevelInput {
    /// Embeddings of the query side `[N, r]` (not normalised; the nodes normalise them).
    pub query: Tensor<2>,
    /// Embeddings of the reference side `[M, r]`.
    pub reference: Tensor<2>,
    /// CAM certainty `η` of the query side `[N, r]`.
    pub query_certainty: Tensor<2>,
    /// CAM certainty `η` of the reference side `[M, r]`.
    pub reference_certainty: Tensor<2>,
}

/// The learnable reliability regression of one level above the lowest: `p = σ(γ (α ⊙ η ⊙ η′ + β))`.
#[derive(Debug, Clone)]
pub struct Reliability {
    /// `α` `[r]`.
    pub coef: Tensor<1>,
    /// `β` `[r]`.
    pub bias: Tensor<1>,
}

/// The graph of every (query, reference) pair.
#[derive(Debug, Clone)]
pub struct AvslGraph {
    /// Nodes `δ^l = (ẽ − ẽ′)²` `[N, M, r]` per level, low to high (Eq. 1, L2-normalised `ẽ`).
    pub nodes: Vec<Tensor<3>>,
    /// Per-level distances `d^l = Σ δ^l` `[N, M]`.
    pub level_distances: Vec<Tensor<2>>,
    /// Reliability `p^l` `[N, M, r]` of levels `1..L` (the lowest level is not rectified).
    pub reliability: Vec<Tensor<3>>,
    /// The rectified top-level nodes `δ̂^L` `[N, M, r]` (Eq. 9).
    pub rectified_top: Tensor<3>,
    /// The overall distance `d̂ = Σ δ̂^L` `[N, M]`.
    pub distance: Tensor<2>,
}

/// Builds the graph (Eq. 1, 6, 9): `levels` low to high, `links` the top-k edges `W̃` of each
/// adjacent pair in the code's `[r_{l-1}, r_l]` layout (see [`super::link_star::link_star`]),
/// `reliability` one regression per level above the lowest, `gamma` the code's factor (10).
///
/// `δ̂^0 = δ^0`; `δ̂^l = p^l ⊙ δ^l + (1 − p^l) ⊙ (δ̂^{l−1} W̃^l)`; `d̂ = Σ_r δ̂^L`.
pub fn infer(
    levels: &[LevelInput],
    links: &[Tensor<2>],
    reliability: &[Reliability],
    gamma: f64,
) -> Result<AvslGraph, ExplainError> {
    let l = levels.len();
    if l < 2 || links.len() != l - 1 || reliability.len() != l - 1 {
        return Err(ExplainError::Shape {
            what: "AVSL graph",
            message: format!(
                "{l} levels need {} links and reliability regressions, got {} and {}",
                l.saturating_sub(1),
                links.len(),
                reliability.len()
            ),
        });
    }
    let mut nodes = Vec::with_capacity(l);
    for (i, level) in levels.iter().enumerate() {
        let [n, r] = level.query.dims();
        let [m, rr] = level.reference.dims();
        if r != rr || level.query_certainty.dims() != [n, r] || level.reference_certainty.dims() != [m, r] {
            return Err(ExplainError::Shape {
                what: "AVSL level",
                message: format!(
                    "level {i}: query [{n}, {r}], reference [{m}, {rr}], certainties {:?} and {:?}",
                    level.query_certainty.dims(),
                    level.reference_certainty.dims()
                ),
            });
        }
        let q = l2_normalize(level.query.clone()).unsqueeze_dim::<3>(1);
        let g = l2_normalize(level.reference.clone()).unsqueeze_dim::<3>(0);
        nodes.push((q - g).square());
    }
    let level_distances = nodes.iter().map(|d| d.clone().sum_dim(2).squeeze_dim::<2>(2)).collect();
    let mut probabilities = Vec::with_capacity(l - 1);
    let mut hat = nodes[0].clone();
    for i in 1..l {
        let [n, m, r] = nodes[i].dims();
        let [r_low, r_high] = links[i - 1].dims();
        let rel = &reliability[i - 1];
        if r_high != r || r_low != hat.dims()[2] || rel.coef.dims() != [r] || rel.bias.dims() != [r] {
            return Err(ExplainError::Shape {
                what: "AVSL links",
                message: format!(
                    "level {i}: link [{r_low}, {r_high}] between nodes of {} and {r}, reliability {:?} / {:?}",
                    hat.dims()[2],
                    rel.coef.dims(),
                    rel.bias.dims()
                ),
            });
        }
        let eta = levels[i].query_certainty.clone().unsqueeze_dim::<3>(1)
            * levels[i].reference_certainty.clone().unsqueeze_dim::<3>(0);
        let coef = rel.coef.clone().reshape([1, 1, r]);
        let bias = rel.bias.clone().reshape([1, 1, r]);
        let p = sigmoid((eta * coef + bias).mul_scalar(gamma));
        let from_below = hat
            .reshape([n * m, r_low])
            .matmul(links[i - 1].clone())
            .reshape([n, m, r]);
        hat = p.clone() * nodes[i].clone() + p.clone().neg().add_scalar(1.0) * from_below;
        probabilities.push(p);
    }
    let distance = hat.clone().sum_dim(2).squeeze_dim::<2>(2);
    Ok(AvslGraph {
        nodes,
        level_distances,
        reliability: probabilities,
        rectified_top: hat,
        distance,
    })
}

impl AvslGraph {
    /// The attribution `λ^l = ∂d̂/∂δ^l` `[N, M, r]` of every level, low to high (Eq. 11 / 22), in
    /// closed form: with `g^L = 1`, `λ^l = p^l ⊙ g^l` and `g^{l−1} = ((1 − p^l) ⊙ g^l) W̃^{lᵀ}`,
    /// `λ^0 = g^0`. Because `d̂` is linear in the nodes (the reliabilities held fixed),
    /// `d̂ = Σ_l Σ_r λ^l ⊙ δ^l` exactly, and the attributions of a pair sum to `r` when every
    /// column of `W̃` sums to 1 (Property 1).
    pub fn attribution(&self, links: &[Tensor<2>]) -> Vec<Tensor<3>> {
        let top = &self.rectified_top;
        let mut g = top.clone().mul_scalar(0.0).add_scalar(1.0);
        let mut out = Vec::with_capacity(self.nodes.len());
        for i in (1..self.nodes.len()).rev() {
            let p = self.reliability[i - 1].clone();
            out.push(p.clone() * g.clone());
            let [n, m, r] = g.dims();
            let [r_low, _] = links[i - 1].dims();
            let carried = (p.neg().add_scalar(1.0) * g).reshape([n * m, r]);
            g = carried.matmul(links[i - 1].clone().transpose()).reshape([n, m, r_low]);
        }
        out.push(g);
        out.reverse();
        out
    }

    /// `Σ_l Σ_r λ^l ⊙ δ^l` `[N, M]` for the attribution `lambda` of [`Self::attribution`]: equal
    /// to [`Self::distance`] (Property 1).
    pub fn recomposed(&self, lambda: &[Tensor<3>]) -> Tensor<2> {
        lambda
            .iter()
            .zip(&self.nodes)
            .fold(self.distance.zeros_like(), |acc, (a, d)| {
                acc + (a.clone() * d.clone()).sum_dim(2).squeeze_dim::<2>(2)
            })
    }

    /// `Σ_l Σ_r λ^l` `[N, M]`: `r` of the top level when every column of every `W̃` sums to 1
    /// (Property 1), less when a column kept no positive edge.
    pub fn attribution_sum(&self, lambda: &[Tensor<3>]) -> Tensor<2> {
        lambda.iter().fold(self.distance.zeros_like(), |acc, a| {
            acc + a.clone().sum_dim(2).squeeze_dim::<2>(2)
        })
    }
}
