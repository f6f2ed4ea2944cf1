//! Multi-similarity loss (Wang et al. 2019, Eq. 4; PML `MultiSimilarityLoss`): per anchor,
//! `1/α log(1 + Σ_p e^{-α(S_ap - λ)}) + 1/β log(1 + Σ_n e^{β(S_an - λ)})`.

use super::kinds::{Batch, Context, HostInput, on_host};
use super::{LossModule, LossOutput, RegisteredLoss};
use crate::distance::Distance;
use crate::error::LossError;
use crate::host_grad::{HostLoss, logsumexp_with_weights, reducer_weights};
use crate::reducer::Reducer;
use crate::tuples::pairs_or_all;

dml_config::config! {
    /// Configuration of the multi-similarity loss.
    #[derive(Clone, Debug, PartialEq)]
    pub struct MultiSimilarityLossConfig {
        /// Weight α of positive pairs (PML's default).
        pub alpha: f64 = 2.0,
        /// Weight β of negative pairs.
        pub beta: f64 = 50.0,
        /// The shift λ.
        pub base: f64 = 0.5,
        /// Distance override (else cosine similarity).
        pub distance: Option<Distance> = None,
        /// Reducer override (else the mean over anchors).
        pub reducer: Option<Reducer> = None,
    }
}

/// The multi-similarity loss on its own.
pub type MultiSimilarityLoss = LossModule<MultiSimilarityLossConfig>;

impl RegisteredLoss for MultiSimilarityLossConfig {
    const NAME: &'static str = "multi_similarity";
    const DEFAULT_DISTANCE: Distance = Distance::cosine();
    const DEFAULT_REDUCER: Reducer = Reducer::Mean;
    const PAIR_BASED: bool = true;
    const HOST_EVALUATED: bool = true;

    fn distance(&self) -> Option<&Distance> {
        self.distance.as_ref()
    }

    fn reducer(&self) -> Option<&Reducer> {
        self.reducer.as_ref()
    }

    fn validate(&self, _distance: &Distance) -> Result<(), LossError> {
        if !(self.alpha > 0.0 && self.beta > 0.0 && self.base.is_finite()) {
            return Err(LossError::Config(format!(
                "multi_similarity: alpha and beta must be positive, got {} and {}",
                self.alpha, self.beta
            )));
        }
        Ok(())
    }

    fn evaluate(&self, ctx: &Context<'_>, batch: Batch<'_>) -> Result<LossOutput, LossError> {
        on_host(self, ctx, batch, |c, input| (c.host(input, 0.0), Vec::new()))
    }
}

impl MultiSimilarityLossConfig {
    /// Per anchor `1/α log(1 + Σ_p e^{α margin(S_ap, λ)}) + 1/β log(1 + Σ_n e^{β margin(λ, S_an)})`
    /// with its gradient (the softmax weights of each log-sum-exp).
    ///
    /// Every exponent is shifted by `log_phi`: `log(1 + ϕ Σ e^x) = log(1 + Σ e^{x + log ϕ})`,
    /// which is GML-MS (PPGML App. I, Eq. I.2) with `ϕ_s = e^{log_phi}`; 0 is the MS loss.
    pub(crate) fn host(&self, input: &HostInput<'_>, log_phi: f64) -> HostLoss {
        let n = input.mat.n;
        let m = &input.mat.values;
        let sim = input.mat.is_similarity;
        let mut grad = vec![0.0; n * n];
        let pairs = pairs_or_all(input.tuples, input.labels);
        if pairs.is_empty() {
            return HostLoss {
                value: 0.0,
                grad,
                tuples: 0,
            };
        }
        // Masks, not lists: a pair mined twice counts once, as with PML's mask.
        let mut pos_keep = vec![false; n * n];
        let mut neg_keep = vec![false; n * n];
        for (&a, &p) in pairs.a1.iter().zip(&pairs.p) {
            pos_keep[a * n + p] = true;
        }
        for (&a, &k) in pairs.a2.iter().zip(&pairs.n) {
            neg_keep[a * n + k] = true;
        }
        // sign = +1 for a similarity: positives enter as λ - S, negatives as S - λ.
        let sign = if sim { 1.0 } else { -1.0 };
        let mut losses = vec![0.0; n];
        let mut pos_w: Vec<Vec<f64>> = vec![Vec::new(); n];
        let mut neg_w: Vec<Vec<f64>> = vec![Vec::new(); n];
        let mut xs = Vec::with_capacity(n);
        for a in 0..n {
            xs.clear();
            xs.extend(
                (0..n)
                    .filter(|&j| pos_keep[a * n + j])
                    .map(|j| self.alpha * sign * (self.base - m[a * n + j]) + log_phi),
            );
            let lp = logsumexp_with_weights(&xs, true, &mut pos_w[a]) / self.alpha;
            xs.clear();
            xs.extend(
                (0..n)
                    .filter(|&j| neg_keep[a * n + j])
                    .map(|j| self.beta * sign * (m[a * n + j] - self.base) + log_phi),
            );
            let ln = logsumexp_with_weights(&xs, true, &mut neg_w[a]) / self.beta;
            losses[a] = lp + ln;
        }
        let w = reducer_weights(input.reducer, &losses, None);
        let mut value = 0.0;
        for a in 0..n {
            value += w[a] * losses[a];
            let positives = (0..n).filter(|&j| pos_keep[a * n + j]);
            for (j, pw) in positives.zip(&pos_w[a]) {
                grad[a * n + j] -= sign * w[a] * pw;
            }
            let negatives = (0..n).filter(|&j| neg_keep[a * n + j]);
            for (j, nw) in negatives.zip(&neg_w[a]) {
                grad[a * n + j] += sign * w[a] * nw;
            }
        }
        HostLoss {
            value,
            grad,
            tuples: pairs.len(),
        }
    }
}
