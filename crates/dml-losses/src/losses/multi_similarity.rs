//! Multi-similarity loss (Wang et al. 2019, Eq. 4; PML `MultiSimilarityLoss`): per anchor,
//! `1/α log(1 + Σ_p e^{-α(S_ap - λ)}) + 1/β log(1 + Σ_n e^{β(S_an - λ)})`.

use serde::{Deserialize, Serialize};

use super::{Computed, PairInput};
use crate::distance::Distance;
use crate::error::LossError;
use crate::ops::masked_logsumexp;
use crate::reducer::{Reducer, SubLoss};
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
        let mat = input.mat.clone();
        // margin(mat, base) and margin(base, mat) of PML, for a similarity or a distance.
        let (pos_exp, neg_exp) = if input.sim {
            (mat.clone().neg() + self.base, mat - self.base)
        } else {
            (mat.clone() - self.base, mat.neg() + self.base)
        };
        let pos = masked_logsumexp(pos_exp * self.alpha, &pos_keep, true, 1) / self.alpha;
        let neg = masked_logsumexp(neg_exp * self.beta, &neg_keep, true, 1) / self.beta;
        Ok(Computed {
            subs: vec![SubLoss::elements((pos + neg).reshape([n]))],
            tuples: pairs.len(),
        })
    }
}
