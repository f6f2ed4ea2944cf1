//! The unrolled Sinkhorn as one differentiable operation ([`dml_backend::HostOp`]).
//!
//! The forward pass reads the cost `[B, n, m]` and the marginals `a` `[B, n]`, `b` `[B, m]` once, runs
//! the log-domain iterations of DIML Eq. 12–14 on the host (`crate::unrolled`) while recording their
//! tape, and uploads the plan `T*` `[B, n, m]`. Under autodiff the plan is a single graph node with three
//! parents (cost, `a`, `b`); its backward pass reads `∂L/∂T*` once, runs the recorded iterations' adjoint
//! on the host and hands back `∂L/∂cost`, `∂L/∂a` and `∂L/∂b`: one node instead of the dozens of tensor
//! operations (and their saved intermediates) per iteration of the tensor loop. The Burn backend
//! extension, the per-backend routing and the autodiff node are `dml_backend`'s; this module holds only
//! the forward and the backward maths.

use std::sync::{Arc, OnceLock};

use burn::tensor::{DType, Tensor};
use dml_backend::{HostOp, OpTensor, apply, float_tensor, read_f64s};

use crate::host::HostProblem;
use crate::types::{Convergence, UnrolledParams};
use crate::unrolled::{UnrolledTape, solve_unrolled};

/// The unrolled host solve of one batch: the settings, and what its forward pass leaves for the
/// backward pass.
#[derive(Debug)]
struct UnrolledSinkhorn {
    /// The solver settings.
    params: UnrolledParams,
    /// Filled once by the forward pass; every application gets its own operation value.
    solved: OnceLock<Solved>,
}

/// What the forward pass of [`UnrolledSinkhorn`] records.
#[derive(Debug)]
struct Solved {
    /// The iterations, for the adjoint.
    tape: UnrolledTape,
    /// Per-item convergence, handed back to the caller of [`unrolled_with_adjoint`].
    convergence: Vec<Convergence>,
    /// `[B, n, m]`.
    dims: [usize; 3],
    /// The dtypes of cost, `a` and `b`: each gradient is returned in its input's dtype.
    dtypes: [DType; 3],
}

impl HostOp for UnrolledSinkhorn {
    fn forward(&self, inputs: &[OpTensor]) -> OpTensor {
        let [cost, a, b] = inputs else {
            panic!("the unrolled sinkhorn takes cost, a and b, got {} inputs", inputs.len());
        };
        let dims = cost.dims();
        let [batch, n, m] = <[usize; 3]>::try_from(dims.as_slice()).expect("the cost is [B, n, m]");
        let (device, dtype) = (cost.device(), cost.dtype());
        let dtypes = [dtype, a.dtype(), b.dtype()];
        let cost = read_f64s(cost.clone().tensor::<3>());
        let a = read_f64s(a.clone().tensor::<2>());
        let b = read_f64s(b.clone().tensor::<2>());
        let problem = HostProblem {
            cost: &cost,
            a: &a,
            b: &b,
            batch,
            n,
            m,
        };
        let solution = solve_unrolled(self.params, &problem, true);
        let tape = solution.tape.expect("the solve was asked to record its tape");
        let plan = float_tensor(solution.plans, [batch, n, m], &device, dtype);
        self.solved
            .set(Solved {
                tape,
                convergence: solution.convergence,
                dims: [batch, n, m],
                dtypes,
            })
            .expect("an unrolled sinkhorn operation is applied once");
        OpTensor::new(plan)
    }

    fn backward(&self, grad: OpTensor, _inputs: &[OpTensor], wanted: &[bool]) -> Vec<Option<OpTensor>> {
        let solved = self
            .solved
            .get()
            .expect("the forward pass ran before the backward pass");
        let device = grad.device();
        let grad_plan = read_f64s(grad.tensor::<3>());
        let out = solved.tape.adjoint(&grad_plan);
        let [batch, n, m] = solved.dims;
        let [d_cost, d_a, d_b] = solved.dtypes;
        vec![
            wanted[0].then(|| OpTensor::new(float_tensor(out.cost, [batch, n, m], &device, d_cost))),
            wanted[1].then(|| OpTensor::new(float_tensor(out.a, [batch, n], &device, d_a))),
            wanted[2].then(|| OpTensor::new(float_tensor(out.b, [batch, m], &device, d_b))),
        ]
    }

    /// The adjoint reads only the tape, so the inputs need not be kept alive until it runs.
    fn keeps_inputs(&self) -> bool {
        false
    }
}

/// Solves `cost` `[B, n, m]`, `a` `[B, n]`, `b` `[B, m]` by the unrolled host iteration and returns the
/// plan `T*` `[B, n, m]` (DIML Eq. 14), differentiable with respect to the three inputs through the
/// recorded iterations' adjoint, with per-item convergence.
pub(crate) fn unrolled_with_adjoint(
    params: UnrolledParams,
    cost: Tensor<3>,
    a: Tensor<2>,
    b: Tensor<2>,
) -> (Tensor<3>, Vec<Convergence>) {
    let op = Arc::new(UnrolledSinkhorn {
        params,
        solved: OnceLock::new(),
    });
    let plan = apply::<3>(op.clone(), vec![cost.into(), a.into(), b.into()]);
    let convergence = op
        .solved
        .get()
        .expect("applying the operation ran its forward pass")
        .convergence
        .clone();
    (plan, convergence)
}
