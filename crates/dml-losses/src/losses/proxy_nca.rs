//! ProxyNCA (Movshovitz-Attias et al. 2017, Eq. 8; PML `ProxyNCALoss`): the NCA
//! log-probability of each sample's own proxy, `-log softmax_c(-s · d(x, p_c))[y]`.

use burn::tensor::Tensor;
use serde::{Deserialize, Serialize};

use super::{Computed, EmbInput};
use crate::distance::Distance;
use crate::error::LossError;
use crate::ops::{cross_entropy, float1};
use crate::reducer::{Reducer, SubLoss};
use crate::tuples::miner_weights;

/// Configuration of ProxyNCA.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProxyNcaLossConfig {
    /// The softmax scale s (PML default 1).
    pub softmax_scale: f64,
    /// Distance override (default squared Euclidean on normalised embeddings).
    pub distance: Option<Distance>,
    /// Reducer override (default mean).
    pub reducer: Option<Reducer>,
}

impl Default for ProxyNcaLossConfig {
    fn default() -> Self {
        Self {
            softmax_scale: 1.0,
            distance: None,
            reducer: None,
        }
    }
}

impl ProxyNcaLossConfig {
    /// `proxies` is `[C, D]`. PML drops samples whose probability underflows to exactly 0;
    /// the log-softmax form keeps them with their (large, finite) loss.
    pub(super) fn compute(&self, input: &EmbInput<'_>, proxies: Tensor<2>) -> Result<Computed, LossError> {
        let n = input.labels.len();
        let mat = input.distance.matrix(input.emb.clone(), proxies);
        let mat = if input.distance.is_similarity() { mat } else { mat.neg() };
        let targets: Vec<usize> = input.labels.iter().map(|&l| l as usize).collect();
        let mut losses = cross_entropy(mat * self.softmax_scale, &targets);
        if input.tuples.is_some() {
            let device = losses.device();
            let dtype = losses.dtype();
            losses = losses * float1(miner_weights(input.tuples, n, true), &device, dtype);
        }
        Ok(Computed {
            subs: vec![SubLoss::elements(losses)],
            tuples: n,
        })
    }
}
