//! Normalised softmax (Zhai & Wu 2018, Eq. 2; PML `NormalizedSoftmaxLoss`): the cross-entropy
//! of `cos(x, w_c) / τ` over normalised class weights `W` `[D, C]`.

use burn::tensor::{Device, Tensor};

use super::classifier::{init_weights, targets, weighted};
use super::kinds::{Batch, Computed, Context, EmbInput, on_embeddings};
use super::state::{LossState, Slot};
use super::{LossModule, LossOutput, RegisteredLoss};
use crate::distance::Distance;
use crate::error::LossError;
use crate::ops::{cross_entropy, l2_normalize};
use crate::reducer::{Reducer, SubLoss};

dml_config::config! {
    /// Configuration of the normalised softmax loss.
    #[derive(Clone, Debug, PartialEq)]
    pub struct NormalizedSoftmaxLossConfig {
        /// The temperature τ (PML's default).
        pub temperature: f64 = 0.05,
        /// Distance override (else the dot product of normalised embeddings).
        pub distance: Option<Distance> = None,
        /// Reducer override (else the mean).
        pub reducer: Option<Reducer> = None,
    }
}

/// The normalised softmax loss on its own; its class weights `W` `[D, C]` are its parameter.
pub type NormalizedSoftmaxLoss = LossModule<NormalizedSoftmaxLossConfig>;

impl RegisteredLoss for NormalizedSoftmaxLossConfig {
    const NAME: &'static str = "normalized_softmax";
    const DEFAULT_DISTANCE: Distance = Distance::dot_product();
    const DEFAULT_REDUCER: Reducer = Reducer::Mean;
    const PAIR_BASED: bool = false;
    const PARAMETERS: &'static [(Slot, &'static str)] = &[(Slot::Weight, "W")];

    fn distance(&self) -> Option<&Distance> {
        self.distance.as_ref()
    }

    fn reducer(&self) -> Option<&Reducer> {
        self.reducer.as_ref()
    }

    fn validate(&self, _distance: &Distance) -> Result<(), LossError> {
        if !(self.temperature > 0.0 && self.temperature.is_finite()) {
            return Err(LossError::Config(format!(
                "normalized_softmax: temperature must be positive, got {}",
                self.temperature
            )));
        }
        Ok(())
    }

    fn init_state(&self, num_classes: usize, dim: usize, device: &Device) -> Result<LossState, LossError> {
        init_weights(Self::NAME, num_classes, dim, device)
    }

    fn evaluate(&self, ctx: &Context<'_>, batch: Batch<'_>) -> Result<LossOutput, LossError> {
        on_embeddings(self, ctx, batch, |c, input| {
            c.compute(input, ctx.weight(input.emb.dtype())?)
        })
    }
}

impl NormalizedSoftmaxLossConfig {
    /// `w` is `[D, C]`; its columns are always normalised (PML `distance.normalize(W, dim=0)`).
    fn compute(&self, input: &EmbInput<'_>, w: Tensor<2>) -> Result<Computed, LossError> {
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
