//! The edges the rectification uses: the top-k lower-level nodes of each higher-level node,
//! normalised (Zhang et al., Eq. 7–8).

use burn::tensor::Tensor;
use burn::tensor::activation::relu;

use crate::error::ExplainError;

/// `W̃` in the code's layout `[r_low, r_high]` (the paper's is the transpose) and its top-k mask:
/// `relu(ω)` kept where it is at least the k-th largest entry of its column minus `1e-8`, divided
/// by the column sum plus `1e-8`, so each higher-level node draws on its `k` most correlated
/// lower-level nodes with weights summing to 1 (up to the `1e-8`).
pub fn link_star(links: Tensor<2>, k: usize) -> Result<(Tensor<2>, Tensor<2>), ExplainError> {
    let [r_low, r_high] = links.dims();
    if k == 0 || k > r_low {
        return Err(ExplainError::Config(format!(
            "AVSL topk {k} must be between 1 and the lower level's {r_low} nodes"
        )));
    }
    let positive = relu(links);
    let kth = positive.clone().sort_descending(0).narrow(0, k - 1, 1);
    let mask = positive
        .clone()
        .greater_equal(kth.sub_scalar(1e-8).expand([r_low, r_high]))
        .float();
    let kept = positive * mask.clone();
    let sum = kept.clone().sum_dim(0).add_scalar(1e-8);
    Ok((kept / sum, mask))
}
