//! Entropic optimal transport and DIML's structural matching (Zhao et al., "Towards Interpretable
//! Deep Metric Learning with Structural Matching", ICCV 2021).
//!
//! * [`SinkhornConfig`] → [`Sinkhorn`]: batched log-domain Sinkhorn on `[B, n, m]` costs with per-item
//!   marginals, returning plans and per-item [`Convergence`]. Gradients flow by unrolling the
//!   iterations, by implicit differentiation of the converged plan, or not at all
//!   ([`PlanGradient`]). Unrolled solves run on the host with a hand-written adjoint as one autodiff
//!   node, or as tensor operations on the device ([`SinkhornEngine`]). [`Sinkhorn::solve_host`] solves on the host in `f64` (rayon) where no
//!   gradient is needed.
//! * [`Marginals`]: uniform (DIML Eq. 7) or cross-correlation (Eq. 8–9) weights of the locations.
//! * [`StructuralConfig`] → [`Structural`]: structural similarity and distance (Eq. 5–6) of a batch
//!   of pairs ([`Structural::forward`]), of every pair of a batch for training
//!   ([`Structural::similarity_matrix`], Appendix A.3), of features against spatial proxies
//!   ([`Structural::cross_similarity`], Eq. 21), and the explanation of one pair
//!   ([`Structural::decompose`], Figure 5).
//! * [`GridPoolConfig`] → [`GridPool`]: reduction of a `[B, C, H, W]` map to `G × G` (Sec. 3.4), and
//!   [`to_locations`] to the `[B, G·G, C]` layout the rest takes.
//! * [`StructuralRerankerConfig`] → [`StructuralReranker`]: multi-scale matching (Sec. 3.3) that
//!   re-scores a query's nearest neighbours ([`StructuralReranker::rerank`]).
//!
//! Every configuration is a `dml_config::config!` struct: plain serde data whose defaults (DIML's
//! settings) are written once, beside their fields.
//!
//! # Modules
//!
//! The modules import one another along a DAG (`a → b` reads "`a` imports `b`"), so that no module
//! depends on itself through another and each layer can be read and tested on its own:
//!
//! * Leaves: `error`, `types` (the shared types and solver settings), `marginals`; `pool` → `error`.
//! * Solvers: `host` → `error`, `types`; `unrolled` → `host`, `types`; `implicit` → `host`;
//!   `adjoint` → `unrolled`, `host`, `types`.
//! * Front: `sinkhorn` → the four solvers, `error`, `types`.
//! * Users: `structural` → `sinkhorn`, `marginals`, `error`, `types`; `decompose` and `rerank` →
//!   `structural`, `host`, `marginals`, `error`, `types`.
#![warn(missing_docs)]

mod adjoint;
mod decompose;
mod error;
mod host;
mod implicit;
mod marginals;
mod pool;
mod rerank;
mod sinkhorn;
mod structural;
mod types;
mod unrolled;

pub use decompose::{Decomposition, FlowPair};
pub use error::OtError;
pub use host::HostSolution;
pub use marginals::{Marginals, cross_correlation_marginals, l2_normalize, uniform_marginals};
pub use pool::{GridPool, GridPoolConfig, GridReduction, to_locations};
pub use rerank::{FeatureBank, StructuralReranker, StructuralRerankerConfig};
pub use sinkhorn::{Sinkhorn, SinkhornConfig, SinkhornOutput};
pub use structural::{PairwiseStructural, Structural, StructuralConfig, StructuralOutput, unit_euclidean_distance};
pub use types::{Convergence, PlanGradient, SinkhornEngine};
