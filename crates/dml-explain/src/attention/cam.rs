//! The class-activation step of Grad-CAM: channel weights times maps, rectified.

use burn::tensor::Tensor;
use burn::tensor::activation::relu;

/// The attention maps `M = ReLU(Σ_k α_k A_k)` `[N, h, w]` from feature maps `A` `[N, C, h, w]`
/// and channel weights `α` `[N, C]` (Zheng et al., Eq. 1; Selvaraju et al.'s Grad-CAM).
///
/// # Panics
/// When `alpha` is not `[N, C]` for `maps` `[N, C, h, w]`.
pub fn cam(maps: Tensor<4>, alpha: Tensor<2>) -> Tensor<3> {
    let [n, c, _, _] = maps.dims();
    assert_eq!(alpha.dims(), [n, c], "alpha must be [N, C] for maps [N, C, h, w]");
    let weighted = maps * alpha.unsqueeze_dims::<4>(&[2, 3]);
    relu(weighted.sum_dim(1).squeeze_dim::<3>(1))
}
