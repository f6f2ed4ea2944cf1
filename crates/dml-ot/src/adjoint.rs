//! The unrolled Sinkhorn as one differentiable Burn operation.
//!
//! The plan is computed on the host ([`crate::unrolled`]) and enters the graph through
//! [`attach_unrolled`], a backend extension whose autodiff implementation registers a single node with
//! three parents (cost, `a`, `b`). Its backward pass reads `∂L/∂P` once, runs the recorded iterations'
//! adjoint on the host and hands back `∂L/∂cost`, `∂L/∂a` and `∂L/∂b`: one node instead of the dozens of
//! tensor operations (and their saved intermediates) per iteration of the tensor loop. Without autodiff
//! the operation returns the plan unchanged, on every backend.

// NdArray is deprecated upstream but stays a selectable backend of this workspace.
#![allow(deprecated)]

use std::sync::Arc;

use burn::backend::NdArray;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::tensor::FloatTensor;
use burn::backend::{Autodiff, Backend, Cube, Dispatch, Flex, TensorMetadata, backend_extension};
use burn::tensor::{DType, Shape, Tensor, TensorData, try_read_sync};

use crate::unrolled::UnrolledTape;

/// The extension: `plan` passes through, and under autodiff it carries the adjoint recorded in `tape`.
#[backend_extension(Flex, NdArray, Cube, Autodiff)]
pub(crate) trait UnrolledSinkhornOp: Backend {
    /// Returns `plan` (`[B, n, m]`, computed from `cost` `[B, n, m]`, `a` `[B, n]`, `b` `[B, m]` by the
    /// iterations on `tape`); differentiable with respect to the three inputs under autodiff.
    fn attach_unrolled(
        cost: FloatTensor<Self>,
        a: FloatTensor<Self>,
        b: FloatTensor<Self>,
        plan: FloatTensor<Self>,
        tape: Arc<UnrolledTape>,
    ) -> FloatTensor<Self> {
        let _ = (cost, a, b, tape);
        plan
    }
}

impl UnrolledSinkhornOp for Flex {}
impl UnrolledSinkhornOp for NdArray {}
impl UnrolledSinkhornOp for Cube {}

/// What the backward pass needs: the tape, and the shape and dtype of each input's gradient.
#[derive(Debug, Clone)]
struct AdjointState {
    tape: Arc<UnrolledTape>,
    inputs: [(Shape, DType); 3],
}

#[derive(Debug)]
struct UnrolledBackward;

impl<B: Backend> Backward<B, 3> for UnrolledBackward {
    type State = AdjointState;

    fn backward(self, ops: Ops<Self::State, 3>, grads: &mut Gradients, _checkpointer: &mut Checkpointer) {
        let grad = grads.consume::<B>(&ops.node);
        let device = grad.device();
        let data = try_read_sync(B::float_into_data(grad))
            .expect("the sinkhorn adjoint reads its incoming gradient synchronously")
            .expect("the incoming gradient of the sinkhorn plan can be read");
        let grad_plan: Vec<f64> = data.try_into_vec_as::<f64>().expect("a float gradient converts to f64");
        let out = ops.state.tape.adjoint(&grad_plan);
        for ((parent, values), (shape, dtype)) in ops
            .parents
            .into_iter()
            .zip([out.cost, out.a, out.b])
            .zip(ops.state.inputs)
        {
            if let Some(node) = parent {
                let data = TensorData::new(values, shape).convert_dtype(dtype);
                grads.register::<B>(node.id, B::float_from_data(data, &device));
            }
        }
    }
}

impl<B: Backend + UnrolledSinkhornOp, C: CheckpointStrategy> UnrolledSinkhornOp for Autodiff<B, C> {
    fn attach_unrolled(
        cost: FloatTensor<Self>,
        a: FloatTensor<Self>,
        b: FloatTensor<Self>,
        plan: FloatTensor<Self>,
        tape: Arc<UnrolledTape>,
    ) -> FloatTensor<Self> {
        let meta = |t: &FloatTensor<Self>| (t.shape(), t.dtype());
        let inputs = [meta(&cost), meta(&a), meta(&b)];
        let plan = plan.primitive().clone();
        match UnrolledBackward
            .prepare::<C>([cost.node(), a.node(), b.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => prep.finish(AdjointState { tape, inputs }, plan),
            OpsKind::UnTracked(prep) => prep.finish(plan),
        }
    }
}

/// `plan` (host values of the unrolled solve of `cost`, `a`, `b`) with the recorded adjoint attached.
pub(crate) fn attach_unrolled(
    cost: Tensor<3>,
    a: Tensor<2>,
    b: Tensor<2>,
    plan: Tensor<3>,
    tape: UnrolledTape,
) -> Tensor<3> {
    let out = <Dispatch as UnrolledSinkhornOp>::attach_unrolled(
        cost.into_dispatch(),
        a.into_dispatch(),
        b.into_dispatch(),
        plan.into_dispatch(),
        Arc::new(tape),
    );
    Tensor::from_dispatch(out)
}
