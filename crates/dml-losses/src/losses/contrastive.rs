//! Contrastive loss (Hadsell et al. 2006; PML `ContrastiveLoss`), also the SNR-contrastive
//! loss's maths (see `snr_contrastive`):
//! `[d_ap - m_pos]_+` per positive pair and `[m_neg - d_an]_+` per negative pair, each
//! reduced separately.

use burn::tensor::activation::relu;

use super::kinds::{Batch, Computed, Context, PairInput, on_pairs};
use super::{LossModule, LossOutput, RegisteredLoss};
use crate::distance::Distance;
use crate::error::LossError;
use crate::ops::gather_pairs;
use crate::reducer::{Reducer, SubLoss};
use crate::tuples::pairs_or_all;

dml_config::config! {
    /// Configuration of the contrastive loss.
    #[derive(Clone, Debug, PartialEq)]
    pub struct ContrastiveLossConfig {
        /// Positive pairs closer than this cost nothing (PML's default).
        pub pos_margin: f64 = 0.0,
        /// Negative pairs farther than this cost nothing.
        pub neg_margin: f64 = 1.0,
        /// Distance override (else Euclidean on normalised embeddings).
        pub distance: Option<Distance> = None,
        /// Reducer override (else the average of the non-zero terms, per sub-loss).
        pub reducer: Option<Reducer> = None,
    }
}

/// The contrastive loss on its own.
pub type ContrastiveLoss = LossModule<ContrastiveLossConfig>;

impl RegisteredLoss for ContrastiveLossConfig {
    const NAME: &'static str = "contrastive";
    const DEFAULT_DISTANCE: Distance = Distance::euclidean();
    const DEFAULT_REDUCER: Reducer = Reducer::AvgNonZero;
    const PAIR_BASED: bool = true;

    fn distance(&self) -> Option<&Distance> {
        self.distance.as_ref()
    }

    fn reducer(&self) -> Option<&Reducer> {
        self.reducer.as_ref()
    }

    fn validate(&self, _distance: &Distance) -> Result<(), LossError> {
        check_margins(self.pos_margin, self.neg_margin)
    }

    fn evaluate(&self, ctx: &Context<'_>, batch: Batch<'_>) -> Result<LossOutput, LossError> {
        on_pairs(self, ctx, batch, |c, input| {
            contrastive(c.pos_margin, c.neg_margin, input)
        })
    }
}

/// Both margins must be finite (shared with the SNR-contrastive loss).
pub(crate) fn check_margins(pos_margin: f64, neg_margin: f64) -> Result<(), LossError> {
    if !(pos_margin.is_finite() && neg_margin.is_finite()) {
        return Err(LossError::Config("contrastive: margins must be finite".into()));
    }
    Ok(())
}

/// `[d_ap - m_pos]_+` per positive pair and `[m_neg - d_an]_+` per negative pair (mirrored for
/// a similarity), as two sub-losses (shared with the SNR-contrastive loss).
pub(crate) fn contrastive(pos_margin: f64, neg_margin: f64, input: &PairInput<'_>) -> Result<Computed, LossError> {
    let pairs = pairs_or_all(input.tuples, input.labels);
    let mut subs = Vec::with_capacity(2);
    if pairs.a1.is_empty() {
        subs.push(SubLoss::zero());
    } else {
        let d = gather_pairs(&input.mat, &pairs.a1, &pairs.p);
        let l = if input.sim {
            d.neg() + pos_margin
        } else {
            d - pos_margin
        };
        subs.push(SubLoss::elements(relu(l)));
    }
    if pairs.a2.is_empty() {
        subs.push(SubLoss::zero());
    } else {
        let d = gather_pairs(&input.mat, &pairs.a2, &pairs.n);
        let l = if input.sim {
            d - neg_margin
        } else {
            d.neg() + neg_margin
        };
        subs.push(SubLoss::elements(relu(l)));
    }
    Ok(Computed {
        subs,
        tuples: pairs.len(),
    })
}
