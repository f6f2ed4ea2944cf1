//! Margin loss (Wu et al. 2017, "Sampling matters in deep embedding learning", Eq. 4-5;
//! PML `MarginLoss`):
//! `[d_ap - β + α]_+ + [β - d_an + α]_+` per triplet, divided by the number of non-zero
//! terms, plus the regulariser `ν β` when β is learned.

use serde::{Deserialize, Serialize};

use super::HostInput;
use super::triplet_margin::{TripletsPerAnchor, resolve_triplets};
use crate::distance::Distance;
use crate::error::LossError;
use crate::host_grad::{HostLoss, reducer_weights};
use crate::reducer::Reducer;

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

    /// The loss and its gradients with respect to the matrix and to β (`beta` holds the
    /// current β values: one shared value, or one per class).
    pub(super) fn host(&self, input: &HostInput<'_>, beta: &[f64]) -> (HostLoss, Vec<f64>) {
        let n = input.mat.n;
        let m = &input.mat.values;
        let sim = input.mat.is_similarity;
        let mut grad = vec![0.0; n * n];
        let mut grad_beta = vec![0.0; beta.len()];
        let t = resolve_triplets(input.tuples, input.labels, self.triplets_per_anchor, input.seed);
        if t.is_empty() {
            return (
                HostLoss {
                    value: 0.0,
                    grad,
                    tuples: 0,
                },
                grad_beta,
            );
        }
        let k = t.len();
        let class_of = |i: usize| {
            if beta.len() > 1 {
                input.labels[t.a[i]] as usize
            } else {
                0
            }
        };
        // sign = +1 for a distance: pos = [d_ap - β + α]_+, neg = [β - d_an + α]_+.
        let sign = if sim { -1.0 } else { 1.0 };
        let mut pos = Vec::with_capacity(k);
        let mut neg = Vec::with_capacity(k);
        for i in 0..k {
            let b = beta[class_of(i)];
            pos.push((sign * (m[t.a[i] * n + t.p[i]] - b) + self.margin).max(0.0));
            neg.push((sign * (b - m[t.a[i] * n + t.n[i]]) + self.margin).max(0.0));
        }
        let divisor = (pos.iter().filter(|&&v| v > 0.0).count() + neg.iter().filter(|&&v| v > 0.0).count()) as f64;
        let losses: Vec<f64> = pos.iter().zip(&neg).map(|(p, q)| p + q).collect();
        let w = reducer_weights(input.reducer, &losses, Some(divisor));
        let mut value = 0.0;
        for i in 0..k {
            value += w[i] * losses[i];
            let c = class_of(i);
            if pos[i] > 0.0 {
                grad[t.a[i] * n + t.p[i]] += sign * w[i];
                grad_beta[c] -= sign * w[i];
            }
            if neg[i] > 0.0 {
                grad[t.a[i] * n + t.n[i]] -= sign * w[i];
                grad_beta[c] += sign * w[i];
            }
        }
        if self.learn_beta {
            if beta.len() == 1 {
                // PML's "already reduced" ν β.
                value += self.nu * beta[0];
                grad_beta[0] += self.nu;
            } else {
                let reg: Vec<f64> = (0..k).map(|i| self.nu * beta[class_of(i)]).collect();
                let wr = reducer_weights(input.reducer, &reg, Some(divisor));
                for i in 0..k {
                    value += wr[i] * reg[i];
                    grad_beta[class_of(i)] += wr[i] * self.nu;
                }
            }
        }
        (HostLoss { value, grad, tuples: k }, grad_beta)
    }
}
