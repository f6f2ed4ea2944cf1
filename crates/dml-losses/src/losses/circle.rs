//! Circle loss (Sun et al. 2020, Eq. 6 with the optima of Eq. 8; PML `CircleLoss`):
//! per anchor `softplus(log Σ_p e^{-γ α_p (s_p - Δ_p)} + log Σ_n e^{γ α_n (s_n - Δ_n)})`
//! with detached `α_p = [1 + m - s_p]_+`, `α_n = [s_n + m]_+`, `Δ_p = 1 - m`, `Δ_n = m`.

use super::kinds::{Batch, Computed, Context, PairInput, on_pairs, require_distance};
use super::{LossModule, LossOutput, RegisteredLoss};
use crate::distance::Distance;
use crate::error::LossError;
use crate::ops::{bool2, masked_logsumexp};
use crate::reducer::{Reducer, SubLoss};
use crate::tuples::pairs_or_all;
use burn::tensor::activation::{relu, softplus};

dml_config::config! {
    /// Configuration of the circle loss (cosine similarity only).
    #[derive(Clone, Debug, PartialEq)]
    pub struct CircleLossConfig {
        /// The relaxation m (PML's default).
        pub m: f64 = 0.4,
        /// The scale γ.
        pub gamma: f64 = 80.0,
        /// Reducer override (else the average of the non-zero terms).
        pub reducer: Option<Reducer> = None,
    }
}

/// The circle loss on its own.
pub type CircleLoss = LossModule<CircleLossConfig>;

impl RegisteredLoss for CircleLossConfig {
    const NAME: &'static str = "circle";
    const DEFAULT_DISTANCE: Distance = Distance::cosine();
    const DEFAULT_REDUCER: Reducer = Reducer::AvgNonZero;
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

impl CircleLossConfig {
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
        let s = input.mat.clone();
        let sd = s.clone().detach();
        let alpha_p = relu(sd.clone().neg() + (1.0 + self.m));
        let alpha_n = relu(sd + self.m);
        let logit_p = alpha_p * (s.clone() - (1.0 - self.m)) * (-self.gamma);
        let logit_n = alpha_n * (s - self.m) * self.gamma;
        let lse_p = masked_logsumexp(logit_p, &pos_keep, false, 1);
        let lse_n = masked_logsumexp(logit_n, &neg_keep, false, 1);
        let losses = softplus(lse_p + lse_n, 1.0);
        // Anchors lacking positives or negatives contribute exactly 0.
        let incomplete: Vec<bool> = (0..n)
            .map(|a| {
                !pos_keep[a * n..(a + 1) * n].iter().any(|&k| k) || !neg_keep[a * n..(a + 1) * n].iter().any(|&k| k)
            })
            .collect();
        let device = losses.device();
        let losses = losses.mask_fill(bool2(incomplete, [n, 1], &device), 0.0).reshape([n]);
        Ok(Computed {
            subs: vec![SubLoss::elements(losses)],
            tuples: pairs.len(),
        })
    }
}
