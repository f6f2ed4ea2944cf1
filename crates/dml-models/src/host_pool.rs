//! The backbones' max pooling on CPU devices, through `dml_kernels::pool`.
//!
//! The forward pass keeps, per output, the position of its maximum, so the backward pass is one
//! scatter and never reads the input again. On GPUs, for other float types and for "same"
//! padding it is exactly `MaxPool2d::forward`.

use std::sync::{Arc, OnceLock};

use burn::nn::pool::MaxPool2d;
use burn::tensor::{DType, Tensor};
use dml_backend::is_cpu_device;
use dml_backend::op::{self, HostOp, OpTensor};
use dml_kernels::pool::{self as kernels, Pool2dShape};

use crate::host_conv::padding_pairs;

/// Max pooling of `x` `[B, C, H, W]` on the host, keeping the position of every output's
/// maximum once the forward pass ran; the backward pass never reads the input.
#[derive(Debug)]
struct PoolOp {
    shape: Pool2dShape,
    index: OnceLock<Vec<u32>>,
}

impl HostOp for PoolOp {
    fn forward(&self, inputs: &[OpTensor]) -> OpTensor {
        let x = &inputs[0];
        let s = &self.shape;
        let (output, index) = x
            .with_f32s(|xs| kernels::max_pool2d(s, xs))
            .expect("the pooling geometry was checked before dispatch");
        let [ho, wo] = s.output_size().expect("a checked pooling shape");
        // Each forward pass has its own operation; a second `set` would be a bug of this module.
        self.index.set(index).expect("each pooling pass has its own operation");
        OpTensor::from_f32s(output, vec![s.batch, s.channels, ho, wo], &x.device())
    }

    fn backward(&self, grad: OpTensor, _inputs: &[OpTensor], _wanted: &[bool]) -> Vec<Option<OpTensor>> {
        let s = &self.shape;
        let index = self.index.get().expect("the pooling forward pass saved its indices");
        let dx = grad
            .with_f32s(|g| kernels::max_pool2d_backward(s, index, g))
            .expect("the pooling geometry was checked in the forward pass");
        let shape = vec![s.batch, s.channels, s.height, s.width];
        vec![Some(OpTensor::from_f32s(dx, shape, &grad.device()))]
    }

    fn keeps_inputs(&self) -> bool {
        false
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
    let op = Arc::new(PoolOp {
        shape,
        index: OnceLock::new(),
    });
    op::apply(op, vec![x.into()])
}

#[cfg(test)]
mod tests {
    use burn::nn::PaddingConfig2d;
    use burn::nn::pool::MaxPool2dConfig;
    use burn::tensor::{Device, Distribution};

    use super::*;
    use crate::test_support::{assert_close, values};

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
