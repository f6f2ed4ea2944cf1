//! What the four GML losses of PPGML (Kim & Song 2022, Eq. 9, 10, App. I) share: the geodesic
//! factor of the batch, computed on the host from the loss's own detached `[N, N]` matrix
//! (see `crate::geodesic`), and the eigenvalue term `-ε2 Σ λ_i` that each subtracts.
//!
//! The factor is a constant of the step (a stop-gradient): its computation goes through a
//! k-NN graph, shortest paths, a discrete choice of dimension and a random sample, none of
//! which has a useful derivative, and the paper's own gradient analysis (Eq. 12–13) drops the
//! `∂ϕ_s` terms. So `ϕ_s` scales the baseline's terms and `ε2 Σλ` shifts the value, with no
//! gradient of its own.

use dml_backend::read_f64s;

use super::LossOutput;
use super::kinds::{Batch, BatchData, Context, check_host_values};
use crate::error::LossError;
use crate::geodesic::{GeodesicFactor, GeodesicFactorConfig, euclidean_from_matrix, geodesic_factor};

/// The geodesic factor of `batch`: the configured fixed factor, else the factor of the
/// Euclidean distances derived from the loss's matrix (its distance of the detached embeddings,
/// or the given matrix) with the batch's seed.
pub(crate) fn batch_factor(
    config: &GeodesicFactorConfig,
    ctx: &Context<'_>,
    batch: &Batch<'_>,
) -> Result<GeodesicFactor, LossError> {
    if let Some(phi) = config.fixed_phi_s {
        return Ok(GeodesicFactor::fixed(phi, config.fixed_eigenvalues.clone()));
    }
    let n = batch.labels.len();
    let (values, sim) = match &batch.data {
        BatchData::Embeddings(x) => (
            read_f64s(ctx.distance.self_matrix(x.clone().detach())),
            ctx.distance.is_similarity(),
        ),
        BatchData::Matrix { matrix, is_similarity } => (read_f64s(matrix.clone().detach()), *is_similarity),
    };
    check_host_values(&values, n, "distance matrix")?;
    let dist = euclidean_from_matrix(&values, n, sim, ctx.distance.power())?;
    geodesic_factor(config, &dist, batch.labels, batch.seed)
}

/// `out` minus `ε2 Σλ` (the last term of Eq. 9, 10, I.1, I.2); the term is a constant, so the
/// gradient is the baseline's. Nothing is subtracted when the term is 0, so that `ε2 = 0`
/// leaves the baseline's value untouched bit for bit.
pub(crate) fn subtract_eigenvalues(out: LossOutput, eps2: f64, factor: &GeodesicFactor) -> LossOutput {
    let term = eps2 * factor.eigenvalue_sum();
    if term == 0.0 {
        return out;
    }
    LossOutput {
        loss: out.loss.sub_scalar(term),
        tuples: out.tuples,
    }
}

/// Checks `ε2` and the factor's configuration of the GML loss `loss`.
pub(crate) fn validate(loss: &str, eps2: f64, factor: &GeodesicFactorConfig) -> Result<(), LossError> {
    if !(eps2 >= 0.0 && eps2.is_finite()) {
        return Err(LossError::Config(format!(
            "{loss}: eps2 must be finite and ≥ 0, got {eps2}"
        )));
    }
    factor.validate(loss)
}
