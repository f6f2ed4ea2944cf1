//! Multi-similarity loss (Wang et al. 2019, Eq. 4; PML `MultiSimilarityLoss`): per anchor,
//! `1/α log(1 + Σ_p e^{-α(S_ap - λ)}) + 1/β log(1 + Σ_n e^{β(S_an - λ)})`.

use serde::{Deserialize, Serialize};

use super::HostInput;
use crate::distance::Distance;
use crate::error::LossError;
use crate::host_grad::{HostLoss, logsumexp_with_weights, reducer_weights};
use crate::reducer::Reducer;
use crate::tuples::pairs_or_all;

/// Configuration of the multi-similarity loss.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MultiSimilarityLossConfig {
    /// Weight α of positive pairs (PML default 2).
    pub alpha: f64,
    /// Weight β of negative pairs (default 50).
    pub beta: f64,
    /// The shift λ (default 0.5).
    pub base: f64,
    /// Distance override (default cosine similarity).
    pub distance: Option<Distance>,
    /// Reducer override (default mean over anchors).
    pub reducer: Option<Reducer>,
}

impl Default for MultiSimilarityLossConfig {
    fn default() -> Self {
        Self {
            alpha: 2.0,
            beta: 50.0,
            base: 0.5,
            distance: None,
            reducer: None,
        }
    }
}

impl MultiSimilarityLossConfig {
    pub(super) fn validate(&self) -> Result<(), LossError> {
        if !(self.alpha > 0.0 && self.beta > 0.0 && self.base.is_finite()) {
            return Err(LossError::Config(format!(
                "multi_similarity: alpha and beta must be positive, got {} and {}",
                self.alpha, self.beta
            )));
        }
        Ok(())
    }

    /// Per anchor `1/α log(1 + Σ_p e^{α margin(S_ap, λ)}) + 1/β log(1 + Σ_n e^{β margin(λ, S_an)})`
    /// with its gradient (the softmax weights of each log-sum-exp).
    pub(super) fn host(&self, input: &HostInput<'_>) -> HostLoss {
        let n = input.mat.n;
        let m = &input.mat.values;
        let sim = input.mat.is_similarity;
        let mut grad = vec![0.0; n * n];
        let pairs = pairs_or_all(input.tuples, input.labels);
        if pairs.is_empty() {
            return HostLoss {
                value: 0.0,
                grad,
                tuples: 0,
            };
        }
        // Masks, not lists: a pair mined twice counts once, as with PML's mask.
        let mut pos_keep = vec![false; n * n];
        let mut neg_keep = vec![false; n * n];
        for (&a, &p) in pairs.a1.iter().zip(&pairs.p) {
            pos_keep[a * n + p] = true;
        }
        for (&a, &k) in pairs.a2.iter().zip(&pairs.n) {
            neg_keep[a * n + k] = true;
        }
        // sign = +1 for a similarity: positives enter as λ - S, negatives as S - λ.
        let sign = if sim { 1.0 } else { -1.0 };
        let mut losses = vec![0.0; n];
        let mut pos_w: Vec<Vec<f64>> = vec![Vec::new(); n];
        let mut neg_w: Vec<Vec<f64>> = vec![Vec::new(); n];
        let mut xs = Vec::with_capacity(n);
        for a in 0..n {
            xs.clear();
            xs.extend(
                (0..n)
                    .filter(|&j| pos_keep[a * n + j])
                    .map(|j| self.alpha * sign * (self.base - m[a * n + j])),
            );
            let lp = logsumexp_with_weights(&xs, true, &mut pos_w[a]) / self.alpha;
            xs.clear();
            xs.extend(
                (0..n)
                    .filter(|&j| neg_keep[a * n + j])
                    .map(|j| self.beta * sign * (m[a * n + j] - self.base)),
            );
            let ln = logsumexp_with_weights(&xs, true, &mut neg_w[a]) / self.beta;
            losses[a] = lp + ln;
        }
        let w = reducer_weights(input.reducer, &losses, None);
        let mut value = 0.0;
        for a in 0..n {
            value += w[a] * losses[a];
            let positives = (0..n).filter(|&j| pos_keep[a * n + j]);
            for (j, pw) in positives.zip(&pos_w[a]) {
                grad[a * n + j] -= sign * w[a] * pw;
            }
            let negatives = (0..n).filter(|&j| neg_keep[a * n + j]);
            for (j, nw) in negatives.zip(&neg_w[a]) {
                grad[a * n + j] += sign * w[a] * nw;
            }
        }
        HostLoss {
            value,
            grad,
            tuples: pairs.len(),
        }
    }
}
