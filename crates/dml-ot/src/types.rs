//! The plain types every solver of the crate shares: the gradient and engine choices, per-item
//! convergence, the solver settings and the log-marginal of a zero-mass entry.
//!
//! This module imports nothing else from the crate, so that the host, unrolled, implicit and
//! adjoint solvers and the public front (`Sinkhorn`) can all depend on it without
//! depending on one another in a circle.

use serde::{Deserialize, Serialize};

/// The log-marginal given to a zero-mass entry. `exp(-1000)` is exactly zero in `f32` and `f64`, so the
/// entry's row or column of the plan comes out as exact zeros, while every intermediate stays finite (a
/// true `log(0) = -inf` would turn `-inf + inf` into NaN in the first update).
pub(crate) const LOG_ZERO: f64 = -1000.0;

/// How gradients flow from the plan `T*` `[B, n, m]` of DIML Eq. 14 back to the cost `[B, n, m]` and
/// the marginals `[B, n]`, `[B, m]`.
///
/// Serialised by variant name (`"Unrolled"`, `"Implicit"`, `"Detached"`), as Burn's `Config` derive
/// wrote it before, so that stored settings still read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PlanGradient {
    /// Autodiff records every Sinkhorn iteration on the tensors, so the gradient is that of the truncated
    /// solver actually run (what PyTorch code gets by back-propagating through the loop).
    Unrolled,
    /// The plan is solved on the host (in `f64`, to the tolerance) from detached inputs and re-attached
    /// to the graph by the implicit-function theorem: the gradient is that of the *converged* entropic
    /// plan, computed with a handful of tensor operations instead of one per iteration.
    Implicit,
    /// The plan is a constant (no gradient), as DIML's training losses use it (`torch.no_grad()`):
    /// gradients then reach the features only through the similarity weighed by the plan.
    Detached,
}

/// Where the iterations of [`PlanGradient::Unrolled`] and [`PlanGradient::Detached`] run on a batch
/// of `[B, n, m]` costs (the log-domain iteration of DIML Eq. 12–14).
///
/// Serialised by variant name (`"Host"`, `"Tensor"`), as Burn's `Config` derive wrote it before.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SinkhornEngine {
    /// On the host, in `f64` with rayon over the items, recording a tape whose hand-written adjoint is
    /// the backward pass of a single autodiff node (exactly the gradient of the `T` log-domain
    /// iterations). The inputs are read back once and the plan uploaded once, so on a GPU device this
    /// costs two transfers of `[B, n, m]` values. The fastest choice on the CPU. Zero-mass rows and
    /// columns are removed before iterating, so they do not weigh in even on the first column step
    /// (where the tensor loop still counts them at potential 0); both engines converge to the same plan.
    Host,
    /// As tensor operations on the device, with one autodiff node per operation (the loop a PyTorch
    /// implementation back-propagates through); `absorb_every` selects its log-domain or stabilised form.
    Tensor,
}

/// Whether and how one batch item's `[n, m]` plan converged to the marginals of DIML Eq. 13.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Convergence {
    /// Iterations the item needed to reach the tolerance, or the iterations run when it never did.
    pub iterations: usize,
    /// `max(|T 1 - a|∞, |Tᵀ 1 - b|∞)` of the returned plan.
    pub marginal_error: f64,
    /// Whether `marginal_error <= tolerance` (always `false` with tolerance 0 unless the error is 0).
    pub converged: bool,
}

/// The settings the host solver (`crate::host`) needs, copied out of a validated
/// `Sinkhorn` so that the solver does not depend on the module that fronts it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Params {
    /// Entropic regularisation `eps` (DIML's `λ`).
    pub eps: f64,
    /// Iteration cap.
    pub max_iters: usize,
    /// Stopping tolerance on the marginal error.
    pub tolerance: f64,
}

/// The settings of one unrolled solve (`crate::unrolled`): those of [`Params`] plus how often the
/// tolerance is tested.
#[derive(Debug, Clone, Copy)]
pub(crate) struct UnrolledParams {
    /// Entropic regularisation `eps` (DIML's `λ`).
    pub eps: f64,
    /// Iteration cap.
    pub max_iters: usize,
    /// Stopping tolerance on the marginal error; 0 runs exactly `max_iters` iterations.
    pub tolerance: f64,
    /// Iterations between tolerance tests.
    pub check_every: usize,
}
