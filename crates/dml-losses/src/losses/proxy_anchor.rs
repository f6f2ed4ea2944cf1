//! Proxy-Anchor loss (Kim et al. 2020, Eq. 4; PML `ProxyAnchorLoss`):
//! `1/|P+| Σ_{p∈P+} log(1 + Σ_{x∈X_p+} e^{-α(s(x,p) - δ)})
//!  + 1/|P| Σ_{p∈P} log(1 + Σ_{x∈X_p-} e^{α(s(x,p) + δ)})`.

use burn::tensor::Tensor;
use serde::{Deserialize, Serialize};

use super::{Computed, EmbInput};
use crate::distance::Distance;
use crate::error::LossError;
use crate::ops::{float2, masked_logsumexp};
use crate::reducer::{Reducer, SubLoss};
use crate::tuples::miner_weights;

/// Configuration of the Proxy-Anchor loss.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProxyAnchorLossConfig {
    /// The margin δ (PML default 0.1).
    pub margin: f64,
    /// The scale α (default 32).
    pub alpha: f64,
    /// Distance override (default cosine similarity).
    pub distance: Option<Distance>,
    /// Reducer override (default: positive term over the proxies present, negative term
    /// over all proxies).
    pub reducer: Option<Reducer>,
}

impl Default for ProxyAnchorLossConfig {
    fn default() -> Self {
        Self {
            margin: 0.1,
            alpha: 32.0,
            distance: None,
            reducer: None,
        }
    }
}

impl ProxyAnchorLossConfig {
    /// `proxies` is `[C, D]`.
    pub(super) fn compute(&self, input: &EmbInput<'_>, proxies: Tensor<2>) -> Result<Computed, LossError> {
        let [n, _] = input.emb.dims();
        let [c, _] = proxies.dims();
        let labels = input.labels;
        let mat = input.distance.matrix(input.emb.clone(), proxies);
        let device = mat.device();
        let dtype = mat.dtype();
        let pos_keep: Vec<bool> = (0..n * c).map(|k| labels[k / c] as usize == k % c).collect();
        let neg_keep: Vec<bool> = pos_keep.iter().map(|&p| !p).collect();
        // PML's margin(x, y) is x - y for a distance and y - x for a similarity.
        let (pos_exp, neg_exp) = if input.distance.is_similarity() {
            (mat.clone().neg() + self.margin, mat + self.margin)
        } else {
            (mat.clone() - self.margin, mat.neg() - self.margin)
        };
        let mut pos_logits = pos_exp * self.alpha;
        let mut neg_logits = neg_exp * self.alpha;
        if input.tuples.is_some() {
            // Mined samples enter with log-weight (w - 1): unmined ones are damped.
            let w: Vec<f64> = miner_weights(input.tuples, n, false)
                .into_iter()
                .map(|w| w - 1.0)
                .collect();
            let w = float2(w, [n, 1], &device, dtype);
            pos_logits = pos_logits + w.clone();
            neg_logits = neg_logits + w;
        }
        let pos_term = masked_logsumexp(pos_logits, &pos_keep, true, 0).reshape([c]);
        let neg_term = masked_logsumexp(neg_logits, &neg_keep, true, 0).reshape([c]);
        let with_pos = (0..c).filter(|&j| labels.iter().any(|&l| l as usize == j)).count();
        Ok(Computed {
            subs: vec![
                SubLoss::with_divisor(pos_term, with_pos as f64),
                SubLoss::with_divisor(neg_term, c as f64),
            ],
            tuples: n,
        })
    }
}
