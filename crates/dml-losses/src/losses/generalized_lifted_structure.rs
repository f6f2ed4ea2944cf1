//! Generalised lifted structure loss (Hermans et al. 2017, Sec. 2; PML
//! `GeneralizedLiftedStructureLoss`): per anchor,
//! `[log Σ_p e^{d_ap - m_pos} + log Σ_n e^{m_neg - d_an}]_+`.

use burn::tensor::activation::relu;

use super::kinds::{Batch, Computed, Context, PairInput, on_pairs};
use super::lifted_structure::remaining;
use super::{LossModule, LossOutput, RegisteredLoss};
use crate::distance::Distance;
use crate::error::LossError;
use crate::ops::masked_logsumexp;
use crate::reducer::{Reducer, SubLoss};
use crate::tuples::pairs_or_all;

dml_config::config! {
    /// Configuration of the generalised lifted structure loss.
    #[derive(Clone, Debug, PartialEq)]
    pub struct GeneralizedLiftedStructureLossConfig {
        /// Positive margin (PML's default).
        pub pos_margin: f64 = 0.0,
        /// Negative margin.
        pub neg_margin: f64 = 1.0,
        /// Distance override (else Euclidean on normalised embeddings).
        pub distance: Option<Distance> = None,
        /// Reducer override (else the mean over anchors).
        pub reducer: Option<Reducer> = None,
    }
}

/// The generalised lifted structure loss on its own.
pub type GeneralizedLiftedStructureLoss = LossModule<GeneralizedLiftedStructureLossConfig>;

impl RegisteredLoss for GeneralizedLiftedStructureLossConfig {
    const NAME: &'static str = "generalized_lifted_structure";
    const DEFAULT_DISTANCE: Distance = Distance::euclidean();
    const DEFAULT_REDUCER: Reducer = Reducer::Mean;
    const PAIR_BASED: bool = true;

    fn distance(&self) -> Option<&Distance> {
        self.distance.as_ref()
    }

    fn reducer(&self) -> Option<&Reducer> {
        self.reducer.as_ref()
    }

    fn evaluate(&self, ctx: &Context<'_>, batch: Batch<'_>) -> Result<LossOutput, LossError> {
        on_pairs(self, ctx, batch, Self::compute)
    }
}

impl GeneralizedLiftedStructureLossConfig {
    fn compute(&self, input: &PairInput<'_>) -> Result<Computed, LossError> {
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
        let (rem_pos, rem_neg) = remaining(&input.mat, input.sim, self.pos_margin, self.neg_margin);
        let pos = masked_logsumexp(rem_pos, &pos_keep, false, 1);
        let neg = masked_logsumexp(rem_neg, &neg_keep, false, 1);
        Ok(Computed {
            subs: vec![SubLoss::elements(relu(pos + neg).reshape([n]))],
            tuples: pairs.len(),
        })
    }
}
