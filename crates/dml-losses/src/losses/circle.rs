//! Circle loss (Sun et al. 2020, Eq. 6 with the optima of Eq. 8; PML `CircleLoss`):
//! per anchor `softplus(log Σ_p e^{-γ α_p (s_p - Δ_p)} + log Σ_n e^{γ α_n (s_n - Δ_n)})`
//! with detached `α_p = [1 + m - s_p]_+`, `α_n = [s_n + m]_+`, `Δ_p = 1 - m`, `Δ_n = m`.

use burn::tensor::activation::{relu, softplus};
use serde::{Deserialize, Serialize};

use super::{Computed, PairInput};
use crate::error::LossError;
use crate::ops::{bool2, masked_logsumexp};
use crate::reducer::{Reducer, SubLoss};
use crate::tuples::pairs_or_all;

/// Configuration of the circle loss (cosine similarity only).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CircleLossConfig {
    /// The relaxation m (PML default 0.4).
    pub m: f64,
    /// The scale γ (default 80).
    pub gamma: f64,
    /// Reducer override (default average of non-zero).
    pub reducer: Option<Reducer>,
}

impl Default for CircleLossConfig {
    fn default() -> Self {
        Self {
            m: 0.4,
            gamma: 80.0,
            reducer: None,
        }
    }
}

impl CircleLossConfig {
    pub(super) fn compute(&self, input: &PairInput<'_>) -> Result<Computed, LossError> {
        let pairs = pairs_or_all(input.tuples, input.labels);
        if pairs.is_empty() {
            return Ok(Computed::empty(1));
        }
        let n = input.labels.len();
        let mut pos_keep = vec![false; n * n];
        let mut neg_keep = vec![false; n * n];
        for (&a, &p) in pairs.a1.iter().zip(&pairs.p) {
            pos_keep[a * n + p] = true;
        }
        for (&a, &k) in pairs.a2.iter().zip(&pairs.n) {
            neg_keep[a * n + k] = true;
        }
        let s = input.mat.clone();
        let sd = s.clone().detach();
        let alpha_p = relu(sd.clone().neg() + (1.0 + self.m));
        let alpha_n = relu(sd + self.m);
        let logit_p = alpha_p * (s.clone() - (1.0 - self.m)) * (-self.gamma);
        let logit_n = alpha_n * (s - self.m) * self.gamma;
        let lse_p = masked_logsumexp(logit_p, &pos_keep, false, 1);
        let lse_n = masked_logsumexp(logit_n, &neg_keep, false, 1);
        let losses = softplus(lse_p + lse_n, 1.0);
        // Anchors lacking positives or negatives contribute exactly 0.
        let incomplete: Vec<bool> = (0..n)
            .map(|a| {
                !pos_keep[a * n..(a + 1) * n].iter().any(|&k| k) || !neg_keep[a * n..(a + 1) * n].iter().any(|&k| k)
            })
            .collect();
        let device = losses.device();
        let losses = losses.mask_fill(bool2(incomplete, [n, 1], &device), 0.0).reshape([n]);
        Ok(Computed {
            subs: vec![SubLoss::elements(losses)],
            tuples: pairs.len(),
        })
    }
}
