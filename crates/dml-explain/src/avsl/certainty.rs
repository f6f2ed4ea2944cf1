//! The certainty `η` of a CAM: how clearly it focuses (Zhang et al., Eq. 5).

use burn::tensor::Tensor;

/// Which definition of certainty.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Certainty {
    /// The authors' code: subtract the minimum along the width (per row, marked FIXME in the
    /// repository), L1-normalise the flattened map (`max(Σ|x|, 1e-12)`), and take the unbiased
    /// standard deviation over the `h·w` locations.
    #[default]
    Code,
    /// The paper's `std(û)` of the normalised CAM: the map divided by its spatial L2 norm (as the
    /// edges normalise it, Eq. 3), unbiased standard deviation over the locations.
    Paper,
}

/// The certainty `η` `[B, r]` of each CAM of `cams` `[B, r, h, w]` (a single location has
/// certainty 0: no spread).
pub fn certainty(cams: Tensor<4>, variant: Certainty) -> Tensor<2> {
    let [b, r, h, w] = cams.dims();
    let n = h * w;
    let flat = match variant {
        Certainty::Code => {
            let shifted = cams.clone() - cams.min_dim(3);
            let flat = shifted.reshape([b, r, n]);
            let l1 = flat.clone().abs().sum_dim(2).clamp_min(1e-12);
            flat / l1
        }
        Certainty::Paper => {
            let flat = cams.reshape([b, r, n]);
            let l2 = flat.clone().square().sum_dim(2).sqrt().clamp_min(1e-12);
            flat / l2
        }
    };
    if n < 2 {
        return flat.reshape([b, r]).mul_scalar(0.0);
    }
    let mean = flat.clone().mean_dim(2);
    let var = (flat - mean).square().sum_dim(2).div_scalar((n - 1) as f64);
    var.sqrt().reshape([b, r])
}
