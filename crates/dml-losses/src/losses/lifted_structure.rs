//! Lifted structure loss (Oh Song et al. 2016, Eq. 4; PML `LiftedStructureLoss`): per
//! positive pair `(i, j)`, `½ [log Σ_{(k,l) ∈ N_i ∪ N_j} e^{m_neg - d_kl} + (d_ij - m_pos)]_+²`.

use burn::tensor::Tensor;
use burn::tensor::activation::relu;

use super::kinds::{Batch, Computed, Context, PairInput, on_pairs};
use super::{LossModule, LossOutput, RegisteredLoss};
use crate::distance::Distance;
use crate::error::LossError;
use crate::ops::{gather_pairs, index1, masked_logsumexp};
use crate::reducer::{Reducer, SubLoss};
use crate::tuples::pairs_or_all;

dml_config::config! {
    /// Configuration of the lifted structure loss.
    #[derive(Clone, Debug, PartialEq)]
    pub struct LiftedStructureLossConfig {
        /// Positive margin (PML's default).
        pub pos_margin: f64 = 0.0,
        /// Negative margin.
        pub neg_margin: f64 = 1.0,
        /// Distance override (else Euclidean on normalised embeddings).
        pub distance: Option<Distance> = None,
        /// Reducer override (else the mean over positive pairs).
        pub reducer: Option<Reducer> = None,
    }
}

/// The lifted structure loss on its own.
pub type LiftedStructureLoss = LossModule<LiftedStructureLossConfig>;

impl RegisteredLoss for LiftedStructureLossConfig {
    const NAME: &'static str = "lifted_structure";
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

/// `margin(x, m)` and `margin(m, x)` of PML on a whole matrix.
pub(crate) fn remaining(mat: &Tensor<2>, sim: bool, pos_margin: f64, neg_margin: f64) -> (Tensor<2>, Tensor<2>) {
    if sim {
        (mat.clone().neg() + pos_margin, mat.clone() - neg_margin)
    } else {
        (mat.clone() - pos_margin, mat.clone().neg() + neg_margin)
    }
}

impl LiftedStructureLossConfig {
    /// The negatives of a positive pair are the negative pairs anchored at either of its
    /// two members; their log-sum-exp is the log-add-exp of the two anchors' row
    /// log-sum-exps, which avoids a positive-pairs × negative-pairs matrix.
    fn compute(&self, input: &PairInput<'_>) -> Result<Computed, LossError> {
        let pairs = pairs_or_all(input.tuples, input.labels);
        if pairs.a1.is_empty() || pairs.a2.is_empty() {
            return Ok(Computed::empty(1));
        }
        let n = input.labels.len();
        let mut neg_keep = vec![false; n * n];
        for (&a, &k) in pairs.a2.iter().zip(&pairs.n) {
            neg_keep[a * n + k] = true;
        }
        let has_neg: Vec<bool> = (0..n)
            .map(|a| neg_keep[a * n..(a + 1) * n].iter().any(|&k| k))
            .collect();
        let (rem_pos, rem_neg) = remaining(&input.mat, input.sim, self.pos_margin, self.neg_margin);
        let row_lse = masked_logsumexp(rem_neg, &neg_keep, false, 1);
        let device = row_lse.device();
        let p = pairs.a1.len();
        let la = row_lse.clone().select(0, index1(&pairs.a1, &device));
        let lp = row_lse.select(0, index1(&pairs.p, &device));
        let both = Tensor::cat(vec![la, lp], 1);
        let keep: Vec<bool> = pairs
            .a1
            .iter()
            .zip(&pairs.p)
            .flat_map(|(&a, &q)| [has_neg[a], has_neg[q]])
            .collect();
        let neg_term = masked_logsumexp(both, &keep, false, 1).reshape([p]);
        let pos_term = gather_pairs(&rem_pos, &pairs.a1, &pairs.p);
        let losses = relu(neg_term + pos_term).square() / 2.0;
        Ok(Computed {
            subs: vec![SubLoss::elements(losses)],
            tuples: pairs.len(),
        })
    }
}
