//! ArcFace (Deng et al. 2019, Eq. 3; PML `ArcFaceLoss`): the cross-entropy of the scaled
//! cosines to normalised class weights `W` `[D, C]`, with `s cos(θ_y + m)` for the target, or
//! `s (cos θ_y - m sin m)` once `θ_y + m` would pass π.

use burn::tensor::{Device, Tensor};

use super::classifier::{cosines, init_weights, targets, weighted};
use super::kinds::{Batch, Computed, Context, EmbInput, on_embeddings};
use super::state::{LossState, Slot};
use super::tuplet_margin::cos_shift;
use super::{LossModule, LossOutput, RegisteredLoss};
use crate::distance::Distance;
use crate::error::LossError;
use crate::ops::cross_entropy;
use crate::reducer::{Reducer, SubLoss};

dml_config::config! {
    /// Configuration of ArcFace.
    #[derive(Clone, Debug, PartialEq)]
    pub struct ArcFaceLossConfig {
        /// The additive angular margin m in degrees (PML's default).
        pub margin: f64 = 28.6,
        /// The scale s.
        pub scale: f64 = 64.0,
        /// Reducer override (else the mean).
        pub reducer: Option<Reducer> = None,
    }
}

/// ArcFace on its own; its class weights `W` `[D, C]` are its parameter.
pub type ArcFaceLoss = LossModule<ArcFaceLossConfig>;

impl RegisteredLoss for ArcFaceLossConfig {
    const NAME: &'static str = "arc_face";
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

impl ArcFaceLossConfig {
    fn compute(&self, input: &EmbInput<'_>, w: Tensor<2>) -> Result<Computed, LossError> {
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
