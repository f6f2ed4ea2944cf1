//! Histogram loss (Ustinova & Lempitsky 2016, Eq. 2-4; PML `HistogramLoss`): the
//! probability that a random negative pair is more similar than a random positive pair,
//! estimated with linearly interpolated histograms of the similarities on `[-1, 1]`.

use burn::tensor::Tensor;
use dml_backend::{float_tensor, read_f64s};

use super::kinds::{Batch, Computed, Context, PairInput, on_pairs};
use super::{LossModule, LossOutput, RegisteredLoss};
use crate::distance::Distance;
use crate::error::LossError;
use crate::ops::gather_pairs;
use crate::reducer::{Reducer, SubLoss};
use crate::tuples::Triplets;

dml_config::config! {
    /// Configuration of the histogram loss.
    #[derive(Clone, Debug, PartialEq)]
    pub struct HistogramLossConfig {
        /// Number of bins; `delta = 2 / n_bins` (PML's 100 when neither is given).
        pub n_bins: Option<usize> = None,
        /// Bin width Δ (must equal `2 / n_bins` when both are given).
        pub delta: Option<f64> = None,
        /// Distance override (else cosine similarity).
        pub distance: Option<Distance> = None,
        /// Reducer override (the loss is already a scalar).
        pub reducer: Option<Reducer> = None,
    }
}

/// The histogram loss on its own.
pub type HistogramLoss = LossModule<HistogramLossConfig>;

impl RegisteredLoss for HistogramLossConfig {
    const NAME: &'static str = "histogram";
    const DEFAULT_DISTANCE: Distance = Distance::cosine();
    const DEFAULT_REDUCER: Reducer = Reducer::Mean;
    const PAIR_BASED: bool = true;

    fn distance(&self) -> Option<&Distance> {
        self.distance.as_ref()
    }

    fn reducer(&self) -> Option<&Reducer> {
        self.reducer.as_ref()
    }

    fn validate(&self, _distance: &Distance) -> Result<(), LossError> {
        self.delta().map(|_| ())
    }

    fn evaluate(&self, ctx: &Context<'_>, batch: Batch<'_>) -> Result<LossOutput, LossError> {
        on_pairs(self, ctx, batch, Self::compute)
    }
}

impl HistogramLossConfig {
    /// The bin width.
    fn delta(&self) -> Result<f64, LossError> {
        let delta = match (self.n_bins, self.delta) {
            (Some(b), Some(d)) if (d - 2.0 / b as f64).abs() > 1e-12 => {
                return Err(LossError::Config(format!(
                    "histogram: delta ({d}) must equal 2 / n_bins ({b})"
                )));
            }
            (_, Some(d)) => d,
            (Some(b), None) => 2.0 / b as f64,
            (None, None) => 0.02,
        };
        if !(delta > 0.0 && delta <= 2.0) {
            return Err(LossError::Config(format!(
                "histogram: delta must be in (0, 2], got {delta}"
            )));
        }
        Ok(delta)
    }

    fn compute(&self, input: &PairInput<'_>) -> Result<Computed, LossError> {
        let delta = self.delta()?;
        let t = input
            .tuples
            .map_or_else(|| Triplets::all(input.labels), |t| t.to_triplets());
        if t.is_empty() {
            return Ok(Computed::empty(1));
        }
        let (pr, pc) = unique_pairs(&t.a, &t.p);
        let (nr, nc) = unique_pairs(&t.a, &t.n);
        let p_pos = density(gather_pairs(&input.mat, &pr, &pc), delta);
        let p_neg = density(gather_pairs(&input.mat, &nr, &nc), delta);
        let phi = p_pos.cumsum(0);
        let loss = (p_neg * phi).sum();
        Ok(Computed {
            subs: vec![SubLoss::reduced(loss)],
            tuples: t.len(),
        })
    }
}

/// Unordered pairs `(min, max)` without repetition, sorted (PML `filter_pairs`).
fn unique_pairs(x: &[usize], y: &[usize]) -> (Vec<usize>, Vec<usize>) {
    let mut v: Vec<(usize, usize)> = x.iter().zip(y).map(|(&a, &b)| (a.min(b), a.max(b))).collect();
    v.sort_unstable();
    v.dedup();
    v.into_iter().unzip()
}

/// The interpolated histogram `[bins + 1]` of values in `[-1, 1]`, normalised by the count:
/// each value splits its unit mass between the nodes `r` and `r + 1` around it (PML
/// `compute_density`). The node assignment is a host-side one-hot matrix, so the density
/// is one matrix product that is linear in the values.
fn density(values: Tensor<1>, delta: f64) -> Tensor<2> {
    let m = values.dims()[0];
    let nodes = (1.0 + 2.0 / delta).round() as usize;
    let v = read_f64s(values.clone());
    let r: Vec<usize> = v
        .iter()
        .map(|&x| (((x + 1.0) / delta).floor().max(0.0) as usize).min(nodes - 2))
        .collect();
    let mut upper = vec![0.0f64; nodes * m];
    let mut lower = vec![0.0f64; nodes * m];
    for (i, &ri) in r.iter().enumerate() {
        upper[(ri + 1) * m + i] = 1.0;
        lower[ri * m + i] = 1.0;
    }
    let device = values.device();
    let dtype = values.dtype();
    let r_t = float_tensor(r.iter().map(|&ri| ri as f64 * delta).collect(), [m, 1], &device, dtype);
    let x = values.reshape([m, 1]);
    // (x + 1 - r Δ) / Δ goes to node r + 1 and ((r + 1) Δ - 1 - x) / Δ to node r.
    let to_upper = (x.clone() + 1.0 - r_t.clone()) / delta;
    let to_lower = (r_t + (delta - 1.0) - x) / delta;
    let up = float_tensor(upper, [nodes, m], &device, dtype);
    let lo = float_tensor(lower, [nodes, m], &device, dtype);
    (up.matmul(to_upper) + lo.matmul(to_lower)) / m as f64
}
