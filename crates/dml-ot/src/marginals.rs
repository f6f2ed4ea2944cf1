//! The marginal distributions of DIML's structural matching: uniform (Eq. 7) and cross-correlation
//! (Eq. 8–9).

use burn::tensor::Tensor;
use burn::tensor::activation::relu;
use serde::{Deserialize, Serialize};

/// Which marginals `μ^s` `[B, n]` and `μ^t` `[B, m]` weigh the spatial locations of a pair.
///
/// Serialised by variant name (`"Uniform"`, `"CrossCorrelation"`), as Burn's `Config` derive wrote it
/// before, so that stored settings still read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Marginals {
    /// Every location carries `1 / L` (DIML Eq. 7).
    Uniform,
    /// A location's weight is its cosine with the *other* image's global (mean) feature, negative
    /// values clipped to 0, normalised to sum to 1 (DIML Eq. 8–9). An image none of whose locations
    /// correlates positively falls back to uniform weights, where the formula would divide 0 by 0.
    CrossCorrelation,
}

/// `x / max(‖x‖₂, 1e-12)` along the last dimension, as PyTorch's `F.normalize`. The floor is applied
/// to the squared norm *before* the square root, so that an all-zero vector stays zero with a finite
/// (zero) gradient: flooring after the root would evaluate the root's derivative `1 / (2·√0)`.
pub fn l2_normalize<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    let norm = x.clone().powi_scalar(2).sum_dim(D - 1).clamp_min(1e-24).sqrt();
    x / norm
}

/// Uniform marginals `[B, L]` of value `1 / L` (DIML Eq. 7), in the dtype and on the device of `like`.
pub fn uniform_marginals(like: &Tensor<3>) -> Tensor<2> {
    let [batch, locations, _] = like.dims();
    Tensor::full(
        [batch, locations],
        1.0 / locations as f64,
        (&like.device(), like.dtype()),
    )
}

/// Cross-correlation marginals (DIML Eq. 8–9).
///
/// * `locals`: `[B, L, D]` local features `z_i` of one image of each pair.
/// * `other_global`: `[B, D]` global feature `z̄` of the other image (the mean of its local features).
///
/// Returns `μ_i = max(0, cos(z̄, z_i)) / Σ_i' max(0, cos(z̄, z_i'))` `[B, L]`; an item whose weights are
/// all zero gets `1 / L` everywhere. Differentiable.
///
/// # Panics
/// When `B` or `D` differ between the inputs.
pub fn cross_correlation_marginals(locals: Tensor<3>, other_global: Tensor<2>) -> Tensor<2> {
    let [batch, locations, dim] = locals.dims();
    assert_eq!(
        other_global.dims(),
        [batch, dim],
        "cross_correlation_marginals: other_global is {:?} but locals are [B, L, D] = {:?}",
        other_global.dims(),
        locals.dims()
    );
    let alpha: Tensor<2> = l2_normalize(locals)
        .matmul(l2_normalize(other_global).unsqueeze_dim::<3>(2))
        .squeeze_dim(2);
    normalize_weights(relu(alpha), locations)
}

/// Totals at or below this count as "no positive correlation". The denominator is floored there too:
/// it must stay a normal number in `f32` even when squared (the quotient's backward pass divides by
/// it), or the masked-out rows would produce `0 / 0` gradients.
const EMPTY_MASS: f64 = 1e-12;

/// `γ / Σ γ` per row, or `1 / L` for a row without mass.
pub(crate) fn normalize_weights(gamma: Tensor<2>, locations: usize) -> Tensor<2> {
    let total = gamma.clone().sum_dim(1);
    let empty = total.clone().lower_equal_elem(EMPTY_MASS).expand(gamma.dims());
    let uniform = gamma.clone().detach().full_like(1.0 / locations as f64);
    (gamma / total.clamp_min(EMPTY_MASS)).mask_where(empty, uniform)
}
