//! Angular loss (Wang et al. 2017, Eq. 8 in its log-sum-exp form; PML `AngularLoss`): per
//! positive pair, `log(1 + Σ_n e^{4 tan²α (x_a + x_p)·x_n - 2 (1 + tan²α) x_a·x_p})`.

use burn::tensor::Tensor;

use super::kinds::{Batch, Computed, Context, EmbInput, on_embeddings, require_distance};
use super::{LossModule, LossOutput, RegisteredLoss};
use crate::distance::Distance;
use crate::error::LossError;
use crate::ops::{index1, l2_normalize, masked_logsumexp};
use crate::reducer::{Reducer, SubLoss};
use crate::tuples::pairs_or_all;

dml_config::config! {
    /// Configuration of the angular loss (Euclidean distance on normalised embeddings).
    #[derive(Clone, Debug, PartialEq)]
    pub struct AngularLossConfig {
        /// The angle α in degrees (PML's default).
        pub alpha: f64 = 40.0,
        /// Reducer override (else the mean over positive pairs).
        pub reducer: Option<Reducer> = None,
    }
}

/// The angular loss on its own.
pub type AngularLoss = LossModule<AngularLossConfig>;

impl RegisteredLoss for AngularLossConfig {
    const NAME: &'static str = "angular";
    const DEFAULT_DISTANCE: Distance = Distance::euclidean();
    const DEFAULT_REDUCER: Reducer = Reducer::Mean;
    const PAIR_BASED: bool = false;

    fn reducer(&self) -> Option<&Reducer> {
        self.reducer.as_ref()
    }

    fn validate(&self, distance: &Distance) -> Result<(), LossError> {
        require_distance(
            Self::NAME,
            distance.is_normalized_lp(2.0, Some(1.0)),
            "Euclidean distance on normalised embeddings",
            distance,
        )
    }

    fn evaluate(&self, ctx: &Context<'_>, batch: Batch<'_>) -> Result<LossOutput, LossError> {
        on_embeddings(self, ctx, batch, Self::compute)
    }
}

impl AngularLossConfig {
    /// As in PML, anchors and positives are normalised but the negatives `x_n` enter as the
    /// raw embeddings.
    fn compute(&self, input: &EmbInput<'_>) -> Result<Computed, LossError> {
        let pairs = pairs_or_all(input.tuples, input.labels);
        if pairs.a1.is_empty() || pairs.a2.is_empty() {
            return Ok(Computed::empty(1));
        }
        let [n, _] = input.emb.dims();
        let p = pairs.a1.len();
        let device = input.emb.device();
        let anchors = l2_normalize(input.emb.clone().select(0, index1(&pairs.a1, &device)), 1);
        let positives = l2_normalize(input.emb.clone().select(0, index1(&pairs.p, &device)), 1);
        let sq_tan = self.alpha.to_radians().tan().powi(2);
        let ap_dot: Tensor<2> = (anchors.clone() * positives.clone()).sum_dim(1);
        let ap_x = (anchors + positives).matmul(input.emb.clone().transpose());
        let logits = ap_x * (4.0 * sq_tan) - ap_dot * (2.0 * (1.0 + sq_tan));
        let keep: Vec<bool> = pairs
            .a1
            .iter()
            .flat_map(|&a| input.labels.iter().map(move |&l| l != input.labels[a]))
            .collect();
        debug_assert_eq!(keep.len(), p * n);
        let losses = masked_logsumexp(logits, &keep, true, 1).reshape([p]);
        Ok(Computed {
            subs: vec![SubLoss::elements(losses)],
            tuples: p,
        })
    }
}
