//! Contrastive loss (Hadsell et al. 2006; PML `ContrastiveLoss`), also used on the SNR
//! distance (Yuan et al. 2019, PML `SignalToNoiseRatioContrastiveLoss`):
//! `[d_ap - m_pos]_+` per positive pair and `[m_neg - d_an]_+` per negative pair, each
//! reduced separately.

use burn::tensor::activation::relu;
use serde::{Deserialize, Serialize};

use super::{Computed, PairInput};
use crate::distance::Distance;
use crate::error::LossError;
use crate::ops::gather_pairs;
use crate::reducer::{Reducer, SubLoss};
use crate::tuples::pairs_or_all;

/// Configuration of the contrastive (and SNR-contrastive) loss.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ContrastiveLossConfig {
    /// Positive pairs closer than this cost nothing (PML default 0).
    pub pos_margin: f64,
    /// Negative pairs farther than this cost nothing (PML default 1).
    pub neg_margin: f64,
    /// Distance override (default Euclidean; SNR for `snr_contrastive`).
    pub distance: Option<Distance>,
    /// Reducer override (default: average of non-zero, per sub-loss).
    pub reducer: Option<Reducer>,
}

impl Default for ContrastiveLossConfig {
    fn default() -> Self {
        Self {
            pos_margin: 0.0,
            neg_margin: 1.0,
            distance: None,
            reducer: None,
        }
    }
}

impl ContrastiveLossConfig {
    pub(super) fn validate(&self) -> Result<(), LossError> {
        if !(self.pos_margin.is_finite() && self.neg_margin.is_finite()) {
            return Err(LossError::Config("contrastive: margins must be finite".into()));
        }
        Ok(())
    }

    pub(super) fn compute(&self, input: &PairInput<'_>) -> Result<Computed, LossError> {
        let pairs = pairs_or_all(input.tuples, input.labels);
        let mut subs = Vec::with_capacity(2);
        if pairs.a1.is_empty() {
            subs.push(SubLoss::zero());
        } else {
            let d = gather_pairs(&input.mat, &pairs.a1, &pairs.p);
            let l = if input.sim {
                d.neg() + self.pos_margin
            } else {
                d - self.pos_margin
            };
            subs.push(SubLoss::elements(relu(l)));
        }
        if pairs.a2.is_empty() {
            subs.push(SubLoss::zero());
        } else {
            let d = gather_pairs(&input.mat, &pairs.a2, &pairs.n);
            let l = if input.sim {
                d - self.neg_margin
            } else {
                d.neg() + self.neg_margin
            };
            subs.push(SubLoss::elements(relu(l)));
        }
        Ok(Computed {
            subs,
            tuples: pairs.len(),
        })
    }
}
