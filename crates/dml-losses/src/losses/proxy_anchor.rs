//! Proxy-Anchor loss (Kim et al. 2020, Eq. 4; PML `ProxyAnchorLoss`):
//! `1/|P+| Σ_{p∈P+} log(1 + Σ_{x∈X_p+} e^{-α(s(x,p) - δ)})
//!  + 1/|P| Σ_{p∈P} log(1 + Σ_{x∈X_p-} e^{α(s(x,p) + δ)})`.

use serde::{Deserialize, Serialize};

use crate::distance::Distance;
use crate::host_grad::{HostLoss, logsumexp_with_weights, reducer_weights};
use crate::reducer::Reducer;
use crate::tuples::{Tuples, miner_weights};

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
    /// `mat` is the `[N, C]` matrix between embeddings and proxies; returns the loss and its
    /// gradient with respect to `mat`.
    pub(super) fn host(
        &self,
        mat: &[f64],
        c: usize,
        sim: bool,
        labels: &[u32],
        tuples: Option<&Tuples>,
        reducer: &Reducer,
    ) -> HostLoss {
        let n = labels.len();
        let mut grad = vec![0.0; n * c];
        // Mined samples enter with log-weight (w - 1): unmined ones are damped.
        let offset: Vec<f64> = miner_weights(tuples, n, false).into_iter().map(|w| w - 1.0).collect();
        // sign = +1 for a similarity: positives enter as δ - s, negatives as s + δ.
        let sign = if sim { 1.0 } else { -1.0 };
        let mut pos_terms = vec![0.0; c];
        let mut neg_terms = vec![0.0; c];
        let mut pos_w: Vec<Vec<f64>> = vec![Vec::new(); c];
        let mut neg_w: Vec<Vec<f64>> = vec![Vec::new(); c];
        let mut xs = Vec::with_capacity(n);
        for j in 0..c {
            xs.clear();
            xs.extend(
                (0..n)
                    .filter(|&i| labels[i] as usize == j)
                    .map(|i| self.alpha * (self.margin - sign * mat[i * c + j]) + offset[i]),
            );
            pos_terms[j] = logsumexp_with_weights(&xs, true, &mut pos_w[j]);
            xs.clear();
            xs.extend(
                (0..n)
                    .filter(|&i| labels[i] as usize != j)
                    .map(|i| self.alpha * (sign * mat[i * c + j] + self.margin) + offset[i]),
            );
            neg_terms[j] = logsumexp_with_weights(&xs, true, &mut neg_w[j]);
        }
        let with_pos = (0..c).filter(|&j| labels.iter().any(|&l| l as usize == j)).count();
        let wp = reducer_weights(reducer, &pos_terms, Some(with_pos as f64));
        let wn = reducer_weights(reducer, &neg_terms, Some(c as f64));
        let mut value = 0.0;
        for j in 0..c {
            value += wp[j] * pos_terms[j] + wn[j] * neg_terms[j];
            let members = (0..n).filter(|&i| labels[i] as usize == j);
            for (i, w) in members.zip(&pos_w[j]) {
                grad[i * c + j] -= sign * self.alpha * wp[j] * w;
            }
            let others = (0..n).filter(|&i| labels[i] as usize != j);
            for (i, w) in others.zip(&neg_w[j]) {
                grad[i * c + j] += sign * self.alpha * wn[j] * w;
            }
        }
        HostLoss { value, grad, tuples: n }
    }
}
