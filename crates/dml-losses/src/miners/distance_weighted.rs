//! Distance-weighted negative sampling (Wu et al. 2017, "Sampling matters in deep
//! embedding learning", Sec. 4; PML `DistanceWeightedMiner`).

use rand::SeedableRng;

use super::MineInput;
use crate::distance::Distance;
use crate::error::LossError;
use crate::tuples::{Triplets, Tuples};

dml_config::config! {
    /// Configuration of the distance-weighted miner.
    #[derive(Clone, Debug, PartialEq)]
    pub struct DistanceWeightedMinerConfig {
        /// Distances are clamped below at this value before weighting, to bound the variance
        /// (PML's default).
        pub cutoff: f64 = 0.5,
        /// Negatives at this distance or farther get weight 0: they would contribute no loss
        /// (PML's default).
        pub nonzero_loss_cutoff: f64 = 1.4,
        /// The embedding dimension `n` of the density `q(d)`; without it, the embeddings'
        /// dimension. [`crate::MetricLoss::forward_with_matrix`] has no embeddings: set it there
        /// (otherwise the batch size N stands in for it).
        pub dim: Option<usize> = None,
        /// The distance; must be Euclidean (p = 2, power 1) on normalised embeddings, the
        /// setting the density of Wu et al. is derived for (and the one used without it).
        pub distance: Option<Distance> = None,
    }
}

impl DistanceWeightedMinerConfig {
    pub(super) fn validate(&self, distance: &Distance) -> Result<(), LossError> {
        if !distance.is_normalized_lp(2.0, Some(1.0)) {
            return Err(LossError::Config(format!(
                "distance_weighted miner needs Euclidean distance (p = 2, power = 1) on normalised embeddings, got {distance:?}"
            )));
        }
        if self.dim.is_some_and(|d| d < 2) {
            return Err(LossError::Config(
                "distance_weighted miner: dim must be at least 2".into(),
            ));
        }
        if !(self.cutoff > 0.0 && self.cutoff < self.nonzero_loss_cutoff) {
            return Err(LossError::Config(format!(
                "distance_weighted miner needs 0 < cutoff < nonzero_loss_cutoff, got {} and {}",
                self.cutoff, self.nonzero_loss_cutoff
            )));
        }
        Ok(())
    }

    /// Samples, for every anchor, as many triplets as its class has members: a random
    /// positive and a negative drawn with probability proportional to
    /// `q(d)^-1 = d^(2-n) (1 - d^2/4)^((3-n)/2)` (Wu et al. Sec. 4, with n the embedding
    /// dimension), `d` clamped below at `cutoff`, restricted to `d < nonzero_loss_cutoff`.
    ///
    /// The log-weights are shifted by each row's maximum (PML shifts by the global one,
    /// which gives the same distribution but underflows sooner); computing them in `f64`
    /// keeps distant negatives at a tiny but non-zero probability.
    pub(super) fn mine(&self, input: &MineInput<'_>) -> Tuples {
        let mat = input.matrix;
        let labels = input.labels;
        let n = labels.len();
        let d = self.dim.unwrap_or(input.dim) as f64;
        let mut weights = vec![0.0f64; n * n];
        for a in 0..n {
            let row = &mut weights[a * n..(a + 1) * n];
            let mut max = f64::NEG_INFINITY;
            for (j, w) in row.iter_mut().enumerate() {
                let dist = mat.at(a, j);
                if labels[j] == labels[a] || dist.is_nan() || dist >= self.nonzero_loss_cutoff {
                    *w = f64::NEG_INFINITY;
                    continue;
                }
                let x = dist.max(self.cutoff);
                let lw = (2.0 - d) * x.ln() - ((d - 3.0) / 2.0) * (1.0 - 0.25 * x * x).ln();
                *w = if lw.is_finite() { lw } else { f64::NEG_INFINITY };
                max = max.max(*w);
            }
            for w in row.iter_mut() {
                *w = if max.is_finite() && w.is_finite() {
                    (*w - max).exp()
                } else {
                    0.0
                };
            }
        }
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(input.seed);
        Tuples::Triplets(Triplets::random(labels, None, Some(&weights), &mut rng))
    }
}
