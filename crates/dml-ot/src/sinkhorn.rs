//! Batched, log-domain entropic optimal transport (Sinkhorn) on tensors, differentiable by
//! unrolling its iterations or by implicit differentiation of the converged plan.

use burn::module::Module;
use burn::tensor::{DType, Tensor};
use dml_backend::{float_tensor, read_f64s};

use crate::adjoint::unrolled_with_adjoint;
use crate::error::OtError;
use crate::host::{HostProblem, HostSolution, check_problem, solve_batch};
use crate::implicit::implicit_plan;
use crate::types::{Convergence, LOG_ZERO, Params, PlanGradient, SinkhornEngine, UnrolledParams};
use crate::unrolled::solve_unrolled;

dml_config::config! {
    /// Configuration of the batched Sinkhorn solver of
    /// `min_T <T, C> + eps * Σ T (log T - 1)` subject to `T 1 = a`, `Tᵀ 1 = b` (DIML Eq. 12–14, solved in
    /// the log domain as POT's `ot.bregman.sinkhorn_log`) on `[B, n, m]` costs.
    #[derive(Clone, Debug, PartialEq)]
    pub struct SinkhornConfig {
        /// Entropic regularisation `eps` (DIML's `λ`; the default is DIML's value).
        pub eps: f64 = 0.05,
        /// Iteration cap; one iteration updates the column and then the row potentials (the default is
        /// DIML's cap).
        pub max_iters: usize = 100,
        /// Stop once the largest absolute marginal error `max(|T 1 - a|∞, |Tᵀ 1 - b|∞)` of every item is
        /// at most this. `0` runs exactly `max_iters` iterations. DIML stops on a mean change of the
        /// scalings below 0.1 instead, which is much looser; the default is near the `f32` resolution of
        /// marginals that sum to 1.
        pub tolerance: f64 = 1e-6,
        /// How often (in iterations) the unrolled and detached solvers test the tolerance. On the tensor
        /// engine each check reads the marginal errors back from the device; on the host engine it costs
        /// one matrix-vector product per item. (The implicit path's host solver checks every iteration,
        /// where its error comes for free.)
        pub check_every: usize = 10,
        /// Iterations between absorptions of the scalings into the log-domain potentials in the tensor
        /// solver (Schmitzer's stabilised Sinkhorn). `1` iterates purely in the log domain (an `exp` over
        /// `[B, n, m]` per half-step); larger values run the iterations in between as matrix-vector
        /// products with the stabilised kernel, which is several times faster on the CPU, where `exp`
        /// dominates. Absorption also happens after iterations 1, 2, 4 and 8, while the potentials are
        /// still far from their optimum.
        pub absorb_every: usize = 10,
        /// How gradients reach the plan.
        pub gradient: PlanGradient = PlanGradient::Unrolled,
        /// Where unrolled and detached solves run (implicit solves always run on the host).
        pub engine: SinkhornEngine = SinkhornEngine::Host,
    }
}

impl SinkhornConfig {
    /// Validates the settings and builds the solver.
    ///
    /// # Errors
    /// [`OtError::Eps`] unless `eps` is finite and positive, [`OtError::ZeroIterations`] when
    /// `max_iters == 0`, [`OtError::Tolerance`] unless `tolerance` is finite and non-negative, and
    /// [`OtError::Zero`] naming `check_every` or `absorb_every` when it is zero.
    pub fn init(&self) -> Result<Sinkhorn, OtError> {
        if !(self.eps.is_finite() && self.eps > 0.0) {
            return Err(OtError::Eps(self.eps));
        }
        if self.max_iters == 0 {
            return Err(OtError::ZeroIterations);
        }
        if !(self.tolerance.is_finite() && self.tolerance >= 0.0) {
            return Err(OtError::Tolerance(self.tolerance));
        }
        if self.check_every == 0 {
            return Err(OtError::Zero { input: "check_every" });
        }
        if self.absorb_every == 0 {
            return Err(OtError::Zero { input: "absorb_every" });
        }
        Ok(Sinkhorn {
            eps: self.eps,
            max_iters: self.max_iters,
            tolerance: self.tolerance,
            check_every: self.check_every,
            absorb_every: self.absorb_every,
            gradient: self.gradient.clone(),
            engine: self.engine.clone(),
        })
    }
}

/// The plans of a batch and how each item converged.
#[derive(Debug, Clone)]
pub struct SinkhornOutput {
    /// Transport plans `[B, n, m]`; rows sum to `a`, columns to `b`.
    pub plan: Tensor<3>,
    /// One entry per batch item.
    pub convergence: Vec<Convergence>,
    /// Iterations run on the batch (the items are iterated together).
    pub iterations: usize,
}

impl SinkhornOutput {
    /// Whether every item reached the tolerance.
    pub fn all_converged(&self) -> bool {
        self.convergence.iter().all(|c| c.converged)
    }
}

/// The batched log-domain Sinkhorn solver built by [`SinkhornConfig::init`]. It has no parameters; it
/// is a module so that it nests in models like any other component.
#[derive(Module, Debug)]
pub struct Sinkhorn {
    /// Entropic regularisation.
    eps: f64,
    /// Iteration cap.
    max_iters: usize,
    /// Stopping tolerance on the marginal error.
    tolerance: f64,
    /// Iterations between tolerance checks of the tensor solver.
    check_every: usize,
    /// Iterations between absorptions in the tensor solver.
    absorb_every: usize,
    /// How gradients reach the plan.
    #[module(skip)]
    gradient: PlanGradient,
    /// Where the unrolled and detached iterations run.
    #[module(skip)]
    engine: SinkhornEngine,
}

impl Sinkhorn {
    /// The entropic regularisation `eps`.
    pub fn eps(&self) -> f64 {
        self.eps
    }

    /// The iteration cap.
    pub fn max_iters(&self) -> usize {
        self.max_iters
    }

    /// The stopping tolerance.
    pub fn tolerance(&self) -> f64 {
        self.tolerance
    }

    /// How gradients reach the plan.
    pub fn gradient(&self) -> &PlanGradient {
        &self.gradient
    }

    /// The settings of the host solver (`eps`, `max_iters`, `tolerance`).
    pub(crate) fn host_params(&self) -> Params {
        Params {
            eps: self.eps,
            max_iters: self.max_iters,
            tolerance: self.tolerance,
        }
    }

    /// Solves a batch of entropic OT problems (DIML Eq. 12–14) on the host in `f64`, items in parallel
    /// (rayon).
    ///
    /// * `cost`: `[batch, n, m]` row-major costs; `a`: `[batch, n]`; `b`: `[batch, m]`.
    ///
    /// Returns the `[batch, n, m]` plans. The settings (`eps`, `max_iters`, `tolerance`) are this
    /// solver's; the tolerance is tested every iteration. Gradient settings do not apply. Zero-mass
    /// entries give exact zero rows or columns.
    ///
    /// # Errors
    /// [`OtError::Length`] when an array does not match `[batch, n, m]`, [`OtError::Zero`] for a zero
    /// size, [`OtError::NotFinite`] for a non-finite cost, [`OtError::MarginalEntry`] for a negative or
    /// non-finite marginal entry, [`OtError::ZeroMass`] and [`OtError::MassMismatch`] (relative mass
    /// difference above 1e-4).
    pub fn solve_host(&self, cost: &[f64], a: &[f64], b: &[f64], dims: [usize; 3]) -> Result<HostSolution, OtError> {
        let problem = check_problem(cost, a, b, dims)?;
        Ok(solve_batch(self.host_params(), &problem, true))
    }

    /// Solves a batch of entropic OT problems.
    ///
    /// * `cost`: `[B, n, m]` transport costs `C`.
    /// * `a`: `[B, n]` row marginals, `b`: `[B, m]` column marginals, non-negative with equal mass per
    ///   item (not checked here: reading them back would synchronise the device; the host solver
    ///   checks). Zero entries give exact zero rows or columns of the plan.
    ///
    /// Returns the plans `T* = exp((f ⊕ g - C) / eps)` `[B, n, m]` (DIML Eq. 14 in the log domain) and
    /// per-item convergence. The computation runs in the dtype of `cost` (`f64` tensors give `f64`
    /// plans); with [`PlanGradient::Implicit`] the solve itself is done on the host in `f64`.
    ///
    /// # Panics
    /// When the shapes disagree (the message names them).
    pub fn forward(&self, cost: Tensor<3>, a: Tensor<2>, b: Tensor<2>) -> SinkhornOutput {
        let [batch, n, m] = cost.dims();
        assert_eq!(
            a.dims(),
            [batch, n],
            "sinkhorn: a is {:?} but cost is [B, n, m] = {:?}",
            a.dims(),
            cost.dims()
        );
        assert_eq!(
            b.dims(),
            [batch, m],
            "sinkhorn: b is {:?} but cost is [B, n, m] = {:?}",
            b.dims(),
            cost.dims()
        );
        match (&self.gradient, &self.engine) {
            (PlanGradient::Unrolled, SinkhornEngine::Tensor) => self.solve_tensor(cost, a, b),
            (PlanGradient::Detached, SinkhornEngine::Tensor) => {
                self.solve_tensor(cost.detach(), a.detach(), b.detach())
            }
            (PlanGradient::Unrolled, SinkhornEngine::Host) => self.solve_unrolled_host(cost, a, b, true),
            (PlanGradient::Detached, SinkhornEngine::Host) => self.solve_unrolled_host(cost, a, b, false),
            (PlanGradient::Implicit, _) => self.solve_implicit(cost, a, b),
        }
    }

    /// The unrolled iterations on the host; with `differentiable`, the plan carries their adjoint.
    fn solve_unrolled_host(&self, cost: Tensor<3>, a: Tensor<2>, b: Tensor<2>, differentiable: bool) -> SinkhornOutput {
        let params = UnrolledParams {
            eps: self.eps,
            max_iters: self.max_iters,
            tolerance: self.tolerance,
            check_every: self.check_every,
        };
        // Without an autodiff device nothing can ask for the gradient, so no tape is kept.
        let (plan, convergence) = if differentiable && cost.device().is_autodiff() {
            unrolled_with_adjoint(params, cost, a, b)
        } else {
            let inputs = HostInputs::read(&cost, &a, &b);
            let solution = solve_unrolled(params, &inputs.problem(), false);
            let plan = float_tensor(solution.plans, cost.dims(), &cost.device(), cost.dtype());
            (plan, solution.convergence)
        };
        let iterations = convergence.iter().map(|c| c.iterations).max().unwrap_or(0);
        SinkhornOutput {
            plan,
            convergence,
            iterations,
        }
    }

    /// The tensor solver: purely log-domain when `absorb_every == 1`, stabilised otherwise.
    fn solve_tensor(&self, cost: Tensor<3>, a: Tensor<2>, b: Tensor<2>) -> SinkhornOutput {
        if self.absorb_every == 1 {
            self.solve_log(cost, a, b)
        } else {
            self.solve_stabilised(cost, a, b)
        }
    }

    /// Whether the scalings are absorbed after iteration `done` (counted from 1).
    fn absorbs_after(&self, done: usize) -> bool {
        matches!(done, 1 | 2 | 4 | 8) || done.is_multiple_of(self.absorb_every)
    }

    /// Stabilised Sinkhorn on tensors (Schmitzer 2019, Alg. 2 with a fixed absorption schedule).
    ///
    /// The log-kernel `L = (f ⊕ g - C) / eps` is exponentiated only at absorptions; in between, the
    /// iteration is the kernel-space one, `v = b / (Kᵀ u)`, `u = a / (K v)`, with `K = exp(L)` and the
    /// plan `diag(u) K diag(v)`: two batched matrix-vector products per iteration instead of two
    /// `exp` passes. At an absorption `L += log u ⊕ log v` and `u = v = 1`, so the scalings only ever
    /// carry the change since the last absorption and `K` the bulk of the potentials — which is why
    /// small `eps` (where `exp(-C / eps)` itself underflows) works. The very first column step is taken
    /// in the log domain with max-shifts, so that no column of the first kernel underflows to zero.
    /// Denominators are floored at the smallest normal number and scalings capped at `1 / floor`: a
    /// guard that keeps zero-mass entries at exact zeros (`0 / floor = 0`) and stops a transient
    /// overflow from turning into NaN; it is inactive in a normal iteration.
    fn solve_stabilised(&self, cost: Tensor<3>, a: Tensor<2>, b: Tensor<2>) -> SinkhornOutput {
        let [batch, n, m] = cost.dims();
        let floor = smallest_normal(cost.dtype());
        let cap = 1.0 / floor;
        let a_col = a.clone().unsqueeze_dim::<3>(2);
        let b_col = b.clone().unsqueeze_dim::<3>(2);
        let log_b = safe_log(b.clone()).unsqueeze_dim::<3>(1);
        let check = self.tolerance > 0.0;
        let b_host = if check { read_f64s(b.clone()) } else { Vec::new() };
        let mut reached: Vec<Option<usize>> = vec![None; batch];

        // First column step in the log domain, shifted by the column maxima.
        let mut l = cost.mul_scalar(-1.0 / self.eps);
        l = l.clone() - l.clone().detach().max_dim(1);
        let col = l.clone().exp().sum_dim(1);
        l = l + (log_b - col.clamp_min(floor).log());
        let mut kernel = l.clone().exp();
        let mut kernel_t = kernel.clone().swap_dims(1, 2);
        let mut u = a_col.clone().ones_like();
        let mut v = b_col.clone().ones_like();
        let mut iterations = 0;
        while iterations < self.max_iters {
            if iterations > 0 {
                let kt_u = kernel_t.clone().matmul(u.clone());
                if check && iterations.is_multiple_of(self.check_every) {
                    // The columns of the current plan, v ⊙ Kᵀu, against b; its rows are exact.
                    let cols = read_f64s(v.clone() * kt_u.clone());
                    if self.record(&mut reached, &cols, &b_host, m, iterations) {
                        break;
                    }
                }
                v = (b_col.clone() / kt_u.clamp_min(floor)).clamp_max(cap);
            }
            let k_v = kernel.clone().matmul(v.clone());
            u = (a_col.clone() / k_v.clamp_min(floor)).clamp_max(cap);
            iterations += 1;
            if iterations < self.max_iters && self.absorbs_after(iterations) {
                l = l + safe_log(u.clone()) + safe_log(v.clone()).swap_dims(1, 2);
                kernel = l.clone().exp();
                kernel_t = kernel.clone().swap_dims(1, 2);
                u = u.ones_like();
                v = v.ones_like();
            }
        }
        let plan = kernel * u * v.swap_dims(1, 2);
        let convergence = self.report(plan.clone().detach(), a, b, &reached, iterations, [batch, n, m]);
        SinkhornOutput {
            plan,
            convergence,
            iterations,
        }
    }

    /// Marks the items whose column error meets the tolerance at this check; true when all have.
    fn record(&self, reached: &mut [Option<usize>], cols: &[f64], b: &[f64], m: usize, iterations: usize) -> bool {
        let mut all = true;
        for (item, r) in reached.iter_mut().enumerate() {
            if r.is_none() {
                if max_abs_diff(&cols[item * m..(item + 1) * m], &b[item * m..(item + 1) * m]) <= self.tolerance {
                    *r = Some(iterations);
                } else {
                    all = false;
                }
            }
        }
        all
    }

    /// Pure log-domain iterations on tensors (`absorb_every == 1`).
    ///
    /// The state is the log-plan `L = (f ⊕ g - C) / eps` itself. A column step adds
    /// `log b - log Σ_i exp(L)` to every column and a row step `log a - log Σ_j exp(L)` to every row, which
    /// is POT's `sinkhorn_log` update written on `L`: three passes over `[B, n, m]` per half-step (exp,
    /// sum, add) instead of the five of a max-shifted log-sum-exp on the potentials. After a row step
    /// every entry is at most `log a_i <= log(mass)`, so `exp(L)` cannot overflow; the first iteration
    /// subtracts the column and row maxima (detached: a log-sum-exp does not depend on its shift) so that
    /// no column or row sum can underflow to zero before the potentials are roughly right. Afterwards a
    /// sum that still underflows is clamped to the smallest normal number of the dtype, which turns the
    /// update into a bounded step towards the right potential instead of an infinity.
    fn solve_log(&self, cost: Tensor<3>, a: Tensor<2>, b: Tensor<2>) -> SinkhornOutput {
        let [batch, n, m] = cost.dims();
        let floor = smallest_normal(cost.dtype());
        let log_a = safe_log(a.clone()).unsqueeze_dim::<3>(2);
        let log_b = safe_log(b.clone()).unsqueeze_dim::<3>(1);
        let check = self.tolerance > 0.0;
        let b_host = if check { read_f64s(b.clone()) } else { Vec::new() };
        let mut reached: Vec<Option<usize>> = vec![None; batch];

        let mut l = cost.mul_scalar(-1.0 / self.eps);
        let mut iterations = 0;
        while iterations < self.max_iters {
            if iterations == 0 {
                l = l.clone() - l.clone().detach().max_dim(1);
            }
            let col = l.clone().exp().sum_dim(1);
            if check && iterations > 0 && iterations.is_multiple_of(self.check_every) {
                // The columns of the current plan against b; its rows are exact after the last row step.
                let col_host = read_f64s(col.clone());
                if self.record(&mut reached, &col_host, &b_host, m, iterations) {
                    break;
                }
            }
            l = l + (log_b.clone() - col.clamp_min(floor).log());
            if iterations == 0 {
                l = l.clone() - l.clone().detach().max_dim(2);
            }
            let row = l.clone().exp().sum_dim(2);
            l = l + (log_a.clone() - row.clamp_min(floor).log());
            iterations += 1;
        }
        let plan = l.exp();
        let convergence = self.report(plan.clone().detach(), a, b, &reached, iterations, [batch, n, m]);
        SinkhornOutput {
            plan,
            convergence,
            iterations,
        }
    }

    /// Host solve in `f64` from detached inputs, re-attached to the graph by implicit differentiation.
    fn solve_implicit(&self, cost: Tensor<3>, a: Tensor<2>, b: Tensor<2>) -> SinkhornOutput {
        let inputs = HostInputs::read(&cost, &a, &b);
        let solution = solve_batch(self.host_params(), &inputs.problem(), true);
        let iterations = solution.convergence.iter().map(|c| c.iterations).max().unwrap_or(0);
        let plan = implicit_plan(cost, a, b, self.eps, &solution);
        SinkhornOutput {
            plan,
            convergence: solution.convergence,
            iterations,
        }
    }

    /// Per-item convergence of the final plan.
    fn report(
        &self,
        plan: Tensor<3>,
        a: Tensor<2>,
        b: Tensor<2>,
        reached: &[Option<usize>],
        iterations: usize,
        [batch, n, m]: [usize; 3],
    ) -> Vec<Convergence> {
        let rows = read_f64s(plan.clone().sum_dim(2));
        let cols = read_f64s(plan.sum_dim(1));
        let a = read_f64s(a);
        let b = read_f64s(b);
        (0..batch)
            .map(|item| {
                let err = max_abs_diff(&rows[item * n..(item + 1) * n], &a[item * n..(item + 1) * n]).max(
                    max_abs_diff(&cols[item * m..(item + 1) * m], &b[item * m..(item + 1) * m]),
                );
                let converged = err <= self.tolerance;
                Convergence {
                    iterations: reached[item].unwrap_or(iterations),
                    marginal_error: err,
                    converged,
                }
            })
            .collect()
    }
}

/// The values of a batch's cost `[B, n, m]` and marginals `[B, n]`, `[B, m]`, read back once for the
/// host solvers.
struct HostInputs {
    cost: Vec<f64>,
    a: Vec<f64>,
    b: Vec<f64>,
    dims: [usize; 3],
}

impl HostInputs {
    fn read(cost: &Tensor<3>, a: &Tensor<2>, b: &Tensor<2>) -> Self {
        Self {
            cost: read_f64s(cost.clone()),
            a: read_f64s(a.clone()),
            b: read_f64s(b.clone()),
            dims: cost.dims(),
        }
    }

    fn problem(&self) -> HostProblem<'_> {
        let [batch, n, m] = self.dims;
        HostProblem {
            cost: &self.cost,
            a: &self.a,
            b: &self.b,
            batch,
            n,
            m,
        }
    }
}

/// `log x` with zero (or negative) entries mapped to [`LOG_ZERO`]. The zeros are replaced by 1 before
/// the logarithm so that its backward pass divides by 1, not 0: masking only the output would still
/// multiply a zero gradient by `1/0` and give NaN.
fn safe_log<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    let zero = x.clone().lower_equal_elem(0.0);
    x.mask_fill(zero.clone(), 1.0).log().mask_fill(zero, LOG_ZERO)
}

/// The smallest positive normal number of a float dtype, used to clamp sums before their logarithm.
fn smallest_normal(dtype: DType) -> f64 {
    match dtype {
        DType::F64 => f64::MIN_POSITIVE,
        DType::F16 => 6.2e-5,
        _ => f32::MIN_POSITIVE as f64,
    }
}

/// `max_i |x_i - y_i|` (0 for empty slices).
///
/// A NaN anywhere makes the result NaN, so that a broken plan can never pass a tolerance test.
fn max_abs_diff(x: &[f64], y: &[f64]) -> f64 {
    x.iter().zip(y).fold(0.0, |acc: f64, (p, q)| {
        let d = (p - q).abs();
        if d > acc || d.is_nan() { d } else { acc }
    })
}
