//! NT-Xent / InfoNCE (Chen et al. 2020, Eq. 1; PML `NTXentLoss`): for each positive pair,
//! `-log(e^{s_ap/τ} / (e^{s_ap/τ} + Σ_n e^{s_an/τ}))` over the anchor's negative pairs.

use super::kinds::{Batch, Computed, Context, PairInput, on_pairs};
use super::{LossModule, LossOutput, RegisteredLoss};
use crate::distance::Distance;
use crate::error::LossError;
use crate::ops::{bool2, gather_pairs, index1, masked_logsumexp};
use crate::reducer::{Reducer, SubLoss};
use crate::tuples::pairs_or_all;
use burn::tensor::activation::softplus;

dml_config::config! {
    /// Configuration of NT-Xent.
    #[derive(Clone, Debug, PartialEq)]
    pub struct NtXentLossConfig {
        /// The temperature τ (PML's default).
        pub temperature: f64 = 0.07,
        /// Distance override (else cosine similarity; a distance is negated).
        pub distance: Option<Distance> = None,
        /// Reducer override (else the mean over positive pairs).
        pub reducer: Option<Reducer> = None,
    }
}

/// The NT-Xent loss on its own.
pub type NtXentLoss = LossModule<NtXentLossConfig>;

impl RegisteredLoss for NtXentLossConfig {
    const NAME: &'static str = "nt_xent";
    const DEFAULT_DISTANCE: Distance = Distance::cosine();
    const DEFAULT_REDUCER: Reducer = Reducer::Mean;
    const PAIR_BASED: bool = true;

    fn distance(&self) -> Option<&Distance> {
        self.distance.as_ref()
    }

    fn reducer(&self) -> Option<&Reducer> {
        self.reducer.as_ref()
    }

    fn validate(&self, _distance: &Distance) -> Result<(), LossError> {
        if !(self.temperature > 0.0 && self.temperature.is_finite()) {
            return Err(LossError::Config(format!(
                "nt_xent: temperature must be positive, got {}",
                self.temperature
            )));
        }
        Ok(())
    }

    fn evaluate(&self, ctx: &Context<'_>, batch: Batch<'_>) -> Result<LossOutput, LossError> {
        on_pairs(self, ctx, batch, Self::compute)
    }
}

impl NtXentLossConfig {
    /// Written per anchor as `softplus(L_a - s_ap/τ)` with `L_a = log Σ_n e^{s_an/τ}`, which
    /// equals PML's per-pair ratio but needs one `[N, N]` log-sum-exp instead of a
    /// positive-pairs × negative-pairs matrix.
    fn compute(&self, input: &PairInput<'_>) -> Result<Computed, LossError> {
        let pairs = pairs_or_all(input.tuples, input.labels);
        if pairs.a1.is_empty() || pairs.a2.is_empty() {
            return Ok(Computed::empty(1));
        }
        let n = input.labels.len();
        let logits = if input.sim {
            input.mat.clone()
        } else {
            input.mat.clone().neg()
        } / self.temperature;
        let mut neg_keep = vec![false; n * n];
        for (&a, &k) in pairs.a2.iter().zip(&pairs.n) {
            neg_keep[a * n + k] = true;
        }
        let has_neg: Vec<bool> = (0..n)
            .map(|a| neg_keep[a * n..(a + 1) * n].iter().any(|&k| k))
            .collect();
        let lse = masked_logsumexp(logits.clone(), &neg_keep, false, 1).reshape([n]);
        let device = logits.device();
        let pos = gather_pairs(&logits, &pairs.a1, &pairs.p);
        let l_a = lse.select(0, index1(&pairs.a1, &device));
        let mut losses = softplus(l_a - pos, 1.0);
        // An anchor without negatives has ratio 1 and loss 0 (PML: log(1 + tiny)).
        let lonely: Vec<bool> = pairs.a1.iter().map(|&a| !has_neg[a]).collect();
        if lonely.iter().any(|&x| x) {
            let p = lonely.len();
            losses = losses
                .reshape([1, p])
                .mask_fill(bool2(lonely, [1, p], &device), 0.0)
                .reshape([p]);
        }
        Ok(Computed {
            subs: vec![SubLoss::elements(losses)],
            tuples: pairs.len(),
        })
    }
}
