//! SoftTriple (Qian et al. 2019, Eq. 8-10; PML `SoftTripleLoss`): each class has K centres;
//! the class similarity is the softmax(γ⁻¹-scaled)-weighted mean of the centre similarities,
//! and the loss is the cross-entropy of `λ (S - δ 1_y)`.

use burn::tensor::activation::softmax;
use burn::tensor::{Device, Tensor};

use super::kinds::{Batch, Computed, Context, EmbInput, on_embeddings, require_distance};
use super::state::{LossState, Slot, require_classes, uniform};
use super::{LossModule, LossOutput, RegisteredLoss};
use crate::distance::Distance;
use crate::error::LossError;
use crate::ops::{bool2, cross_entropy, float1};
use crate::reducer::{Reducer, SubLoss};
use crate::tuples::miner_weights;

dml_config::config! {
    /// Configuration of SoftTriple.
    #[derive(Clone, Debug, PartialEq)]
    pub struct SoftTripleLossConfig {
        /// Centres per class K (PML's default).
        pub centers_per_class: usize = 10,
        /// The scale λ (`la`).
        pub la: f64 = 20.0,
        /// The entropy temperature γ (the centre softmax uses `1/γ`).
        pub gamma: f64 = 0.1,
        /// The margin δ.
        pub margin: f64 = 0.01,
        /// Reducer override (else the mean).
        pub reducer: Option<Reducer> = None,
    }
}

/// SoftTriple on its own; its centres `fc` `[D, C·K]` are its parameter.
pub type SoftTripleLoss = LossModule<SoftTripleLossConfig>;

impl RegisteredLoss for SoftTripleLossConfig {
    const NAME: &'static str = "soft_triple";
    const DEFAULT_DISTANCE: Distance = Distance::cosine();
    const DEFAULT_REDUCER: Reducer = Reducer::Mean;
    const PAIR_BASED: bool = false;
    const PARAMETERS: &'static [(Slot, &'static str)] = &[(Slot::Weight, "fc")];

    fn reducer(&self) -> Option<&Reducer> {
        self.reducer.as_ref()
    }

    fn validate(&self, distance: &Distance) -> Result<(), LossError> {
        require_distance(Self::NAME, distance.is_similarity(), "a similarity", distance)?;
        if self.centers_per_class == 0 || self.gamma.is_nan() || self.gamma <= 0.0 {
            return Err(LossError::Config(format!(
                "soft_triple: centers_per_class and gamma must be positive, got {} and {}",
                self.centers_per_class, self.gamma
            )));
        }
        Ok(())
    }

    /// `kaiming_uniform_(a = sqrt(5))` on `[D, C·K]`: bound `1 / sqrt(C·K)`.
    fn init_state(&self, num_classes: usize, dim: usize, device: &Device) -> Result<LossState, LossError> {
        require_classes(Self::NAME, "class centres", num_classes, dim)?;
        let cols = num_classes * self.centers_per_class;
        let bound = 1.0 / (cols as f64).sqrt();
        Ok(LossState {
            weight: Some(uniform([dim, cols], bound, device)),
            ..LossState::default()
        })
    }

    fn evaluate(&self, ctx: &Context<'_>, batch: Batch<'_>) -> Result<LossOutput, LossError> {
        on_embeddings(self, ctx, batch, |c, input| {
            c.compute(input, ctx.weight(input.emb.dtype())?, ctx.num_classes())
        })
    }
}

impl SoftTripleLossConfig {
    /// `fc` is `[D, C*K]`.
    fn compute(&self, input: &EmbInput<'_>, fc: Tensor<2>, num_classes: usize) -> Result<Computed, LossError> {
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
