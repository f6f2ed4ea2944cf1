//! Classifier losses on normalised class weights `W` `[D, C]`:
//!
//! - normalised softmax (Zhai & Wu 2018, Eq. 2; PML `NormalizedSoftmaxLoss`):
//!   cross-entropy of `cos(x, w_c) / τ`;
//! - CosFace (Wang et al. 2018, Eq. 4; PML `CosFaceLoss`): `s (cos θ_y - m)` for the target;
//! - ArcFace (Deng et al. 2019, Eq. 3; PML `ArcFaceLoss`): `s cos(θ_y + m)` for the target,
//!   `s (cos θ_y - m sin m)` once `θ_y + m` would pass π.

use burn::tensor::Tensor;
use serde::{Deserialize, Serialize};

use super::tuplet_margin::cos_shift;
use super::{Computed, EmbInput};
use crate::distance::Distance;
use crate::error::LossError;
use crate::ops::{bool2, cross_entropy, float1, l2_normalize};
use crate::reducer::{Reducer, SubLoss};
use crate::tuples::miner_weights;

/// Configuration of the normalised softmax loss.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NormalizedSoftmaxLossConfig {
    /// The temperature τ (PML default 0.05).
    pub temperature: f64,
    /// Distance override (default dot product of normalised embeddings).
    pub distance: Option<Distance>,
    /// Reducer override (default mean).
    pub reducer: Option<Reducer>,
}

impl Default for NormalizedSoftmaxLossConfig {
    fn default() -> Self {
        Self {
            temperature: 0.05,
            distance: None,
            reducer: None,
        }
    }
}

/// Configuration of CosFace.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CosFaceLossConfig {
    /// The additive cosine margin m (PML default 0.35).
    pub margin: f64,
    /// The scale s (default 64).
    pub scale: f64,
    /// Reducer override (default mean).
    pub reducer: Option<Reducer>,
}

impl Default for CosFaceLossConfig {
    fn default() -> Self {
        Self {
            margin: 0.35,
            scale: 64.0,
            reducer: None,
        }
    }
}

/// Configuration of ArcFace.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ArcFaceLossConfig {
    /// The additive angular margin m in degrees (PML default 28.6).
    pub margin: f64,
    /// The scale s (default 64).
    pub scale: f64,
    /// Reducer override (default mean).
    pub reducer: Option<Reducer>,
}

impl Default for ArcFaceLossConfig {
    fn default() -> Self {
        Self {
            margin: 28.6,
            scale: 64.0,
            reducer: None,
        }
    }
}

/// Multiplies per-sample losses by PML's miner weights when tuples were mined.
fn weighted(losses: Tensor<1>, input: &EmbInput<'_>) -> Tensor<1> {
    if input.tuples.is_none() {
        return losses;
    }
    let n = input.labels.len();
    let device = losses.device();
    let dtype = losses.dtype();
    losses * float1(miner_weights(input.tuples, n, false), &device, dtype)
}

fn targets(labels: &[u32]) -> Vec<usize> {
    labels.iter().map(|&l| l as usize).collect()
}

impl NormalizedSoftmaxLossConfig {
    pub(super) fn validate(&self) -> Result<(), LossError> {
        if !(self.temperature > 0.0 && self.temperature.is_finite()) {
            return Err(LossError::Config(format!(
                "normalized_softmax: temperature must be positive, got {}",
                self.temperature
            )));
        }
        Ok(())
    }

    /// `w` is `[D, C]`; its columns are always normalised (PML `distance.normalize(W, dim=0)`).
    pub(super) fn compute(&self, input: &EmbInput<'_>, w: Tensor<2>) -> Result<Computed, LossError> {
        let w = l2_normalize(w, 0);
        let logits = input.distance.matrix(input.emb.clone(), w.transpose()) / self.temperature;
        let logits = if input.distance.is_similarity() {
            logits
        } else {
            logits.neg()
        };
        let losses = weighted(cross_entropy(logits, &targets(input.labels)), input);
        Ok(Computed {
            subs: vec![SubLoss::elements(losses)],
            tuples: input.labels.len(),
        })
    }
}

/// The cosines `[N, C]` of the embeddings to the class weights and the target mask.
fn cosines(input: &EmbInput<'_>, w: Tensor<2>) -> (Tensor<2>, Tensor<2, burn::tensor::Bool>) {
    let cos = Distance::cosine().matrix(input.emb.clone(), w.transpose());
    let [n, c] = cos.dims();
    let mask: Vec<bool> = (0..n * c).map(|i| input.labels[i / c] as usize == i % c).collect();
    let device = cos.device();
    (cos, bool2(mask, [n, c], &device))
}

impl CosFaceLossConfig {
    pub(super) fn compute(&self, input: &EmbInput<'_>, w: Tensor<2>) -> Result<Computed, LossError> {
        let (cos, target) = cosines(input, w);
        let logits = cos.clone().mask_where(target, cos - self.margin) * self.scale;
        let losses = weighted(cross_entropy(logits, &targets(input.labels)), input);
        Ok(Computed {
            subs: vec![SubLoss::elements(losses)],
            tuples: input.labels.len(),
        })
    }
}

impl ArcFaceLossConfig {
    pub(super) fn compute(&self, input: &EmbInput<'_>, w: Tensor<2>) -> Result<Computed, LossError> {
        let m = self.margin.to_radians();
        let (cos, target) = cosines(input, w);
        let c = cos.clone().clamp(-1.0, 1.0);
        // θ <= π - m  ⇔  cos θ >= -cos m.
        let in_range = c.clone().greater_equal_elem(-m.cos());
        let plus = cos_shift(c.clone(), -m);
        let fallback = c - m * m.sin();
        let modified = fallback.mask_where(in_range, plus);
        let logits = cos.mask_where(target, modified) * self.scale;
        let losses = weighted(cross_entropy(logits, &targets(input.labels)), input);
        Ok(Computed {
            subs: vec![SubLoss::elements(losses)],
            tuples: input.labels.len(),
        })
    }
}
