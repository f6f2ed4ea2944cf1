//! SoftTriple (Qian et al. 2019, Eq. 8-10; PML `SoftTripleLoss`): each class has K centres;
//! the class similarity is the softmax(γ⁻¹-scaled)-weighted mean of the centre similarities,
//! and the loss is the cross-entropy of `λ (S - δ 1_y)`.

use burn::tensor::Tensor;
use burn::tensor::activation::softmax;
use serde::{Deserialize, Serialize};

use super::{Computed, EmbInput};
use crate::error::LossError;
use crate::ops::{bool2, cross_entropy, float1};
use crate::reducer::{Reducer, SubLoss};
use crate::tuples::miner_weights;

/// Configuration of SoftTriple.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SoftTripleLossConfig {
    /// Centres per class K (PML default 10).
    pub centers_per_class: usize,
    /// The scale λ (`la`, default 20).
    pub la: f64,
    /// The entropy temperature γ (default 0.1; the centre softmax uses `1/γ`).
    pub gamma: f64,
    /// The margin δ (default 0.01).
    pub margin: f64,
    /// Reducer override (default mean).
    pub reducer: Option<Reducer>,
}

impl Default for SoftTripleLossConfig {
    fn default() -> Self {
        Self {
            centers_per_class: 10,
            la: 20.0,
            gamma: 0.1,
            margin: 0.01,
            reducer: None,
        }
    }
}

impl SoftTripleLossConfig {
    pub(super) fn validate(&self) -> Result<(), LossError> {
        if self.centers_per_class == 0 || self.gamma.is_nan() || self.gamma <= 0.0 {
            return Err(LossError::Config(format!(
                "soft_triple: centers_per_class and gamma must be positive, got {} and {}",
                self.centers_per_class, self.gamma
            )));
        }
        Ok(())
    }

    /// `fc` is `[D, C*K]`.
    pub(super) fn compute(
        &self,
        input: &EmbInput<'_>,
        fc: Tensor<2>,
        num_classes: usize,
    ) -> Result<Computed, LossError> {
        let n = input.labels.len();
        let c = num_classes;
        let k = self.centers_per_class;
        let sim = input
            .distance
            .matrix(input.emb.clone(), fc.transpose())
            .reshape([n, c, k]);
        let prob = softmax(sim.clone() * (1.0 / self.gamma), 2);
        let class_sim: Tensor<2> = (prob * sim).sum_dim(2).reshape([n, c]);
        let device = class_sim.device();
        let target: Vec<bool> = (0..n * c).map(|i| input.labels[i / c] as usize == i % c).collect();
        let target = bool2(target, [n, c], &device);
        let logits = (class_sim.clone() - class_sim.zeros_like().mask_fill(target, self.margin)) * self.la;
        let targets: Vec<usize> = input.labels.iter().map(|&l| l as usize).collect();
        let mut losses = cross_entropy(logits, &targets);
        if input.tuples.is_some() {
            let dtype = losses.dtype();
            losses = losses * float1(miner_weights(input.tuples, n, false), &device, dtype);
        }
        Ok(Computed {
            subs: vec![SubLoss::elements(losses)],
            tuples: n,
        })
    }
}
