//! Tuplet margin loss (Yu & Tao 2019, Eq. 6; PML `TupletMarginLoss`): per positive pair,
//! `log(1 + Σ_n e^{s (cos θ_an - cos(θ_ap - β))})`.

use burn::tensor::activation::softplus;
use serde::{Deserialize, Serialize};

use super::{Computed, PairInput};
use crate::error::LossError;
use crate::ops::{bool2, gather_pairs, index1, masked_logsumexp};
use crate::reducer::{Reducer, SubLoss};
use crate::tuples::pairs_or_all;

/// Configuration of the tuplet margin loss (cosine similarity only).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TupletMarginLossConfig {
    /// The angular margin β in degrees (PML default 5.73).
    pub margin: f64,
    /// The scale s (default 64).
    pub scale: f64,
    /// Reducer override (default mean over positive pairs).
    pub reducer: Option<Reducer>,
}

impl Default for TupletMarginLossConfig {
    fn default() -> Self {
        Self {
            margin: 5.73,
            scale: 64.0,
            reducer: None,
        }
    }
}

/// `cos(acos(c) - m)` as `c cos m + sin θ sin m` with `sin θ = sqrt(1 - c²)`: no `acos`,
/// whose derivative is infinite at `c = ±1` (duplicate embeddings); the clamped square root
/// passes a zero gradient there instead.
pub(crate) fn cos_shift<const D: usize>(c: burn::tensor::Tensor<D>, shift: f64) -> burn::tensor::Tensor<D> {
    let sin = (c.clone().square().neg() + 1.0).clamp_min(1e-12).sqrt();
    c * shift.cos() + sin * shift.sin()
}

impl TupletMarginLossConfig {
    /// Per pair `softplus(L_a - s cos(θ_ap - β))` with `L_a = log Σ_n e^{s cos θ_an}`.
    pub(super) fn compute(&self, input: &PairInput<'_>) -> Result<Computed, LossError> {
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
        let row_lse = masked_logsumexp(input.mat.clone() * self.scale, &neg_keep, false, 1).reshape([n]);
        let device = row_lse.device();
        let cos_ap = gather_pairs(&input.mat, &pairs.a1, &pairs.p);
        let shifted = cos_shift(cos_ap, self.margin.to_radians()) * self.scale;
        let la = row_lse.select(0, index1(&pairs.a1, &device));
        let mut losses = softplus(la - shifted, 1.0);
        let lonely: Vec<bool> = pairs.a1.iter().map(|&a| !has_neg[a]).collect();
        if lonely.iter().any(|&x| x) {
            let p = lonely.len();
            losses = losses
                .reshape([1, p])
                .mask_fill(bool2(lonely, [1, p], &device), 0.0)
                .reshape([p]);
        }
        Ok(Computed {
            subs: vec![SubLoss::elements(losses)],
            tuples: pairs.len(),
        })
    }
}
