//! The backbones' max pooling on CPU devices, through `dml_kernels::pool`.
//!
//! The forward pass keeps, per output, the position of its maximum, so the backward pass is one
//! scatter and never reads the input again. On GPUs, for other float types and for "same"
//! padding it is exactly `MaxPool2d::forward`.

// NdArray is deprecated upstream but stays a selectable backend of this workspace.
#![allow(deprecated)]

use std::sync::{Arc, OnceLock};

use burn::backend::NdArray;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::tensor::FloatTensor;
use burn::backend::{Autodiff, Backend, Cube, Dispatch, Flex, TensorMetadata, backend_extension};
use burn::nn::pool::MaxPool2d;
use burn::tensor::{DType, Tensor, TensorData};
use dml_kernels::pool::{self as kernels, Pool2dShape};

use crate::host_conv::padding_pairs;
use crate::host_data::HostRead;
use crate::runtime::is_cpu_device;

/// The geometry and, once the forward pass ran, the position of every output's maximum.
#[derive(Debug)]
pub(crate) struct PoolState {
    shape: Pool2dShape,
    index: OnceLock<Vec<u32>>,
}

/// The extension: max pooling of `x` `[B, C, H, W]` on the host; differentiable under autodiff.
#[backend_extension(Flex, NdArray, Cube, Autodiff)]
pub(crate) trait HostPoolOp: Backend {
    /// `[B, C, Ho, Wo]`.
    fn host_max_pool2d(x: FloatTensor<Self>, state: Arc<PoolState>) -> FloatTensor<Self>;
}

impl HostPoolOp for Flex {
    fn host_max_pool2d(x: FloatTensor<Self>, state: Arc<PoolState>) -> FloatTensor<Self> {
        forward::<Self>(x, &state)
    }
}

impl HostPoolOp for NdArray {
    fn host_max_pool2d(x: FloatTensor<Self>, state: Arc<PoolState>) -> FloatTensor<Self> {
        forward::<Self>(x, &state)
    }
}

impl HostPoolOp for Cube {
    fn host_max_pool2d(x: FloatTensor<Self>, state: Arc<PoolState>) -> FloatTensor<Self> {
        forward::<Self>(x, &state)
    }
}

fn forward<B: Backend + HostRead>(x: FloatTensor<B>, state: &PoolState) -> FloatTensor<B> {
    let device = x.device();
    let s = &state.shape;
    let (output, index) =
        B::with_f32s(x, |xs| kernels::max_pool2d(s, xs)).expect("the pooling geometry was checked before dispatch");
    let [ho, wo] = s.output_size().expect("a checked pooling shape");
    // Each forward pass has its own state; a second `set` would be a bug of this module.
    state.index.set(index).expect("each pooling pass has its own state");
    B::float_from_data(TensorData::new(output, [s.batch, s.channels, ho, wo]), &device)
}

#[derive(Debug)]
struct HostPoolBackward;

impl<B: Backend + HostRead> Backward<B, 1> for HostPoolBackward {
    type State = Arc<PoolState>;

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _checkpointer: &mut Checkpointer) {
        let grad = grads.consume::<B>(&ops.node);
        let device = grad.device();
        let state = ops.state;
        let s = state.shape;
        let index = state.index.get().expect("the pooling forward pass saved its indices");
        let dx = B::with_f32s(grad, |g| kernels::max_pool2d_backward(&s, index, g))
            .expect("the pooling geometry was checked in the forward pass");
        if let [Some(node)] = ops.parents {
            let shape = [s.batch, s.channels, s.height, s.width];
            grads.register::<B>(node.id, B::float_from_data(TensorData::new(dx, shape), &device));
        }
    }
}

impl<B: Backend + HostPoolOp + HostRead, C: CheckpointStrategy> HostPoolOp for Autodiff<B, C> {
    fn host_max_pool2d(x: FloatTensor<Self>, state: Arc<PoolState>) -> FloatTensor<Self> {
        let output = B::host_max_pool2d(x.primitive().clone(), state.clone());
        match HostPoolBackward.prepare::<C>([x.node()]).compute_bound().stateful() {
            OpsKind::Tracked(prep) => prep.finish(state, output),
            OpsKind::UnTracked(prep) => prep.finish(output),
        }
    }
}

/// The host geometry of `pool` on `x`, when the host path applies.
fn host_shape(pool: &MaxPool2d, x: &Tensor<4>) -> Option<Pool2dShape> {
    let [batch, channels, height, width] = x.dims();
    let padding = padding_pairs(&pool.padding)?;
    let shape = Pool2dShape {
        batch,
        channels,
        height,
        width,
        kernel: pool.kernel_size,
        stride: pool.stride,
        padding,
        dilation: pool.dilation,
        ceil_mode: pool.ceil_mode,
    };
    let usable = is_cpu_device(&x.device()) && x.dtype() == DType::F32 && batch * channels > 0;
    (usable && shape.output_size().is_ok()).then_some(shape)
}

/// `pool.forward(x)` for `x` `[B, C, H, W]`: through the host kernel on CPU devices in `f32`
/// (explicit or no padding), otherwise Burn's.
pub(crate) fn max_pool2d(pool: &MaxPool2d, x: Tensor<4>) -> Tensor<4> {
    let Some(shape) = host_shape(pool, &x) else {
        return pool.forward(x);
    };
    let state = Arc::new(PoolState {
        shape,
        index: OnceLock::new(),
    });
    Tensor::from_dispatch(<Dispatch as HostPoolOp>::host_max_pool2d(x.into_dispatch(), state))
}

#[cfg(test)]
mod tests {
    use burn::nn::PaddingConfig2d;
    use burn::nn::pool::MaxPool2dConfig;
    use burn::tensor::{Device, Distribution};

    use super::*;
    use crate::host_data::test_support::{assert_close, values};

    #[test]
    fn host_pooling_and_its_gradient_match_burn() {
        let device = Device::flex().autodiff();
        let x0: Tensor<4> = Tensor::random([2, 3, 11, 10], Distribution::Normal(0.0, 1.0), &device);
        let pools = [
            MaxPool2dConfig::new([2, 2]).init(),
            MaxPool2dConfig::new([3, 3])
                .with_strides([2, 2])
                .with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1))
                .init(),
            MaxPool2dConfig::new([3, 3])
                .with_strides([2, 2])
                .with_ceil_mode(true)
                .init(),
            MaxPool2dConfig::new([2, 3])
                .with_strides([1, 2])
                .with_padding(PaddingConfig2d::Explicit(1, 0, 0, 1))
                .with_dilation([2, 1])
                .init(),
        ];
        for pool in pools {
            let label = format!("{pool:?}");
            assert!(host_shape(&pool, &x0).is_some(), "{label}: the host path applies");
            let run = |host: bool| {
                let x = x0.clone().detach().require_grad();
                let y = if host {
                    max_pool2d(&pool, x.clone())
                } else {
                    pool.forward(x.clone())
                };
                let g = Tensor::<4>::ones(y.dims(), &device).cumsum(3) / 3.0;
                let grads = (y.clone() * g).sum().backward();
                (y.dims(), values(y), values(x.grad(&grads).unwrap()))
            };
            let (host, burn) = (run(true), run(false));
            assert_eq!(host.0, burn.0, "{label}: output shape");
            assert_close(&host.1, &burn.1, 0.0, &format!("{label}: output"));
            assert_close(&host.2, &burn.2, 1e-6, &format!("{label}: ∂x"));
        }
    }

    #[test]
    fn same_padding_and_other_float_types_use_burn() {
        let device = Device::flex();
        let x: Tensor<4> = Tensor::random([1, 2, 6, 6], Distribution::Default, &device);
        let same = MaxPool2dConfig::new([3, 3]).with_padding(PaddingConfig2d::Same).init();
        assert!(host_shape(&same, &x).is_none());
        assert_close(
            &values(max_pool2d(&same, x.clone())),
            &values(same.forward(x.clone())),
            0.0,
            "same",
        );
        let pool = MaxPool2dConfig::new([2, 2]).init();
        assert!(host_shape(&pool, &x.cast(DType::F64)).is_none());
    }
}
