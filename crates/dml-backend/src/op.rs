//! One generic way to register a differentiable operation whose forward and backward passes are
//! written by hand (host kernels, analytic loss gradients, a solver's adjoint).
//!
//! Burn 0.22 routes a custom operation through a backend extension trait, implemented once per
//! runtime backend, plus an `Autodiff` implementation that records a node and a `Backward` type
//! that hands gradients to the parents. That machinery is the same for every operation, so it
//! lives here once: an operation implements [`HostOp`] on plain, untracked tensors
//! ([`OpTensor`]) and is applied with [`apply`]. Under autodiff the output is one node whose
//! parents are the inputs; its backward pass calls [`HostOp::backward`].
//!
//! State that the backward pass needs beyond the inputs (saved statistics, a solver's tape, the
//! positions of maxima) lives inside the operation value, typically in a `OnceLock` filled by
//! the forward pass: every application gets its own value.

// NdArray is deprecated upstream but stays a selectable backend of this workspace.
#![allow(deprecated)]

use std::fmt::Debug;
use std::sync::Arc;

use burn::backend::NdArray;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::tensor::FloatTensor;
use burn::backend::{
    Autodiff, Backend, BackendTensor, Cube, Dispatch, DispatchAutodiffContext, DispatchTensor, DispatchTensorKind,
    Flex, backend_extension,
};
use burn::tensor::{DType, Device, Tensor, TensorData};

use crate::host;

/// An untracked float tensor handed to a [`HostOp`]: any rank, on the device (and backend) the
/// operation was applied on.
#[derive(Clone, Debug)]
pub struct OpTensor(DispatchTensor);

impl OpTensor {
    /// Wraps a tensor (its autodiff graph, if any, is not followed: pass untracked tensors).
    pub fn new<const D: usize>(t: Tensor<D>) -> Self {
        Self(t.into_dispatch())
    }

    /// The tensor as a `Tensor<D>`, for Burn's tensor operations.
    ///
    /// # Panics
    /// When the tensor's rank is not `D`.
    pub fn tensor<const D: usize>(self) -> Tensor<D> {
        let t = Tensor::<D>::from_dispatch(self.0);
        assert_eq!(t.shape().num_dims(), D, "an operation tensor read with the wrong rank");
        t
    }

    /// The shape.
    pub fn dims(&self) -> Vec<usize> {
        Tensor::<1>::from_dispatch(self.0.clone()).shape().to_vec()
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        Tensor::<1>::from_dispatch(self.0.clone()).dtype()
    }

    /// The device.
    pub fn device(&self) -> Device {
        Tensor::<1>::from_dispatch(self.0.clone()).device()
    }

    /// Runs `f` on the values as `f32` (row-major); in place for `f32` flex tensors (see
    /// [`host::with_f32s`]).
    pub fn with_f32s<R>(&self, f: impl FnOnce(&[f32]) -> R) -> R {
        host::with_f32s(&self.0, f)
    }

    /// A new `f32` tensor of `shape` on `device` from row-major values.
    ///
    /// # Panics
    /// When `values.len()` is not the product of `shape`.
    pub fn from_f32s(values: Vec<f32>, shape: Vec<usize>, device: &Device) -> Self {
        let data = TensorData::new(values, shape);
        Self(Tensor::<1>::from_dispatch(from_data_any_rank(data, device)).into_dispatch())
    }
}

/// A tensor of any rank from data (Burn's constructors are typed by rank; the rank is only a
/// type-level tag on the dispatch primitive).
fn from_data_any_rank(data: TensorData, device: &Device) -> DispatchTensor {
    macro_rules! by_rank {
        ($($d:literal),*) => {
            match data.shape().len() {
                $($d => Tensor::<$d>::from_data(data, device).into_dispatch(),)*
                r => panic!("operation tensors of rank {r} are not supported (1 to 6)"),
            }
        };
    }
    by_rank!(1, 2, 3, 4, 5, 6)
}

/// A differentiable operation with a hand-written forward and backward pass.
///
/// Both passes see untracked tensors of the device's own backend (flex, ndarray or a CubeCL
/// runtime), so they may read values on the host ([`OpTensor::with_f32s`]) or use Burn's tensor
/// operations ([`OpTensor::tensor`]).
pub trait HostOp: Debug + Send + Sync + 'static {
    /// The output of the operation on `inputs` (in the order given to [`apply`]). Called once per
    /// application, before [`Self::backward`].
    fn forward(&self, inputs: &[OpTensor]) -> OpTensor;

    /// The gradients of the inputs given the gradient `grad` of the output (its shape).
    /// `inputs` are the forward pass's inputs when [`Self::keeps_inputs`] is true, else empty;
    /// `wanted[i]` says whether input `i` is tracked. Returns one entry per input, `None` where
    /// no gradient is wanted (or the input is a constant of the operation); each `Some` has its
    /// input's shape.
    ///
    /// An input that is tracked by autodiff must get its gradient (a `None` for it leaves its
    /// node without one, and Burn's backward pass then fails): give constants either as state of
    /// the operation or as untracked tensors (`set_require_grad(false)`; `detach()` keeps the
    /// tensor marked as requiring a gradient).
    fn backward(&self, grad: OpTensor, inputs: &[OpTensor], wanted: &[bool]) -> Vec<Option<OpTensor>>;

    /// Whether the backward pass reads the inputs (they are then kept alive until it runs).
    fn keeps_inputs(&self) -> bool {
        true
    }
}

/// Applies `op` to `inputs` (1 to [`MAX_INPUTS`] tensors of any ranks, possibly tracked) and
/// returns its output of rank `D`: on an autodiff device one graph node whose parents are the
/// inputs, whose backward pass is [`HostOp::backward`].
///
/// # Panics
/// When there are no or too many inputs, or the output's rank is not `D`.
pub fn apply<const D: usize>(op: Arc<dyn HostOp>, inputs: Vec<OpInput>) -> Tensor<D> {
    assert!(
        (1..=MAX_INPUTS).contains(&inputs.len()),
        "a host operation takes 1 to {MAX_INPUTS} inputs, got {}",
        inputs.len()
    );
    // The extension's method has a fixed number of tensor arguments (Burn's extension macro takes
    // no lists of tensors), so the unused ones repeat the first input; `count` says how many are
    // real, and only those become parents of the graph node.
    let count = inputs.len();
    let mut t: Vec<DispatchTensor> = inputs.into_iter().map(|t| t.0).collect();
    t.resize(MAX_INPUTS, t[0].clone());
    let [t0, t1, t2, t3, t4, t5]: [DispatchTensor; MAX_INPUTS] = t.try_into().expect("padded to MAX_INPUTS");
    let op = SharedOp { op, count };
    let out = Tensor::<D>::from_dispatch(<Dispatch as HostOpExt>::host_op(t0, t1, t2, t3, t4, t5, op));
    assert_eq!(
        out.shape().num_dims(),
        D,
        "a host operation's output read with the wrong rank"
    );
    out
}

/// A tensor given to [`apply`], of any rank, possibly tracked by autodiff.
#[derive(Debug)]
pub struct OpInput(DispatchTensor);

impl<const D: usize> From<Tensor<D>> for OpInput {
    fn from(t: Tensor<D>) -> Self {
        Self(t.into_dispatch())
    }
}

/// The largest number of inputs an operation may have (the autodiff node's parents are a
/// fixed-size array, one type per count).
pub const MAX_INPUTS: usize = 6;

/// The operation as an argument of the backend extension, with the number of real inputs.
#[derive(Clone, Debug)]
pub struct SharedOp {
    op: Arc<dyn HostOp>,
    count: usize,
}

/// The extension: one method for every host operation.
#[backend_extension(Flex, NdArray, Cube, Autodiff)]
trait HostOpExt: Backend {
    /// The output of `op` on its first `op.count` tensor arguments.
    #[allow(clippy::too_many_arguments)]
    fn host_op(
        t0: FloatTensor<Self>,
        t1: FloatTensor<Self>,
        t2: FloatTensor<Self>,
        t3: FloatTensor<Self>,
        t4: FloatTensor<Self>,
        t5: FloatTensor<Self>,
        op: SharedOp,
    ) -> FloatTensor<Self>;
}

/// The runtime backends' float tensors seen as untracked dispatch tensors and back.
trait Inner: Backend {
    fn wrap(t: FloatTensor<Self>) -> OpTensor;
    fn unwrap(t: OpTensor) -> FloatTensor<Self>;
}

macro_rules! inner_backend {
    ($backend:ident) => {
        impl Inner for $backend {
            fn wrap(t: FloatTensor<Self>) -> OpTensor {
                OpTensor(DispatchTensor {
                    kind: DispatchTensorKind::$backend(BackendTensor::Float(t)),
                    autodiff: DispatchAutodiffContext::Disabled,
                })
            }

            fn unwrap(t: OpTensor) -> FloatTensor<Self> {
                match t.0.kind {
                    DispatchTensorKind::$backend(BackendTensor::Float(t)) => t,
                    other => panic!(
                        "a host operation returned a tensor of another backend than its inputs' ({}): {other:?}",
                        stringify!($backend)
                    ),
                }
            }
        }

        impl HostOpExt for $backend {
            fn host_op(
                t0: FloatTensor<Self>,
                t1: FloatTensor<Self>,
                t2: FloatTensor<Self>,
                t3: FloatTensor<Self>,
                t4: FloatTensor<Self>,
                t5: FloatTensor<Self>,
                op: SharedOp,
            ) -> FloatTensor<Self> {
                forward::<Self>(real_inputs([t0, t1, t2, t3, t4, t5], &op), &op)
            }
        }
    };
}

inner_backend!(Flex);
inner_backend!(NdArray);
inner_backend!(Cube);

/// The first `op.count` of the extension's tensor arguments (the rest pad the fixed signature).
fn real_inputs<T>(all: [T; MAX_INPUTS], op: &SharedOp) -> Vec<T> {
    let mut inputs = Vec::from(all);
    inputs.truncate(op.count);
    inputs
}

fn forward<B: Inner>(inputs: Vec<FloatTensor<B>>, op: &SharedOp) -> FloatTensor<B> {
    let inputs: Vec<OpTensor> = inputs.into_iter().map(B::wrap).collect();
    B::unwrap(op.op.forward(&inputs))
}

/// The graph node of one application: the operation and, when it keeps them, its inputs.
#[derive(Debug)]
struct HostOpBackward<const N: usize>;

impl<B: Inner, const N: usize> Backward<B, N> for HostOpBackward<N> {
    type State = (SharedOp, Vec<FloatTensor<B>>);

    fn backward(self, ops: Ops<Self::State, N>, grads: &mut Gradients, _checkpointer: &mut Checkpointer) {
        let grad = B::wrap(grads.consume::<B>(&ops.node));
        let (op, inputs) = ops.state;
        let inputs: Vec<OpTensor> = inputs.into_iter().map(B::wrap).collect();
        let wanted: Vec<bool> = ops.parents.iter().map(Option::is_some).collect();
        let results = op.op.backward(grad, &inputs, &wanted);
        assert_eq!(results.len(), N, "{:?}: one gradient entry per input", op.op);
        for (parent, g) in ops.parents.into_iter().zip(results) {
            if let (Some(node), Some(g)) = (parent, g) {
                grads.register::<B>(node.id, B::unwrap(g));
            }
        }
    }
}

impl<B: Inner + HostOpExt, C: CheckpointStrategy> HostOpExt for Autodiff<B, C> {
    fn host_op(
        t0: FloatTensor<Self>,
        t1: FloatTensor<Self>,
        t2: FloatTensor<Self>,
        t3: FloatTensor<Self>,
        t4: FloatTensor<Self>,
        t5: FloatTensor<Self>,
        op: SharedOp,
    ) -> FloatTensor<Self> {
        let inputs = real_inputs([t0, t1, t2, t3, t4, t5], &op);
        macro_rules! by_count {
            ($($n:literal),*) => {
                match inputs.len() {
                    $($n => track::<B, C, $n>(inputs, op),)*
                    n => unreachable!("{n} inputs were checked against MAX_INPUTS"),
                }
            };
        }
        by_count!(1, 2, 3, 4, 5, 6)
    }
}

/// Runs the operation on the inner backend and records one node with the inputs as parents.
fn track<B: Inner + HostOpExt, C: CheckpointStrategy, const N: usize>(
    inputs: Vec<FloatTensor<Autodiff<B, C>>>,
    op: SharedOp,
) -> FloatTensor<Autodiff<B, C>> {
    let primitives: Vec<FloatTensor<B>> = inputs.iter().map(|x| x.primitive().clone()).collect();
    let nodes: [_; N] = std::array::from_fn(|i| inputs[i].node());
    let kept = if op.op.keeps_inputs() {
        primitives.clone()
    } else {
        Vec::new()
    };
    let output = forward::<B>(primitives, &op);
    match HostOpBackward::<N>.prepare::<C>(nodes).compute_bound().stateful() {
        OpsKind::Tracked(prep) => prep.finish((op, kept), output),
        OpsKind::UnTracked(prep) => prep.finish(output),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::OnceLock;

    use super::*;

    /// `y = a ⊙ b` with the product's gradient written by hand, and a count of backward calls
    /// kept in the operation (as real operations keep their saved values).
    #[derive(Debug, Default)]
    struct Product {
        seen_forward: OnceLock<usize>,
    }

    impl HostOp for Product {
        fn forward(&self, inputs: &[OpTensor]) -> OpTensor {
            let (a, b) = (&inputs[0], &inputs[1]);
            let shape = a.dims();
            let values = a.with_f32s(|x| b.with_f32s(|y| x.iter().zip(y).map(|(p, q)| p * q).collect::<Vec<f32>>()));
            self.seen_forward.set(values.len()).unwrap();
            OpTensor::from_f32s(values, shape, &a.device())
        }

        fn backward(&self, grad: OpTensor, inputs: &[OpTensor], wanted: &[bool]) -> Vec<Option<OpTensor>> {
            assert!(self.seen_forward.get().is_some());
            let g = grad.tensor::<2>();
            let a = inputs[0].clone().tensor::<2>();
            let b = inputs[1].clone().tensor::<2>();
            vec![
                wanted[0].then(|| OpTensor::new(g.clone() * b)),
                wanted[1].then(|| OpTensor::new(g * a)),
            ]
        }
    }

    #[test]
    #[allow(deprecated)]
    fn a_host_operation_matches_burn_with_its_gradients_on_every_cpu_backend() {
        for device in [Device::flex().autodiff(), Device::ndarray().autodiff()] {
            let a = Tensor::<2>::from_data([[1.0f32, -2.0], [3.0, 0.5]], &device).require_grad();
            let b = Tensor::<2>::from_data([[4.0f32, 1.5], [-1.0, 2.0]], &device);
            // `b` is a constant: its gradient is not wanted and none is computed.
            let y: Tensor<2> = apply(Arc::new(Product::default()), vec![a.clone().into(), b.clone().into()]);
            let want = a.clone() * b.clone();
            let (yv, wv): (Vec<f32>, Vec<f32>) = (
                y.clone().into_data().to_vec().unwrap(),
                want.into_data().to_vec().unwrap(),
            );
            assert_eq!(yv, wv, "{device:?}");
            let grads = (y * Tensor::from_data([[1.0f32, 2.0], [3.0, 4.0]], &device))
                .sum()
                .backward();
            let ga: Vec<f32> = a.grad(&grads).unwrap().into_data().to_vec().unwrap();
            assert_eq!(ga, vec![4.0, 3.0, -3.0, 8.0], "{device:?}");
        }
    }

    #[test]
    fn without_autodiff_the_operation_runs_once_and_records_nothing() {
        let device = Device::flex();
        let a = Tensor::<2>::from_data([[1.0f32, 2.0]], &device);
        let y: Tensor<2> = apply(Arc::new(Product::default()), vec![a.clone().into(), a.into()]);
        let v: Vec<f32> = y.into_data().to_vec().unwrap();
        assert_eq!(v, vec![1.0, 4.0]);
    }
}
