//! CosFace (Wang et al. 2018, Eq. 4; PML `CosFaceLoss`): the cross-entropy of the scaled
//! cosines to normalised class weights `W` `[D, C]`, with `s (cos θ_y - m)` for the target.

use burn::tensor::{Device, Tensor};

use super::classifier::{cosines, init_weights, targets, weighted};
use super::kinds::{Batch, Computed, Context, EmbInput, on_embeddings};
use super::state::{LossState, Slot};
use super::{LossModule, LossOutput, RegisteredLoss};
use crate::distance::Distance;
use crate::error::LossError;
use crate::ops::cross_entropy;
use crate::reducer::{Reducer, SubLoss};

dml_config::config! {
    /// Configuration of CosFace.
    #[derive(Clone, Debug, PartialEq)]
    pub struct CosFaceLossConfig {
        /// The additive cosine margin m (PML's default).
        pub margin: f64 = 0.35,
        /// The scale s.
        pub scale: f64 = 64.0,
        /// Reducer override (else the mean).
        pub reducer: Option<Reducer> = None,
    }
}

/// CosFace on its own; its class weights `W` `[D, C]` are its parameter.
pub type CosFaceLoss = LossModule<CosFaceLossConfig>;

impl RegisteredLoss for CosFaceLossConfig {
    const NAME: &'static str = "cos_face";
    const DEFAULT_DISTANCE: Distance = Distance::cosine();
    const DEFAULT_REDUCER: Reducer = Reducer::Mean;
    const PAIR_BASED: bool = false;
    const PARAMETERS: &'static [(Slot, &'static str)] = &[(Slot::Weight, "W")];

    fn reducer(&self) -> Option<&Reducer> {
        self.reducer.as_ref()
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

impl CosFaceLossConfig {
    fn compute(&self, input: &EmbInput<'_>, w: Tensor<2>) -> Result<Computed, LossError> {
        let (cos, target) = cosines(input, w);
        let logits = cos.clone().mask_where(target, cos - self.margin) * self.scale;
        let losses = weighted(cross_entropy(logits, &targets(input.labels)), input);
        Ok(Computed {
            subs: vec![SubLoss::elements(losses)],
            tuples: input.labels.len(),
        })
    }
}
