//! A loss value whose gradients were computed outside the graph, as one Burn operation.
//!
//! The host-evaluated losses know `L` and `∂L/∂X`, `∂L/∂Y` before the graph sees them. A
//! surrogate such as `Σ X ⊙ G_X − const` would re-enter the graph with an element-wise product
//! and a sum per input, and its backward pass would multiply once more: three passes over every
//! `[N, D]` input for a gradient that is already known. [`attach_gradient`] and
//! [`attach_gradients`] instead apply one [`HostOp`] whose inputs are the value, each input and
//! its known gradient: under autodiff that is one node whose backward pass hands the known
//! gradients (scaled by the incoming gradient) straight to the inputs. Without autodiff the
//! operation returns the value unchanged, on every backend.
//!
//! The value and the gradients enter the operation untracked: they are its constants, and were
//! they tracked (a gradient computed from detached embeddings is: Burn's `detach` keeps
//! `require_grad`), the backward pass would walk into the graph that produced them and find no
//! gradient registered there.

use std::sync::Arc;

use burn::tensor::Tensor;
use dml_backend::{HostOp, OpInput, OpTensor, apply, read_f64s};

/// The operation on `[value, x, grad_x]` (one input with a known gradient, `x` of rank `D`) or
/// `[value, x, grad_x, y, grad_y]` (two, `y` of rank `E`). The value and the gradients are
/// constants of the operation: only `x` and `y` receive gradients.
#[derive(Debug)]
struct KnownGradients<const D: usize, const E: usize>;

impl<const D: usize, const E: usize> HostOp for KnownGradients<D, E> {
    fn forward(&self, inputs: &[OpTensor]) -> OpTensor {
        inputs[0].clone()
    }

    fn backward(&self, grad: OpTensor, inputs: &[OpTensor], wanted: &[bool]) -> Vec<Option<OpTensor>> {
        // The incoming gradient of a scalar loss is one number, almost always 1: read it rather
        // than broadcasting a one-element tensor over every gradient.
        let scale = read_f64s(grad.tensor::<1>())
            .first()
            .copied()
            .expect("the incoming gradient of a loss value has one element");
        let mut out = vec![None; inputs.len()];
        if wanted[1] {
            out[1] = Some(scaled::<D>(&inputs[2], scale));
        }
        if inputs.len() == 5 && wanted[3] {
            out[3] = Some(scaled::<E>(&inputs[4], scale));
        }
        out
    }
}

/// `g · scale`, without the multiplication when the scale is 1.
fn scaled<const R: usize>(g: &OpTensor, scale: f64) -> OpTensor {
    if scale == 1.0 {
        g.clone()
    } else {
        OpTensor::new(g.clone().tensor::<R>() * scale)
    }
}

/// The loss `value` (`[1]`, untracked) connected to `x` with the known gradient `grad_x`
/// (shape of `x`).
pub(crate) fn attach_gradient<const D: usize>(value: Tensor<1>, x: Tensor<D>, grad_x: Tensor<D>) -> Tensor<1> {
    debug_assert_eq!(x.dims(), grad_x.dims());
    apply::<1>(
        Arc::new(KnownGradients::<D, 1>),
        vec![constant(value), x.into(), constant(grad_x)],
    )
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
    apply::<1>(
        Arc::new(KnownGradients::<D, E>),
        vec![constant(value), x.into(), constant(grad_x), y.into(), constant(grad_y)],
    )
}

/// A constant input of the operation: cut from any graph.
fn constant<const R: usize>(t: Tensor<R>) -> OpInput {
    t.set_require_grad(false).into()
}
