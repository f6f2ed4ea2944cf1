//! The Grad-CAM weights of the last stage in closed form, built from tensor operations.
//!
//! Burn's autodiff is first order: a gradient it computes is a value, not a graph. Similarity
//! mining needs the attention `M` on the graph (its loss reaches the parameters through
//! `∂s/∂A`), so for the last stage, where only the head lies between `A` and the score, the
//! gradient is written out. For the head `e = W pool(A) + b`, `f = e/‖e‖` (or `f = e`) and the
//! score `s = wᵀf` with `w` constant (an imported head of several layers chains `∂s/∂u` through
//! each, see [`EmbeddingHead::backward_projection`]):
//!
//! - `∂s/∂e = (w − (wᵀf) f) / ‖e‖` when normalising, `w` otherwise;
//! - `∂s/∂u = Wᵀ ∂s/∂e` for the pooled features `u = pool(A)`;
//! - `∂s/∂A_k(x, y) = ∂s/∂u_k · ∂u_k/∂A_k(x, y)`, whose spatial mean is `∂s/∂u_k / (h w)` for
//!   average pooling (every location weighs `1/(hw)`) and for max pooling (one location weighs
//!   1), and `2 ∂s/∂u_k / (h w)` for their sum.
//!
//! Every step is a differentiable tensor operation, so the weights `α` keep their dependence
//! on `A`, `W` and `b` (the paper's second-order path, PyTorch's `create_graph=True`). At an
//! inner stage of a ResNet, the per-location gradient of the last stage is carried back through
//! the later stages by [`dml_models::Backbone::backward_from`], also made of tensor operations.

use burn::tensor::Tensor;
use dml_models::{EmbeddingHead, EmbeddingModel, FeatureMaps, Pooling, first_max_mask};

use crate::error::ExplainError;

/// `∂s/∂u` `[N, C]` for the pooled features `u = pool(A)` of the last maps `A` `[N, C, h, w]`.
fn pooled_gradient(head: &EmbeddingHead, maps: Tensor<4>, weights: Tensor<2>) -> Tensor<2> {
    let u = head.pool(maps.clone());
    let e = head.project(maps);
    let grad_e = if head.normalizes() {
        let norm = e.clone().square().sum_dim(1).sqrt().clamp_min(1e-12);
        let f = e / norm.clone();
        let along = (weights.clone() * f.clone()).sum_dim(1);
        (weights - f * along) / norm
    } else {
        weights
    };
    // `∂s/∂e Wᵀ` for a linear head (Burn's weight is [C, D], `e = u W + b`), the chain through
    // every layer of an imported multi-layer embedder.
    head.backward_projection(u, grad_e)
}

/// The per-location gradient `∂s/∂A` `[N, C, h, w]` of each row's score `s = wᵀ head(A)` at the
/// last maps `A` `[N, C, h, w]` for weight vectors `w` `[N, D]`, in closed form: `∂s/∂u_k / (hw)`
/// everywhere for average pooling, `∂s/∂u_k` at the (first) maximum for max pooling,
/// their sum for both.
pub fn head_gradient(head: &EmbeddingHead, maps: Tensor<4>, weights: Tensor<2>) -> Tensor<4> {
    let [n, c, h, w] = maps.dims();
    let grad_u = pooled_gradient(head, maps.clone(), weights).reshape([n, c, 1, 1]);
    let average = || grad_u.clone().div_scalar((h * w) as f64).expand([n, c, h, w]);
    // One location per channel, the first maximum, as the max-pooling gradient routes it.
    let maximum = || first_max_mask(maps.clone()) * grad_u.clone();
    match head.pooling() {
        Pooling::Avg => average(),
        Pooling::Max => maximum(),
        Pooling::AvgMax => average() + maximum(),
    }
}

/// Grad-CAM's channel weights `α` `[N, C]` at stage `stage` of `features` (the backbone's maps
/// of N images, on the graph) for weight vectors `w` `[N, D]`, differentiably: [`head_alpha`] at
/// the last stage; at an inner stage the spatial mean of the last stage's [`head_gradient`]
/// carried back by [`dml_models::Backbone::backward_from`] (ResNets, eval-mode batch norm).
pub fn stage_alpha(
    model: &EmbeddingModel,
    features: &FeatureMaps,
    stage: usize,
    weights: Tensor<2>,
) -> Result<Tensor<2>, ExplainError> {
    let last = features.last().clone();
    if stage + 1 == features.stages.len() {
        return Ok(head_alpha(&model.head, last, weights));
    }
    let map = features.stages.get(stage).cloned().ok_or_else(|| ExplainError::Shape {
        what: "stage",
        message: format!("stage {stage} of {} feature maps", features.stages.len()),
    })?;
    let grad = head_gradient(&model.head, last, weights);
    let grad = model.backbone.backward_from(stage, map, grad)?;
    let [n, c, _, _] = grad.dims();
    Ok(grad.mean_dim(3).mean_dim(2).reshape([n, c]))
}

/// Grad-CAM's channel weights `α` `[N, C]` at the last stage: `α_k = mean_{x,y} ∂s/∂A_k(x,y)`
/// for the score `s = wᵀ head(A)` of each row, from the last feature maps `A` `[N, C, h, w]`
/// and the (constant) weight vector of each row `w` `[N, D]` (Zheng et al., Eq. 1), in closed
/// form (see the module documentation), differentiable with respect to `A` and the head.
pub fn head_alpha(head: &EmbeddingHead, maps: Tensor<4>, weights: Tensor<2>) -> Tensor<2> {
    let [_, _, h, w] = maps.dims();
    let grad_u = pooled_gradient(head, maps, weights);
    let per_location = match head.pooling() {
        Pooling::Avg | Pooling::Max => 1.0,
        Pooling::AvgMax => 2.0,
    };
    grad_u.mul_scalar(per_location / (h * w) as f64)
}
