//! Margin loss (Wu et al. 2017, "Sampling matters in deep embedding learning", Eq. 4-5;
//! PML `MarginLoss`):
//! `[d_ap - β + α]_+ + [β - d_an + α]_+` per triplet, divided by the number of non-zero
//! terms, plus the regulariser `ν β` when β is learned.

use burn::module::Param;
use burn::tensor::{DType, Device, Tensor, TensorData};
use dml_backend::read_f64s;

use super::kinds::{Batch, Context, HostInput, on_host};
use super::state::{LossState, Slot, require_classes};
use super::triplet_margin::{TripletsPerAnchor, resolve_triplets};
use super::{LossModule, LossOutput, RegisteredLoss};
use crate::distance::Distance;
use crate::error::LossError;
use crate::host_grad::{HostLoss, reducer_weights};
use crate::reducer::Reducer;

dml_config::config! {
    /// Configuration of the margin loss.
    #[derive(Clone, Debug, PartialEq)]
    pub struct MarginLossConfig {
        /// The margin α (PML's default).
        pub margin: f64 = 0.2,
        /// The weight ν of the β regulariser.
        pub nu: f64 = 0.0,
        /// The (initial) boundary β.
        pub beta: f64 = 1.2,
        /// Learn β; it then lives in the loss module's parameters.
        pub learn_beta: bool = false,
        /// One β per class instead of a single one (PML `num_classes` given).
        pub per_class_beta: bool = false,
        /// Triplets per anchor without a miner.
        pub triplets_per_anchor: TripletsPerAnchor = TripletsPerAnchor::All,
        /// Distance override (else Euclidean on normalised embeddings).
        pub distance: Option<Distance> = None,
        /// Reducer override (else: divide by the number of non-zero terms).
        pub reducer: Option<Reducer> = None,
    }
}

/// The margin loss on its own; a learned β is its only parameter.
pub type MarginLoss = LossModule<MarginLossConfig>;

impl RegisteredLoss for MarginLossConfig {
    const NAME: &'static str = "margin";
    const DEFAULT_DISTANCE: Distance = Distance::euclidean();
    const DEFAULT_REDUCER: Reducer = Reducer::Divisor;
    const PAIR_BASED: bool = true;
    const HOST_EVALUATED: bool = true;
    const PARAMETERS: &'static [(Slot, &'static str)] = &[(Slot::Beta, "beta")];

    fn distance(&self) -> Option<&Distance> {
        self.distance.as_ref()
    }

    fn reducer(&self) -> Option<&Reducer> {
        self.reducer.as_ref()
    }

    fn validate(&self, _distance: &Distance) -> Result<(), LossError> {
        if !(self.margin.is_finite() && self.beta.is_finite() && self.nu.is_finite() && self.nu >= 0.0) {
            return Err(LossError::Config(format!(
                "margin: margin and beta must be finite and nu >= 0, got margin {}, beta {}, nu {}",
                self.margin, self.beta, self.nu
            )));
        }
        Ok(())
    }

    /// Only a per-class β is indexed by the labels.
    fn labels_index_classes(&self) -> bool {
        self.per_class_beta
    }

    fn init_state(&self, num_classes: usize, dim: usize, device: &Device) -> Result<LossState, LossError> {
        if self.per_class_beta {
            require_classes(Self::NAME, "per-class beta", num_classes, dim)?;
        }
        if !self.learn_beta {
            return Ok(LossState::default());
        }
        let len = if self.per_class_beta { num_classes } else { 1 };
        let t = Tensor::<1>::from_data(TensorData::new(vec![self.beta as f32; len], [len]), device);
        Ok(LossState {
            beta: Some(Param::from_tensor(t)),
            ..LossState::default()
        })
    }

    fn evaluate(&self, ctx: &Context<'_>, batch: Batch<'_>) -> Result<LossOutput, LossError> {
        let beta = self.beta_values(ctx, batch.data.dtype());
        on_host(self, ctx, batch, |c, input| c.host(input, &beta))
    }
}

impl MarginLossConfig {
    /// The current β values: the learned ones (in the inputs' float type), else the fixed one.
    fn beta_values(&self, ctx: &Context<'_>, dtype: DType) -> Vec<f64> {
        match ctx.beta() {
            Some(b) => read_f64s(b.cast(dtype)),
            None => vec![self.beta],
        }
    }

    /// The loss and its gradients with respect to the matrix and to β (`beta` holds the
    /// current β values: one shared value, or one per class).
    fn host(&self, input: &HostInput<'_>, beta: &[f64]) -> (HostLoss, Vec<f64>) {
        let n = input.mat.n;
        let m = &input.mat.values;
        let sim = input.mat.is_similarity;
        let mut grad = vec![0.0; n * n];
        let mut grad_beta = vec![0.0; beta.len()];
        let t = resolve_triplets(input.tuples, input.labels, self.triplets_per_anchor, input.seed);
        if t.is_empty() {
            return (
                HostLoss {
                    value: 0.0,
                    grad,
                    tuples: 0,
                },
                grad_beta,
            );
        }
        let k = t.len();
        let class_of = |i: usize| {
            if beta.len() > 1 {
                input.labels[t.a[i]] as usize
            } else {
                0
            }
        };
        // sign = +1 for a distance: pos = [d_ap - β + α]_+, neg = [β - d_an + α]_+.
        let sign = if sim { -1.0 } else { 1.0 };
        let mut pos = Vec::with_capacity(k);
        let mut neg = Vec::with_capacity(k);
        for i in 0..k {
            let b = beta[class_of(i)];
            pos.push((sign * (m[t.a[i] * n + t.p[i]] - b) + self.margin).max(0.0));
            neg.push((sign * (b - m[t.a[i] * n + t.n[i]]) + self.margin).max(0.0));
        }
        let divisor = (pos.iter().filter(|&&v| v > 0.0).count() + neg.iter().filter(|&&v| v > 0.0).count()) as f64;
        let losses: Vec<f64> = pos.iter().zip(&neg).map(|(p, q)| p + q).collect();
        let w = reducer_weights(input.reducer, &losses, Some(divisor));
        let mut value = 0.0;
        for i in 0..k {
            value += w[i] * losses[i];
            let c = class_of(i);
            if pos[i] > 0.0 {
                grad[t.a[i] * n + t.p[i]] += sign * w[i];
                grad_beta[c] -= sign * w[i];
            }
            if neg[i] > 0.0 {
                grad[t.a[i] * n + t.n[i]] -= sign * w[i];
                grad_beta[c] += sign * w[i];
            }
        }
        if self.learn_beta {
            if beta.len() == 1 {
                // PML's "already reduced" ν β.
                value += self.nu * beta[0];
                grad_beta[0] += self.nu;
            } else {
                let reg: Vec<f64> = (0..k).map(|i| self.nu * beta[class_of(i)]).collect();
                let wr = reducer_weights(input.reducer, &reg, Some(divisor));
                for i in 0..k {
                    value += wr[i] * reg[i];
                    grad_beta[class_of(i)] += wr[i] * self.nu;
                }
            }
        }
        (HostLoss { value, grad, tuples: k }, grad_beta)
    }
}
