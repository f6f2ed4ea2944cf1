//! ProxyNCA (Movshovitz-Attias et al. 2017, Eq. 8; PML `ProxyNCALoss`): the NCA
//! log-probability of each sample's own proxy, `-log softmax_c(-s · d(x, p_c))[y]`.

use burn::tensor::{Device, Tensor};

use super::kinds::{Batch, Computed, Context, EmbInput, on_embeddings};
use super::state::{LossState, Slot, normal, require_classes};
use super::{LossModule, LossOutput, RegisteredLoss};
use crate::distance::Distance;
use crate::error::LossError;
use crate::ops::{cross_entropy, float1};
use crate::reducer::{Reducer, SubLoss};
use crate::tuples::miner_weights;

dml_config::config! {
    /// Configuration of ProxyNCA.
    #[derive(Clone, Debug, PartialEq)]
    pub struct ProxyNcaLossConfig {
        /// The softmax scale s (PML's default).
        pub softmax_scale: f64 = 1.0,
        /// Distance override (else squared Euclidean on normalised embeddings).
        pub distance: Option<Distance> = None,
        /// Reducer override (else the mean).
        pub reducer: Option<Reducer> = None,
    }
}

/// ProxyNCA on its own; its proxies `[C, D]` are its parameter.
pub type ProxyNcaLoss = LossModule<ProxyNcaLossConfig>;

impl RegisteredLoss for ProxyNcaLossConfig {
    const NAME: &'static str = "proxy_nca";
    const DEFAULT_DISTANCE: Distance = Distance::squared_euclidean();
    const DEFAULT_REDUCER: Reducer = Reducer::Mean;
    const PAIR_BASED: bool = false;
    const PARAMETERS: &'static [(Slot, &'static str)] = &[(Slot::Proxies, "proxies")];

    fn distance(&self) -> Option<&Distance> {
        self.distance.as_ref()
    }

    fn reducer(&self) -> Option<&Reducer> {
        self.reducer.as_ref()
    }

    /// Proxies drawn from Normal(0, 1).
    fn init_state(&self, num_classes: usize, dim: usize, device: &Device) -> Result<LossState, LossError> {
        require_classes(Self::NAME, "proxies", num_classes, dim)?;
        Ok(LossState {
            proxies: Some(normal([num_classes, dim], 1.0, device)),
            ..LossState::default()
        })
    }

    fn evaluate(&self, ctx: &Context<'_>, batch: Batch<'_>) -> Result<LossOutput, LossError> {
        on_embeddings(self, ctx, batch, |c, input| {
            c.compute(input, ctx.proxies(input.emb.dtype())?)
        })
    }
}

impl ProxyNcaLossConfig {
    /// `proxies` is `[C, D]`. PML drops samples whose probability underflows to exactly 0;
    /// the log-softmax form keeps them with their (large, finite) loss.
    fn compute(&self, input: &EmbInput<'_>, proxies: Tensor<2>) -> Result<Computed, LossError> {
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
