//! Reducers: per-element losses → one scalar (PML `reducers`).

use burn::tensor::Tensor;
use dml_backend::read_f64s;
use serde::{Deserialize, Serialize};

use crate::error::LossError;
use crate::ops::bool2;

/// How a loss's per-element values (per pair, triplet, anchor or proxy) become a scalar.
///
/// A loss made of several sub-losses (e.g. contrastive `pos_loss` + `neg_loss`) reduces
/// each one separately and adds the results, as PML's `MultipleReducers` does. An empty
/// sub-loss (no valid tuple) reduces to zero, never NaN.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Reducer {
    /// The mean over all elements (PML `MeanReducer`).
    Mean,
    /// The sum (PML `SumReducer`).
    Sum,
    /// The mean over the strictly positive elements (PML `AvgNonZeroReducer`).
    AvgNonZero,
    /// The mean over the elements in the open interval `(low, high)`, either bound
    /// optional (PML `ThresholdReducer`).
    Threshold {
        /// Keep elements strictly above this.
        #[serde(default)]
        low: Option<f64>,
        /// Keep elements strictly below this.
        #[serde(default)]
        high: Option<f64>,
    },
    /// The sum divided by a divisor that the loss computes (PML `DivisorReducer`: the
    /// margin loss divides by the number of active pairs, proxy-anchor by the number of
    /// proxies). A loss without its own divisor uses 1.
    Divisor,
}

/// One sub-loss before reduction.
pub(crate) struct SubLoss {
    /// Per-element values `[K]` (K may be 0), or a single already-reduced value `[1]`.
    pub losses: Option<Tensor<1>>,
    /// Whether `losses` is already a scalar that every reducer passes through.
    pub already_reduced: bool,
    /// The loss's own divisor for [`Reducer::Divisor`].
    pub divisor: Option<f64>,
}

impl SubLoss {
    /// Per-element values.
    pub fn elements(losses: Tensor<1>) -> Self {
        Self {
            losses: Some(losses),
            already_reduced: false,
            divisor: None,
        }
    }

    /// A value that needs no reduction.
    pub fn reduced(loss: Tensor<1>) -> Self {
        Self {
            losses: Some(loss),
            already_reduced: true,
            divisor: None,
        }
    }

    /// Nothing to reduce (PML's `zero_loss`).
    pub fn zero() -> Self {
        Self {
            losses: None,
            already_reduced: true,
            divisor: None,
        }
    }
}

impl Reducer {
    /// Checks the parameters.
    pub fn validate(&self) -> Result<(), LossError> {
        if let Reducer::Threshold { low, high } = self {
            if low.is_none() && high.is_none() {
                return Err(LossError::Config("threshold reducer needs `low` or `high`".into()));
            }
            if let (Some(l), Some(h)) = (low, high)
                && l >= h
            {
                return Err(LossError::Config(format!(
                    "threshold reducer needs low < high, got {l} >= {h}"
                )));
            }
        }
        Ok(())
    }

    /// Reduces one sub-loss to a `[1]` tensor; `zero` is the graph-connected zero.
    pub(crate) fn reduce(&self, sub: SubLoss, zero: &Tensor<1>) -> Tensor<1> {
        let Some(losses) = sub.losses else { return zero.clone() };
        if sub.already_reduced {
            return losses.sum();
        }
        let k = losses.dims()[0];
        if k == 0 {
            return zero.clone();
        }
        match self {
            Reducer::Mean => losses.mean(),
            Reducer::Sum => losses.sum(),
            Reducer::Divisor => {
                let d = sub.divisor.unwrap_or(1.0);
                if d == 0.0 { zero.clone() } else { losses.sum() / d }
            }
            Reducer::AvgNonZero => threshold(losses, Some(0.0), None, zero),
            Reducer::Threshold { low, high } => threshold(losses, *low, *high, zero),
        }
    }

    /// Reduces every sub-loss and adds them up (PML `MultipleReducers.sub_loss_reduction`).
    pub(crate) fn reduce_all(&self, subs: Vec<SubLoss>, zero: &Tensor<1>) -> Tensor<1> {
        let mut total: Option<Tensor<1>> = None;
        for sub in subs {
            let r = self.reduce(sub, zero);
            total = Some(match total {
                None => r,
                Some(t) => t + r,
            });
        }
        total.unwrap_or_else(|| zero.clone())
    }
}

/// The mean of the elements in `(low, high)`; zero when none qualifies.
fn threshold(losses: Tensor<1>, low: Option<f64>, high: Option<f64>, zero: &Tensor<1>) -> Tensor<1> {
    let values = read_f64s(losses.clone());
    let keep: Vec<bool> = values
        .iter()
        .map(|&v| low.is_none_or(|l| v > l) && high.is_none_or(|h| v < h))
        .collect();
    let count = keep.iter().filter(|&&k| k).count();
    if count == 0 {
        return zero.clone();
    }
    if count == values.len() {
        return losses.sum() / count as f64;
    }
    let device = losses.device();
    let n = values.len();
    let drop = bool2(keep.iter().map(|&k| !k).collect(), [1, n], &device);
    losses.reshape([1, n]).mask_fill(drop, 0.0).sum() / count as f64
}
