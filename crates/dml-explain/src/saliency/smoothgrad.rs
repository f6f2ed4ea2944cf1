//! SmoothGrad saliency against a base image (Kobs et al., Eq. 1–2).

use burn::module::Module;
use burn::tensor::{Distribution, Tensor, TensorData};
use dml_losses::Distance;
use dml_models::EmbeddingModel;

use super::normalize::normalize_p99;
use crate::error::ExplainError;

/// The order of the post-processing steps, which the paper and the authors' code state
/// differently (their maps correlate at r ≈ 0.85–0.89).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MapOrder {
    /// The code: per noisy sample the channel mean of the signed gradient, its absolute value,
    /// summed over the samples.
    #[default]
    Code,
    /// The paper: the mean gradient over the samples, its absolute value, the channel mean.
    Paper,
}

/// The raw SmoothGrad quantities of one image.
#[derive(Debug, Clone)]
pub struct SmoothGrad {
    /// The noise scale `σ = spread · (max − min)` of the image.
    pub sigma: f64,
    /// The distance (or similarity) of each noisy copy's embedding to the base image's `[l]`.
    pub distances: Vec<f32>,
    /// `(1/l) Σ_i ∂d_i/∂x_i` `[3, H, W]`, row-major (Eq. 2).
    pub grad_mean: Vec<f32>,
    /// The paper's map: channel mean of `|grad_mean|` `[H, W]`.
    pub paper_map_raw: Vec<f32>,
    /// The code's map: `Σ_i |channel mean of ∂d_i/∂x_i / l|` `[H, W]`.
    pub code_map_raw: Vec<f32>,
    /// `(H, W)`.
    pub size: (usize, usize),
}

impl SmoothGrad {
    /// The raw map of `order`.
    pub fn raw(&self, order: MapOrder) -> &[f32] {
        match order {
            MapOrder::Code => &self.code_map_raw,
            MapOrder::Paper => &self.paper_map_raw,
        }
    }

    /// The map of `order` normalised by [`normalize_p99`] `[H, W]`, and its 99th percentile.
    pub fn map(&self, order: MapOrder) -> Result<(Vec<f32>, f64), ExplainError> {
        normalize_p99(self.raw(order)).ok_or_else(|| ExplainError::Shape {
            what: "saliency map",
            message: "is empty or holds a non-finite value".into(),
        })
    }
}

/// SmoothGrad of `image` `[3, H, W]` against `base` `[3, H, W]` (a black image sent through the same
/// preprocessing, not the zero tensor) with the given standard-normal `noise` `[l, 3, H, W]`:
/// `x_i = image + σ noise_i`, `σ = spread · (max(image) − min(image))`, `d_i = distance(f(x_i),
/// f(base))` with `f(base)` constant, and the gradients of every `d_i` at once (the `l` copies are
/// one batch; each `d_i` depends on its own copy only, since batch norm runs in eval mode).
///
/// The model must live on an autodiff device; it runs in eval mode (a frozen copy).
pub fn smoothgrad_with_noise(
    model: &EmbeddingModel,
    image: Tensor<3>,
    base: Tensor<3>,
    noise: Tensor<4>,
    spread: f64,
    distance: &Distance,
) -> Result<SmoothGrad, ExplainError> {
    let [c, h, w] = image.dims();
    let [l, nc, nh, nw] = noise.dims();
    if c != 3 || base.dims() != [c, h, w] || [nc, nh, nw] != [c, h, w] || l == 0 {
        return Err(ExplainError::Shape {
            what: "saliency inputs",
            message: format!(
                "image {:?}, base {:?} and noise {:?} must be [3, H, W], [3, H, W] and [l >= 1, 3, H, W]",
                image.dims(),
                base.dims(),
                noise.dims()
            ),
        });
    }
    if !image.is_autodiff() {
        return Err(ExplainError::NotAutodiff("SmoothGrad"));
    }
    // Only the input's gradient is wanted: with every parameter untracked, the backward pass
    // computes no weight gradient (the host convolutions skip theirs, see dml_backend::op).
    let frozen = EmbeddingModel {
        backbone: model.backbone.clone().freeze_batchnorm(),
        head: model.head.clone(),
    }
    .no_grad();
    let pixels: Vec<f32> = image.clone().into_data().iter::<f32>().collect();
    let (lo, hi) = pixels
        .iter()
        .fold((f32::MAX, f32::MIN), |(a, b), &v| (a.min(v), b.max(v)));
    let sigma = spread * f64::from(hi - lo);
    let x = (image.unsqueeze_dim::<4>(0).expand([l, c, h, w]) + noise.mul_scalar(sigma))
        .detach()
        .require_grad();
    let reference = frozen.forward(base.unsqueeze_dim::<4>(0)).detach();
    let d = distance.matrix(frozen.forward(x.clone()), reference).reshape([l]);
    let distances: Vec<f32> = d.clone().into_data().iter::<f32>().collect();
    let grads = d.sum().backward();
    let grad = x.grad(&grads).ok_or(ExplainError::NotAutodiff("SmoothGrad"))?;
    let per_sample: Vec<f32> = grad.clone().into_data().iter::<f32>().collect();
    let grad_mean: Vec<f32> = grad.mean_dim(0).into_data().iter::<f32>().collect();
    let plane = h * w;
    let paper_map_raw = (0..plane)
        .map(|p| (0..c).map(|k| grad_mean[k * plane + p].abs()).sum::<f32>() / c as f32)
        .collect();
    let code_map_raw = (0..plane)
        .map(|p| {
            (0..l)
                .map(|i| {
                    let mean: f32 = (0..c).map(|k| per_sample[(i * c + k) * plane + p]).sum::<f32>() / c as f32;
                    (mean / l as f32).abs()
                })
                .sum()
        })
        .collect();
    Ok(SmoothGrad {
        sigma,
        distances,
        grad_mean,
        paper_map_raw,
        code_map_raw,
        size: (h, w),
    })
}

/// [`smoothgrad_with_noise`] with `samples` standard-normal noise images drawn on the image's
/// device from its generator, seeded by `seed` (so a saliency map is reproducible).
pub fn smoothgrad(
    model: &EmbeddingModel,
    image: Tensor<3>,
    base: Tensor<3>,
    samples: usize,
    spread: f64,
    seed: u64,
    distance: &Distance,
) -> Result<SmoothGrad, ExplainError> {
    let [c, h, w] = image.dims();
    let device = image.device();
    device.seed(seed);
    let noise = Tensor::<4>::random([samples, c, h, w], Distribution::Normal(0.0, 1.0), &device);
    smoothgrad_with_noise(model, image, base, noise, spread, distance)
}

/// The base image of Eq. 1: black (all channels 0 in `[0, 1]`) after the normalisation with
/// `mean` and `std`, `[3, H, W]` row-major.
pub fn black_image(height: usize, width: usize, mean: [f32; 3], std: [f32; 3]) -> Vec<f32> {
    (0..3)
        .flat_map(|c| std::iter::repeat_n(-mean[c] / std[c], height * width))
        .collect::<Vec<f32>>()
}

/// `black_image` as a tensor on `device`.
pub fn black_image_tensor(
    height: usize,
    width: usize,
    mean: [f32; 3],
    std: [f32; 3],
    device: &burn::tensor::Device,
) -> Tensor<3> {
    Tensor::from_data(
        TensorData::new(black_image(height, width, mean, std), [3, height, width]),
        device,
    )
}
