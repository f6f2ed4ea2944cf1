//! A loss value whose gradients were computed outside the graph, as one Burn operation.
//!
//! The host-evaluated losses know `L` and `∂L/∂X`, `∂L/∂Y` before the graph sees them. A
//! surrogate such as `Σ X ⊙ G_X − const` would re-enter the graph with an element-wise product
//! and a sum per input, and its backward pass would multiply once more: three passes over every
//! `[N, D]` input for a gradient that is already known. [`attach_gradient`] and
//! [`attach_gradients`] instead register one autodiff node with the inputs as parents, whose
//! backward pass hands the known gradients (scaled by the incoming gradient) straight to them.
//! Without autodiff they return the value unchanged, on every backend.

// NdArray is deprecated upstream but stays a selectable backend of this workspace.
#![allow(deprecated)]

use burn::backend::NdArray;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::tensor::FloatTensor;
use burn::backend::{Autodiff, Backend, Cube, Dispatch, Flex, backend_extension};
use burn::tensor::{Scalar, Tensor, try_read_sync};

/// The extension: `value` passes through; under autodiff its gradient with respect to each input
/// is the matching given gradient.
#[backend_extension(Flex, NdArray, Cube, Autodiff)]
pub(crate) trait HostGradientOp: Backend {
    /// Returns `value` (`[1]`), differentiable with respect to `x` (any shape) with the gradient
    /// `grad_x` (the shape of `x`) under autodiff.
    fn attach_gradient(value: FloatTensor<Self>, x: FloatTensor<Self>, grad_x: FloatTensor<Self>) -> FloatTensor<Self> {
        let _ = (x, grad_x);
        value
    }

    /// As [`Self::attach_gradient`], for two inputs.
    fn attach_gradients(
        value: FloatTensor<Self>,
        x: FloatTensor<Self>,
        grad_x: FloatTensor<Self>,
        y: FloatTensor<Self>,
        grad_y: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        let _ = (x, grad_x, y, grad_y);
        value
    }
}

impl HostGradientOp for Flex {}
impl HostGradientOp for NdArray {}
impl HostGradientOp for Cube {}

/// The node of a loss value with `N` inputs whose gradients are known.
#[derive(Debug)]
struct HostGradientBackward<const N: usize>;

impl<B: Backend, const N: usize> Backward<B, N> for HostGradientBackward<N> {
    /// The gradients of the `N` parents, on the inner backend.
    type State = Vec<FloatTensor<B>>;

    fn backward(self, ops: Ops<Self::State, N>, grads: &mut Gradients, _checkpointer: &mut Checkpointer) {
        // The incoming gradient of a scalar loss is one number, almost always 1: read it rather
        // than broadcasting a one-element tensor over every gradient.
        let grad = grads.consume::<B>(&ops.node);
        let data = try_read_sync(B::float_into_data(grad))
            .expect("a host-evaluated loss reads its incoming gradient synchronously")
            .expect("the incoming gradient of a loss value can be read");
        let scale = data
            .iter::<f64>()
            .next()
            .expect("the incoming gradient of a loss value has one element");
        for (parent, g) in ops.parents.into_iter().zip(ops.state) {
            if let Some(node) = parent {
                let g = if scale == 1.0 {
                    g
                } else {
                    B::float_mul_scalar(g, Scalar::Float(scale))
                };
                grads.register::<B>(node.id, g);
            }
        }
    }
}

impl<B: Backend + HostGradientOp, C: CheckpointStrategy> HostGradientOp for Autodiff<B, C> {
    fn attach_gradient(value: FloatTensor<Self>, x: FloatTensor<Self>, grad_x: FloatTensor<Self>) -> FloatTensor<Self> {
        track::<B, C, 1>(value, [(x, grad_x)])
    }

    fn attach_gradients(
        value: FloatTensor<Self>,
        x: FloatTensor<Self>,
        grad_x: FloatTensor<Self>,
        y: FloatTensor<Self>,
        grad_y: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        track::<B, C, 2>(value, [(x, grad_x), (y, grad_y)])
    }
}

/// A float tensor of the autodiff backend over `B`.
type AdTensor<B, C> = FloatTensor<Autodiff<B, C>>;

/// `value` as the output of one node whose parents are the inputs of the `(input, gradient)`
/// pairs, carrying the gradients for its backward pass.
fn track<B: Backend, C: CheckpointStrategy, const N: usize>(
    value: AdTensor<B, C>,
    inputs: [(AdTensor<B, C>, AdTensor<B, C>); N],
) -> AdTensor<B, C> {
    let value = value.primitive().clone();
    let nodes = inputs.each_ref().map(|(x, _)| x.node());
    let state = inputs.iter().map(|(_, g)| g.primitive().clone()).collect();
    match HostGradientBackward::<N>.prepare::<C>(nodes).compute_bound().stateful() {
        OpsKind::Tracked(prep) => prep.finish(state, value),
        OpsKind::UnTracked(prep) => prep.finish(value),
    }
}

/// The loss `value` (`[1]`, untracked) connected to `x` with the known gradient `grad_x`
/// (shape of `x`).
pub(crate) fn attach_gradient<const D: usize>(value: Tensor<1>, x: Tensor<D>, grad_x: Tensor<D>) -> Tensor<1> {
    debug_assert_eq!(x.dims(), grad_x.dims());
    let out =
        <Dispatch as HostGradientOp>::attach_gradient(value.into_dispatch(), x.into_dispatch(), grad_x.into_dispatch());
    Tensor::from_dispatch(out)
}

/// The loss `value` (`[1]`, untracked) connected to `x` and `y` with the known gradients
/// `grad_x` (shape of `x`) and `grad_y` (shape of `y`).
pub(crate) fn attach_gradients<const D: usize, const E: usize>(
    value: Tensor<1>,
    (x, grad_x): (Tensor<D>, Tensor<D>),
    (y, grad_y): (Tensor<E>, Tensor<E>),
) -> Tensor<1> {
    debug_assert_eq!(x.dims(), grad_x.dims());
    debug_assert_eq!(y.dims(), grad_y.dims());
    let out = <Dispatch as HostGradientOp>::attach_gradients(
        value.into_dispatch(),
        x.into_dispatch(),
        grad_x.into_dispatch(),
        y.into_dispatch(),
        grad_y.into_dispatch(),
    );
    Tensor::from_dispatch(out)
}
