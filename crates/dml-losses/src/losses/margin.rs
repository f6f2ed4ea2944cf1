//! Margin loss (Wu et al. 2017, "Sampling matters in deep embedding learning", Eq. 4-5;
//! PML `MarginLoss`):
//! `[d_ap - β + α]_+ + [β - d_an + α]_+` per triplet, divided by the number of non-zero
//! terms, plus the regulariser `ν β` when β is learned.

use burn::tensor::Tensor;
use burn::tensor::activation::relu;
use serde::{Deserialize, Serialize};

use super::triplet_margin::{TripletsPerAnchor, resolve_triplets};
use super::{Computed, PairInput};
use crate::distance::Distance;
use crate::error::LossError;
use crate::ops::{float1, gather_pairs, host, index1};
use crate::reducer::{Reducer, SubLoss};

/// Configuration of the margin loss.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MarginLossConfig {
    /// The margin α (PML default 0.2).
    pub margin: f64,
    /// The weight ν of the β regulariser (default 0).
    pub nu: f64,
    /// The (initial) boundary β (default 1.2).
    pub beta: f64,
    /// Learn β (default false); it then lives in the loss module's parameters.
    pub learn_beta: bool,
    /// One β per class instead of a single one (PML `num_classes` given; default false).
    pub per_class_beta: bool,
    /// Triplets per anchor without a miner (default `"all"`).
    pub triplets_per_anchor: TripletsPerAnchor,
    /// Distance override (default Euclidean on normalised embeddings).
    pub distance: Option<Distance>,
    /// Reducer override (default: divide by the number of non-zero terms).
    pub reducer: Option<Reducer>,
}

impl Default for MarginLossConfig {
    fn default() -> Self {
        Self {
            margin: 0.2,
            nu: 0.0,
            beta: 1.2,
            learn_beta: false,
            per_class_beta: false,
            triplets_per_anchor: TripletsPerAnchor::All,
            distance: None,
            reducer: None,
        }
    }
}

impl MarginLossConfig {
    pub(super) fn validate(&self) -> Result<(), LossError> {
        if !(self.margin.is_finite() && self.beta.is_finite() && self.nu.is_finite() && self.nu >= 0.0) {
            return Err(LossError::Config(format!(
                "margin: margin and beta must be finite and nu >= 0, got margin {}, beta {}, nu {}",
                self.margin, self.beta, self.nu
            )));
        }
        Ok(())
    }

    /// `beta` is the learnable β (`[1]` or `[C]`) when learned.
    pub(super) fn compute(
        &self,
        input: &PairInput<'_>,
        beta: Option<Tensor<1>>,
        num_classes: usize,
    ) -> Result<Computed, LossError> {
        let t = resolve_triplets(input.tuples, input.labels, self.triplets_per_anchor, input.seed);
        if t.is_empty() {
            return Ok(Computed::empty(2));
        }
        let device = input.mat.device();
        let dtype = input.mat.dtype();
        let d_ap = gather_pairs(&input.mat, &t.a, &t.p);
        let d_an = gather_pairs(&input.mat, &t.a, &t.n);
        // β of each triplet's anchor: the shared value, or the anchor's class entry.
        let per_class = self.per_class_beta && num_classes > 0;
        let index: Vec<usize> = if per_class {
            t.a.iter().map(|&a| input.labels[a] as usize).collect()
        } else {
            vec![0; t.len()]
        };
        let beta_t = match &beta {
            Some(b) => b.clone().select(0, index1(&index, &device)),
            None => float1(vec![self.beta; t.len()], &device, dtype),
        };
        let (pos, neg) = if input.sim {
            (
                relu(beta_t.clone() - d_ap + self.margin),
                relu(d_an - beta_t.clone() + self.margin),
            )
        } else {
            (
                relu(d_ap - beta_t.clone() + self.margin),
                relu(beta_t.clone() - d_an + self.margin),
            )
        };
        let active = |x: &Tensor<1>| host(x.clone()).iter().filter(|&&v| v > 0.0).count();
        let divisor = (active(&pos) + active(&neg)) as f64;
        let reg = match beta {
            Some(b) if self.learn_beta => {
                if b.dims()[0] == 1 {
                    SubLoss::reduced(b * self.nu)
                } else {
                    SubLoss::with_divisor(beta_t * self.nu, divisor)
                }
            }
            _ => SubLoss::zero(),
        };
        Ok(Computed {
            subs: vec![SubLoss::with_divisor(pos + neg, divisor), reg],
            tuples: t.len(),
        })
    }
}
