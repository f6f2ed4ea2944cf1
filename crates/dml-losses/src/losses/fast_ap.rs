//! FastAP (Cakir et al. 2019, Eq. 9-11; PML `FastAPLoss`): average precision approximated
//! with soft (triangular) histogram binning of the distances, `1 - FastAP` per anchor.

use burn::tensor::Tensor;
use burn::tensor::activation::relu;
use dml_backend::{float_tensor, read_f64s};

use super::kinds::{Batch, Computed, Context, PairInput, on_pairs, require_distance};
use super::{LossModule, LossOutput, RegisteredLoss};
use crate::distance::Distance;
use crate::error::LossError;
use crate::ops::{bool2, float1, index1};
use crate::reducer::{Reducer, SubLoss};
use crate::tuples::miner_weights;

dml_config::config! {
    /// Configuration of FastAP (Lp distance with p = 2 on normalised embeddings).
    #[derive(Clone, Debug, PartialEq)]
    pub struct FastApLossConfig {
        /// Number of histogram bins (PML's default).
        pub num_bins: usize = 10,
        /// Distance override (else squared Euclidean; the histogram spans `[0, 2^power]`).
        pub distance: Option<Distance> = None,
        /// Reducer override (else the mean over anchors with a positive).
        pub reducer: Option<Reducer> = None,
    }
}

/// The FastAP loss on its own.
pub type FastApLoss = LossModule<FastApLossConfig>;

impl RegisteredLoss for FastApLossConfig {
    const NAME: &'static str = "fast_ap";
    const DEFAULT_DISTANCE: Distance = Distance::squared_euclidean();
    const DEFAULT_REDUCER: Reducer = Reducer::Mean;
    const PAIR_BASED: bool = true;

    fn distance(&self) -> Option<&Distance> {
        self.distance.as_ref()
    }

    fn reducer(&self) -> Option<&Reducer> {
        self.reducer.as_ref()
    }

    fn validate(&self, distance: &Distance) -> Result<(), LossError> {
        require_distance(
            Self::NAME,
            distance.is_normalized_lp(2.0, None),
            "Lp (p = 2) on normalised embeddings",
            distance,
        )?;
        if self.num_bins == 0 {
            return Err(LossError::Config("fast_ap: num_bins must be positive".into()));
        }
        Ok(())
    }

    fn evaluate(&self, ctx: &Context<'_>, batch: Batch<'_>) -> Result<LossOutput, LossError> {
        on_pairs(self, ctx, batch, Self::compute)
    }
}

impl FastApLossConfig {
    /// Positives and negatives are always all pairs of the batch; mined tuples only weight
    /// the anchors (PML `convert_to_weights`).
    fn compute(&self, input: &PairInput<'_>) -> Result<Computed, LossError> {
        let labels = input.labels;
        let n = labels.len();
        let mut i_pos = vec![0.0f64; n * n];
        let mut i_neg = vec![0.0f64; n * n];
        for a in 0..n {
            for j in 0..n {
                if labels[a] == labels[j] {
                    if a != j {
                        i_pos[a * n + j] = 1.0;
                    }
                } else {
                    i_neg[a * n + j] = 1.0;
                }
            }
        }
        let n_pos: Vec<f64> = (0..n).map(|a| i_pos[a * n..(a + 1) * n].iter().sum()).collect();
        let safe_n: Vec<usize> = (0..n).filter(|&a| n_pos[a] > 0.0).collect();
        if safe_n.is_empty() {
            return Ok(Computed::empty(1));
        }
        let device = input.mat.device();
        let dtype = input.mat.dtype();
        let edges = self.num_bins + 1;
        let hist_max = 2f64.powf(input.power);
        let delta = hist_max / self.num_bins as f64;
        let mids: Vec<f64> = (0..edges).map(|l| hist_max * l as f64 / self.num_bins as f64).collect();
        let mids = float1(mids, &device, dtype).reshape([edges, 1, 1]);
        // pulse[l, i, j] = [1 - |d_ij - mid_l| / Δ]_+ : the triangular bin memberships.
        let pulse = relu((input.mat.clone().unsqueeze_dim::<3>(0) - mids).abs().neg() / delta + 1.0);
        let ipos = float_tensor(i_pos, [n, n], &device, dtype).unsqueeze_dim::<3>(0);
        let ineg = float_tensor(i_neg, [n, n], &device, dtype).unsqueeze_dim::<3>(0);
        let pos_hist: Tensor<2> = (pulse.clone() * ipos).sum_dim(2).reshape([edges, n]).transpose();
        let neg_hist: Tensor<2> = (pulse * ineg).sum_dim(2).reshape([edges, n]).transpose();
        let total_pos = pos_hist.clone().cumsum(1);
        let total = (pos_hist.clone() + neg_hist).cumsum(1);
        let h_pos_product = pos_hist * total_pos;
        let hp = read_f64s(h_pos_product.clone());
        let th = read_f64s(total.clone());
        let unsafe_h: Vec<bool> = hp.iter().zip(&th).map(|(&h, &t)| !(h > 0.0 && t > 0.0)).collect();
        let unsafe_mask = bool2(unsafe_h, [n, edges], &device);
        // Unsafe bins divide by 1 and are zeroed: no 0/0 in the value or the gradient.
        let ratio = (h_pos_product / total.mask_fill(unsafe_mask.clone(), 1.0)).mask_fill(unsafe_mask, 0.0);
        let fast_ap = ratio.sum_dim(1).reshape([n]).select(0, index1(&safe_n, &device));
        let npos = float1(safe_n.iter().map(|&a| n_pos[a]).collect(), &device, dtype);
        let w_all = miner_weights(input.tuples, n, false);
        let w = float1(safe_n.iter().map(|&a| w_all[a]).collect(), &device, dtype);
        let losses = (fast_ap / npos).neg().add_scalar(1.0) * w;
        Ok(Computed {
            subs: vec![SubLoss::elements(losses)],
            tuples: safe_n.len(),
        })
    }
}
