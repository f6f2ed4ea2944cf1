//! Supervised contrastive loss (Khosla et al. 2020, Eq. 2 "L_out"; PML `SupConLoss`): per
//! anchor, minus the mean over its positives of `log(e^{s_ap/τ} / Σ_{k≠a} e^{s_ak/τ})`.

use dml_backend::float_tensor;

use super::kinds::{Batch, Computed, Context, PairInput, on_pairs};
use super::{LossModule, LossOutput, RegisteredLoss};
use crate::distance::Distance;
use crate::error::LossError;
use crate::ops::masked_logsumexp;
use crate::reducer::{Reducer, SubLoss};
use crate::tuples::pairs_or_all;

dml_config::config! {
    /// Configuration of SupCon.
    #[derive(Clone, Debug, PartialEq)]
    pub struct SupConLossConfig {
        /// The temperature τ (PML's default).
        pub temperature: f64 = 0.1,
        /// Distance override (else cosine similarity; a distance is negated).
        pub distance: Option<Distance> = None,
        /// Reducer override (else the average of the non-zero terms).
        pub reducer: Option<Reducer> = None,
    }
}

/// The supervised contrastive loss on its own.
pub type SupConLoss = LossModule<SupConLossConfig>;

impl RegisteredLoss for SupConLossConfig {
    const NAME: &'static str = "sup_con";
    const DEFAULT_DISTANCE: Distance = Distance::cosine();
    const DEFAULT_REDUCER: Reducer = Reducer::AvgNonZero;
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
                "sup_con: temperature must be positive, got {}",
                self.temperature
            )));
        }
        Ok(())
    }

    fn evaluate(&self, ctx: &Context<'_>, batch: Batch<'_>) -> Result<LossOutput, LossError> {
        on_pairs(self, ctx, batch, Self::compute)
    }
}

impl SupConLossConfig {
    fn compute(&self, input: &PairInput<'_>) -> Result<Computed, LossError> {
        let pairs = pairs_or_all(input.tuples, input.labels);
        if pairs.a1.is_empty() || pairs.a2.is_empty() {
            return Ok(Computed::empty(1));
        }
        let n = input.labels.len();
        let mut pos = vec![0.0f64; n * n];
        let mut keep = vec![false; n * n];
        for (&a, &p) in pairs.a1.iter().zip(&pairs.p) {
            pos[a * n + p] = 1.0;
            keep[a * n + p] = true;
        }
        for (&a, &k) in pairs.a2.iter().zip(&pairs.n) {
            keep[a * n + k] = true;
        }
        let pos_count: Vec<f64> = (0..n).map(|a| pos[a * n..(a + 1) * n].iter().sum::<f64>()).collect();
        let logits = if input.sim {
            input.mat.clone()
        } else {
            input.mat.clone().neg()
        } / self.temperature;
        // log-probabilities are shift-invariant, so PML's max subtraction is not needed: the
        // masked log-sum-exp is already overflow-free.
        let denominator = masked_logsumexp(logits.clone(), &keep, false, 1);
        let log_prob = logits - denominator;
        let device = log_prob.device();
        let dtype = log_prob.dtype();
        let pos_t = float_tensor(pos, [n, n], &device, dtype);
        // Anchors without positives divide 0 by 1 (PML: by the tiniest float).
        let count_t = float_tensor(pos_count.iter().map(|&c| c.max(1.0)).collect(), [n, 1], &device, dtype);
        let mean_log_prob = (pos_t * log_prob).sum_dim(1) / count_t;
        Ok(Computed {
            subs: vec![SubLoss::elements(mean_log_prob.neg().reshape([n]))],
            tuples: pairs.len(),
        })
    }
}
