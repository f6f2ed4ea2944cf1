//! Supervised contrastive loss (Khosla et al. 2020, Eq. 2 "L_out"; PML `SupConLoss`): per
//! anchor, minus the mean over its positives of `log(e^{s_ap/τ} / Σ_{k≠a} e^{s_ak/τ})`.

use serde::{Deserialize, Serialize};

use super::{Computed, PairInput};
use crate::distance::Distance;
use crate::error::LossError;
use crate::ops::{float2, masked_logsumexp};
use crate::reducer::{Reducer, SubLoss};
use crate::tuples::pairs_or_all;

/// Configuration of SupCon.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SupConLossConfig {
    /// The temperature τ (PML default 0.1).
    pub temperature: f64,
    /// Distance override (default cosine similarity; a distance is negated).
    pub distance: Option<Distance>,
    /// Reducer override (default average of non-zero).
    pub reducer: Option<Reducer>,
}

impl Default for SupConLossConfig {
    fn default() -> Self {
        Self {
            temperature: 0.1,
            distance: None,
            reducer: None,
        }
    }
}

impl SupConLossConfig {
    pub(super) fn validate(&self) -> Result<(), LossError> {
        if !(self.temperature > 0.0 && self.temperature.is_finite()) {
            return Err(LossError::Config(format!(
                "sup_con: temperature must be positive, got {}",
                self.temperature
            )));
        }
        Ok(())
    }

    pub(super) fn compute(&self, input: &PairInput<'_>) -> Result<Computed, LossError> {
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
        let pos_t = float2(pos, [n, n], &device, dtype);
        // Anchors without positives divide 0 by 1 (PML: by the tiniest float).
        let count_t = float2(pos_count.iter().map(|&c| c.max(1.0)).collect(), [n, 1], &device, dtype);
        let mean_log_prob = (pos_t * log_prob).sum_dim(1) / count_t;
        Ok(Computed {
            subs: vec![SubLoss::elements(mean_log_prob.neg().reshape([n]))],
            tuples: pairs.len(),
        })
    }
}
