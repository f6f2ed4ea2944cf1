//! The edges between the similarity nodes of adjacent levels (Zhang et al., Eq. 3–4): how much
//! the CAM of a lower-level node and that of a higher-level node look at the same places, over a
//! batch, kept as an exponential moving average.

use burn::module::{Module, Param};
use burn::tensor::module::adaptive_avg_pool2d;
use burn::tensor::{Device, Tensor, TensorData};

use crate::error::ExplainError;

/// Maps `[B, r, h·w]` divided by their spatial L2 norm (floored at `1e-12`, as PyTorch's
/// `F.normalize`).
fn normalize_spatially(maps: Tensor<3>) -> Tensor<3> {
    let norm = maps.clone().square().sum_dim(2).sqrt().clamp_min(1e-12);
    maps / norm
}

/// The edges of one batch `ω̂` `[r_low, r_high]` between a lower level's CAMs `[B, r_low, H, W]`
/// and the next level's `[B, r_high, h, w]` (Eq. 3): the lower CAM is adaptive-average-pooled to
/// `h × w` (PyTorch's windows), both are L2-normalised over their locations, and
/// `ω̂[m, n] = (1/B) Σ_b ⟨û_low[b, m], û_high[b, n]⟩`.
pub fn batch_links(low: Tensor<4>, high: Tensor<4>) -> Result<Tensor<2>, ExplainError> {
    let [b, r_low, lh, lw] = low.dims();
    let [bh, r_high, h, w] = high.dims();
    if b != bh || b == 0 || h > lh || w > lw {
        return Err(ExplainError::Shape {
            what: "AVSL CAMs",
            message: format!(
                "lower level [{b}, {r_low}, {lh}, {lw}] and higher level [{bh}, {r_high}, {h}, {w}] need the same batch and a higher level no larger"
            ),
        });
    }
    let pooled = if [lh, lw] == [h, w] {
        low
    } else {
        adaptive_avg_pool2d(low, [h, w])
    };
    let low = normalize_spatially(pooled.reshape([b, r_low, h * w]));
    let high = normalize_spatially(high.reshape([b, r_high, h * w]));
    Ok(low.matmul(high.swap_dims(1, 2)).mean_dim(0).reshape([r_low, r_high]))
}

/// The moving average of the edges of every pair of adjacent levels (Eq. 4): part of the model,
/// saved and restored with it, never trained by gradients.
#[derive(Module, Debug)]
pub struct LinkMemory {
    /// `ω^l` `[r_{l-1}, r_l]` for levels `1..L`, low to high.
    pub links: Vec<Param<Tensor<2>>>,
    /// `[1]`: 0 before the first update (which copies the batch's edges in), 1 after.
    pub initialised: Param<Tensor<1>>,
    /// The weight of the old value, `m` (the code: 0.5).
    #[module(skip)]
    pub momentum: f64,
}

impl LinkMemory {
    /// Zero edges for levels of `dims` `[r_0, …, r_L]` (at least two levels), not yet initialised.
    pub fn new(dims: &[usize], momentum: f64, device: &Device) -> Result<Self, ExplainError> {
        if dims.len() < 2 || dims.contains(&0) || !(0.0..=1.0).contains(&momentum) {
            return Err(ExplainError::Config(format!(
                "AVSL links need at least two levels of positive size and a momentum in [0, 1] (dims {dims:?}, momentum {momentum})"
            )));
        }
        let frozen = |t: Tensor<2>| Param::from_tensor(t).set_require_grad(false);
        Ok(Self {
            links: dims
                .windows(2)
                .map(|d| frozen(Tensor::zeros([d[0], d[1]], device)))
                .collect(),
            initialised: Param::from_tensor(Tensor::from_data(TensorData::new(vec![0.0f32], [1]), device))
                .set_require_grad(false),
            momentum,
        })
    }

    /// Whether an update has happened.
    pub fn is_initialised(&self) -> bool {
        self.initialised.val().into_scalar::<f32>() > 0.5
    }

    /// Folds one batch's edges (`[r_{l-1}, r_l]` per adjacent pair, detached) into the average:
    /// the first update copies them, later ones take `m · old + (1 − m) · new`.
    pub fn update(&mut self, batch: &[Tensor<2>]) -> Result<(), ExplainError> {
        if batch.len() != self.links.len() {
            return Err(ExplainError::Shape {
                what: "AVSL batch links",
                message: format!("{} given for {} level pairs", batch.len(), self.links.len()),
            });
        }
        let first = !self.is_initialised();
        for (link, new) in self.links.iter_mut().zip(batch) {
            if link.dims() != new.dims() {
                return Err(ExplainError::Shape {
                    what: "AVSL batch links",
                    message: format!("{:?} given for an edge of {:?}", new.dims(), link.dims()),
                });
            }
            let new = new.clone().detach();
            let value = if first {
                new
            } else {
                link.val().mul_scalar(self.momentum) + new.mul_scalar(1.0 - self.momentum)
            };
            *link = Param::from_tensor(value).set_require_grad(false);
        }
        let device = self.initialised.val().device();
        self.initialised =
            Param::from_tensor(Tensor::from_data(TensorData::new(vec![1.0f32], [1]), &device)).set_require_grad(false);
        Ok(())
    }

    /// The current edges `[r_{l-1}, r_l]`, low to high.
    pub fn values(&self) -> Vec<Tensor<2>> {
        self.links.iter().map(|l| l.val()).collect()
    }

    /// The top-`k` normalised edges `W̃` the graph infers with, one per level above the lowest
    /// (see [`super::link_star::link_star`]).
    pub fn stars(&self, k: usize) -> Result<Vec<Tensor<2>>, ExplainError> {
        self.links
            .iter()
            .map(|l| super::link_star::link_star(l.val(), k).map(|(star, _)| star))
            .collect()
    }
}
