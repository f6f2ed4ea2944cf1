//! Distances and similarities between embeddings (PML `distances`).

use burn::tensor::Tensor;
use serde::{Deserialize, Serialize};

use crate::error::LossError;
use crate::ops::{bool2, lp_normalize};

fn two() -> f64 {
    2.0
}
fn one() -> f64 {
    1.0
}
fn yes() -> bool {
    true
}

/// A distance or similarity between the rows of two embedding matrices, as configured in
/// TOML (`distance = { type = "lp", p = 2.0, power = 1.0, normalize_embeddings = true }`).
///
/// Every variant first L2-normalises the rows when `normalize_embeddings` is set, then
/// computes an `[N, M]` matrix and finally raises it to `power` (PML `BaseDistance.forward`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Distance {
    /// `||x_i - y_j||_p ^ power` (PML `LpDistance`, `torch.cdist`). A distance: smaller is
    /// more similar.
    Lp {
        /// The norm's order (default 2).
        #[serde(default = "two")]
        p: f64,
        /// Exponent applied to the matrix (default 1; FastAP and ProxyNCA use 2).
        #[serde(default = "one")]
        power: f64,
        /// L2-normalise the rows first (default true).
        #[serde(default = "yes")]
        normalize_embeddings: bool,
    },
    /// `cos(x_i, y_j) ^ power` (PML `CosineSimilarity`, always normalised). A similarity.
    Cosine {
        /// Exponent applied to the matrix (default 1).
        #[serde(default = "one")]
        power: f64,
    },
    /// `(x_i . y_j) ^ power` (PML `DotProductSimilarity`). A similarity.
    DotProduct {
        /// Exponent applied to the matrix (default 1).
        #[serde(default = "one")]
        power: f64,
        /// L2-normalise the rows first (default true, as in PML).
        #[serde(default = "yes")]
        normalize_embeddings: bool,
    },
    /// Signal-to-noise ratio `var(x_i - y_j) / var(x_i)` (Yuan et al. 2019, PML
    /// `SNRDistance`). A distance.
    Snr {
        /// Exponent applied to the matrix (default 1).
        #[serde(default = "one")]
        power: f64,
        /// L2-normalise the rows first (default true).
        #[serde(default = "yes")]
        normalize_embeddings: bool,
    },
}

impl Distance {
    /// Euclidean distance on normalised embeddings (PML's `LpDistance()` default).
    pub const fn euclidean() -> Self {
        Distance::Lp {
            p: 2.0,
            power: 1.0,
            normalize_embeddings: true,
        }
    }

    /// Squared Euclidean distance on normalised embeddings (`LpDistance(power=2)`).
    pub const fn squared_euclidean() -> Self {
        Distance::Lp {
            p: 2.0,
            power: 2.0,
            normalize_embeddings: true,
        }
    }

    /// Cosine similarity.
    pub const fn cosine() -> Self {
        Distance::Cosine { power: 1.0 }
    }

    /// Dot-product similarity of normalised embeddings (`DotProductSimilarity()`).
    pub const fn dot_product() -> Self {
        Distance::DotProduct {
            power: 1.0,
            normalize_embeddings: true,
        }
    }

    /// Signal-to-noise-ratio distance on normalised embeddings.
    pub const fn snr() -> Self {
        Distance::Snr {
            power: 1.0,
            normalize_embeddings: true,
        }
    }

    /// Whether larger values mean "more similar" (PML `is_inverted`).
    pub fn is_similarity(&self) -> bool {
        matches!(self, Distance::Cosine { .. } | Distance::DotProduct { .. })
    }

    /// The exponent applied to the matrix.
    pub fn power(&self) -> f64 {
        match self {
            Distance::Lp { power, .. }
            | Distance::Cosine { power }
            | Distance::DotProduct { power, .. }
            | Distance::Snr { power, .. } => *power,
        }
    }

    /// Whether the rows are normalised before the matrix is computed.
    pub fn normalizes(&self) -> bool {
        match self {
            Distance::Cosine { .. } => true,
            Distance::Lp {
                normalize_embeddings, ..
            }
            | Distance::DotProduct {
                normalize_embeddings, ..
            }
            | Distance::Snr {
                normalize_embeddings, ..
            } => *normalize_embeddings,
        }
    }

    /// The `p` used for normalisation (and, for `Lp`, for the norm).
    pub fn p(&self) -> f64 {
        match self {
            Distance::Lp { p, .. } => *p,
            _ => 2.0,
        }
    }

    /// Whether this is `Lp` with the given `p` and `power` on normalised embeddings (the
    /// distance that distance-weighted sampling and the angular loss are defined for).
    pub fn is_normalized_lp(&self, want_p: f64, want_power: Option<f64>) -> bool {
        matches!(self, Distance::Lp { p, power, normalize_embeddings: true }
            if *p == want_p && want_power.is_none_or(|w| w == *power))
    }

    /// Checks the parameters.
    pub fn validate(&self) -> Result<(), LossError> {
        let power = self.power();
        if !(power.is_finite() && power > 0.0) {
            return Err(LossError::Config(format!(
                "distance power must be positive, got {power}"
            )));
        }
        if let Distance::Lp { p, .. } = self
            && !(p.is_finite() && *p >= 1.0)
        {
            return Err(LossError::Config(format!("Lp distance needs p >= 1, got {p}")));
        }
        Ok(())
    }

    /// `margin(x, y)`: how far `x` is beyond `y` in the "less similar" direction, i.e.
    /// `x - y` for a distance and `y - x` for a similarity (PML `BaseDistance.margin`).
    pub fn margin_scalar(&self, x: f64, y: f64) -> f64 {
        if self.is_similarity() { y - x } else { x - y }
    }

    /// Normalises rows when configured (PML `maybe_normalize`).
    pub fn maybe_normalize(&self, x: Tensor<2>) -> Tensor<2> {
        if self.normalizes() {
            lp_normalize(x, self.p(), 1)
        } else {
            x
        }
    }

    /// The matrix `[N, N]` between the rows of `x` and themselves. The diagonal of a
    /// distance is exactly zero (with a zero gradient), as `torch.cdist` gives it.
    pub fn self_matrix(&self, x: Tensor<2>) -> Tensor<2> {
        let x = self.maybe_normalize(x);
        self.raw_matrix(x.clone(), x, true)
    }

    /// The matrix `[N, M]` between the rows of `query` `[N, D]` and `reference` `[M, D]`.
    pub fn matrix(&self, query: Tensor<2>, reference: Tensor<2>) -> Tensor<2> {
        let q = self.maybe_normalize(query);
        let r = self.maybe_normalize(reference);
        self.raw_matrix(q, r, false)
    }

    /// The matrix of already-normalised inputs.
    pub(crate) fn raw_matrix(&self, q: Tensor<2>, r: Tensor<2>, same: bool) -> Tensor<2> {
        let mat = match self {
            Distance::Cosine { .. } | Distance::DotProduct { .. } => q.matmul(r.transpose()),
            Distance::Lp { p, power, .. } => {
                let sq = if *p == 2.0 {
                    squared_euclidean(q, r)
                } else {
                    let n = q.dims()[0];
                    let m = r.dims()[0];
                    let diff = q.unsqueeze_dim::<3>(1) - r.unsqueeze_dim::<3>(0);
                    let s = diff.abs().clamp_min(1e-30).powf_scalar(*p).sum_dim(2).reshape([n, m]);
                    // Raising to 2/p gives the squared distance, handled like p = 2 below.
                    s.clamp_min(1e-30).powf_scalar(2.0 / p)
                };
                let d = if *power == 2.0 {
                    // The squared distance needs no square root: exact and cheaper.
                    sq
                } else {
                    let d = safe_sqrt(sq);
                    if *power == 1.0 { d } else { d.powf_scalar(*power) }
                };
                return if same { zero_diagonal(d) } else { d };
            }
            Distance::Snr { .. } => {
                // var(x - y) / var(x) with the (N-1) normalisations cancelling: centred rows
                // give ||xc_i - yc_j||^2 / ||xc_i||^2, which one matrix product computes.
                let qc = q.clone() - q.mean_dim(1);
                let rc = r.clone() - r.mean_dim(1);
                let denom = qc.clone().square().sum_dim(1).clamp_min(1e-30);
                let num = squared_euclidean(qc, rc);
                let num = if same { zero_diagonal(num) } else { num };
                num / denom
            }
        };
        let power = self.power();
        if power == 1.0 { mat } else { mat.powf_scalar(power) }
    }
}

/// `||q_i - r_j||^2` via `|q|^2 + |r|^2 - 2 q.r`, clamped at zero against round-off.
fn squared_euclidean(q: Tensor<2>, r: Tensor<2>) -> Tensor<2> {
    let qn = q.clone().square().sum_dim(1);
    let rn = r.clone().square().sum_dim(1).transpose();
    (qn + rn - q.matmul(r.transpose()) * 2.0).clamp_min(0.0)
}

/// Sets the diagonal of a square matrix to zero (self-distances).
fn zero_diagonal(m: Tensor<2>) -> Tensor<2> {
    let [n, k] = m.dims();
    if n != k {
        return m;
    }
    let eye: Vec<bool> = (0..n * n).map(|i| i / n == i % n).collect();
    let device = m.device();
    m.mask_fill(bool2(eye, [n, n], &device), 0.0)
}

/// `sqrt` whose gradient at (numerically) zero is zero instead of infinite: the argument
/// is clamped below at 1e-12, and the clamp passes no gradient for those entries. This is
/// what keeps duplicate embeddings (distance 0) from producing NaN gradients.
fn safe_sqrt(sq: Tensor<2>) -> Tensor<2> {
    sq.clamp_min(1e-12).sqrt()
}
