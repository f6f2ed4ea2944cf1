//! Tuplet margin loss (Yu & Tao 2019, Eq. 6; PML `TupletMarginLoss`): per positive pair,
//! `log(1 + Σ_n e^{s (cos θ_an - cos(θ_ap - β))})`.

use super::kinds::{Batch, Computed, Context, PairInput, on_pairs, require_distance};
use super::{LossModule, LossOutput, RegisteredLoss};
use crate::distance::Distance;
use crate::error::LossError;
use crate::ops::{bool2, gather_pairs, index1, masked_logsumexp};
use crate::reducer::{Reducer, SubLoss};
use crate::tuples::pairs_or_all;
use burn::tensor::activation::softplus;

dml_config::config! {
    /// Configuration of the tuplet margin loss (cosine similarity only).
    #[derive(Clone, Debug, PartialEq)]
    pub struct TupletMarginLossConfig {
        /// The angular margin β in degrees (PML's default).
        pub margin: f64 = 5.73,
        /// The scale s.
        pub scale: f64 = 64.0,
        /// Reducer override (else the mean over positive pairs).
        pub reducer: Option<Reducer> = None,
    }
}

/// The tuplet margin loss on its own.
pub type TupletMarginLoss = LossModule<TupletMarginLossConfig>;

impl RegisteredLoss for TupletMarginLossConfig {
    const NAME: &'static str = "tuplet_margin";
    const DEFAULT_DISTANCE: Distance = Distance::cosine();
    const DEFAULT_REDUCER: Reducer = Reducer::Mean;
    const PAIR_BASED: bool = true;

    fn reducer(&self) -> Option<&Reducer> {
        self.reducer.as_ref()
    }

    fn validate(&self, distance: &Distance) -> Result<(), LossError> {
        require_distance(
            Self::NAME,
            matches!(distance, Distance::Cosine { power } if *power == 1.0),
            "cosine similarity",
            distance,
        )
    }

    fn evaluate(&self, ctx: &Context<'_>, batch: Batch<'_>) -> Result<LossOutput, LossError> {
        on_pairs(self, ctx, batch, Self::compute)
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
