//! The backbones' convolutions on CPU devices, through the host kernels of `dml_kernels::conv`.
//!
//! flex convolves through the `gemm` crate, one image at a time, and takes its weight gradient
//! from narrow products (a profile of the small CNN's training step: about half the step in
//! `gemm` micro-kernels running at a quarter of the core's peak). [`conv2d`] instead unfolds the
//! whole batch and multiplies with the AVX-512 kernel of `dml_kernels`; under autodiff it is one
//! node whose backward pass computes the input and weight gradients the same way. On GPUs, for
//! other float types, on CPUs without AVX-512 and for grouped, dilated or "same"-padded
//! convolutions, it is exactly `Conv2d::forward`.

use std::sync::Arc;

use burn::nn::PaddingConfig2d;
use burn::nn::conv::Conv2d;
use burn::tensor::{DType, Tensor};
use dml_backend::is_cpu_device;
use dml_backend::op::{self, HostOp, OpTensor};
use dml_kernels::conv::{self as kernels, Conv2dShape, Wanted};

/// A bias-free 2-D convolution on the host: inputs `x` `[B, C, H, W]` and `weight`
/// `[O, C, kh, kw]`, output `[B, O, Ho, Wo]`; the backward pass reads both operands again.
#[derive(Debug)]
struct ConvOp {
    shape: Conv2dShape,
}

impl HostOp for ConvOp {
    fn forward(&self, inputs: &[OpTensor]) -> OpTensor {
        let (x, weight) = (&inputs[0], &inputs[1]);
        let s = &self.shape;
        let y = x
            .with_f32s(|xs| weight.with_f32s(|ws| kernels::conv2d(s, xs, ws, None)))
            .expect("the convolution geometry was checked before dispatch");
        let [ho, wo] = s.output_size().expect("a checked convolution shape");
        OpTensor::from_f32s(y, vec![s.batch, s.out_channels, ho, wo], &x.device())
    }

    fn backward(&self, grad: OpTensor, inputs: &[OpTensor], wanted: &[bool]) -> Vec<Option<OpTensor>> {
        let (x, weight) = (&inputs[0], &inputs[1]);
        let s = &self.shape;
        let want = Wanted {
            input: wanted[0],
            weight: wanted[1],
            bias: false,
        };
        let out = x
            .with_f32s(|xs| weight.with_f32s(|ws| grad.with_f32s(|g| kernels::conv2d_backward(s, xs, ws, g, want))))
            .expect("the convolution geometry was checked in the forward pass");
        let device = grad.device();
        vec![
            out.input
                .map(|dx| OpTensor::from_f32s(dx, vec![s.batch, s.channels, s.height, s.width], &device)),
            out.weight.map(|dw| OpTensor::from_f32s(dw, weight.dims(), &device)),
        ]
    }
}

/// `conv.forward(x)` for `x` `[B, C, H, W]`: through the host kernels on CPU devices in `f32`
/// (groups 1, no dilation, explicit or no padding), otherwise through Burn's convolution.
pub(crate) fn conv2d(conv: &Conv2d, x: Tensor<4>) -> Tensor<4> {
    match host_shape(conv, &x) {
        Some(shape) => {
            let y: Tensor<4> = op::apply(Arc::new(ConvOp { shape }), vec![x.into(), conv.weight.val().into()]);
            match &conv.bias {
                Some(b) => y + b.val().reshape([1, shape.out_channels, 1, 1]),
                None => y,
            }
        }
        None => conv.forward(x),
    }
}

/// `[(top, bottom), (left, right)]` of explicit or no padding; `None` for "same" padding, whose
/// amounts Burn derives from the input size (the host kernels leave it to Burn).
pub(crate) fn padding_pairs(padding: &PaddingConfig2d) -> Option<[(usize, usize); 2]> {
    match *padding {
        PaddingConfig2d::Valid => Some([(0, 0), (0, 0)]),
        PaddingConfig2d::Explicit(top, left, bottom, right) => Some([(top, bottom), (left, right)]),
        PaddingConfig2d::Same => None,
    }
}

/// The host geometry of `conv` on `x`, when the host path applies. Anything it cannot check
/// (a channel mismatch, a kernel larger than the input) goes to Burn, which reports it.
pub(crate) fn host_shape(conv: &Conv2d, x: &Tensor<4>) -> Option<Conv2dShape> {
    let [batch, channels, height, width] = x.dims();
    let [out_channels, in_channels, kh, kw] = conv.weight.dims();
    let padding = padding_pairs(&conv.padding)?;
    let usable = is_cpu_device(&x.device())
        && x.dtype() == DType::F32
        && conv.weight.val().dtype() == DType::F32
        && conv.groups == 1
        && conv.dilation == [1, 1]
        && in_channels == channels
        && kernels::available();
    let shape = Conv2dShape {
        batch,
        channels,
        height,
        width,
        out_channels,
        kernel: [kh, kw],
        stride: conv.stride,
        padding,
    };
    (usable && batch > 0 && shape.output_size().is_ok()).then_some(shape)
}

#[cfg(test)]
mod tests {
    use burn::nn::conv::Conv2dConfig;
    use burn::tensor::{Device, Distribution};

    use super::*;
    use crate::test_support::{assert_close, values};

    fn close(a: Tensor<4>, b: Tensor<4>, what: &str) {
        assert_close(&values(a), &values(b), 1e-4, what);
    }

    #[test]
    fn host_convolution_and_its_gradients_match_burn() {
        let device = Device::flex().autodiff();
        let cases = [
            ([3, 3], [1, 1], PaddingConfig2d::Explicit(1, 1, 1, 1), false),
            ([3, 3], [2, 2], PaddingConfig2d::Explicit(1, 0, 2, 1), true),
            ([7, 7], [2, 2], PaddingConfig2d::Explicit(3, 3, 3, 3), false),
            ([1, 1], [2, 2], PaddingConfig2d::Valid, true),
        ];
        for (kernel, stride, padding, bias) in cases {
            let label = format!("kernel {kernel:?} stride {stride:?} padding {padding:?} bias {bias}");
            let conv = Conv2dConfig::new([3, 5], kernel)
                .with_stride(stride)
                .with_padding(padding.clone())
                .with_bias(bias)
                .init(&device);
            let x0: Tensor<4> = Tensor::random([2, 3, 11, 10], Distribution::Normal(0.0, 1.0), &device);
            assert!(host_shape(&conv, &x0).is_some(), "{label}: the host path applies");
            let run = |host: bool| {
                let x = x0.clone().detach().require_grad();
                let y = if host {
                    conv2d(&conv, x.clone())
                } else {
                    conv.forward(x.clone())
                };
                // A fixed, non-uniform output gradient.
                let g = Tensor::<4>::ones(y.dims(), &device).cumsum(3) / 10.0;
                let grads = (y.clone() * g).sum().backward();
                let dx = x.grad(&grads).unwrap();
                let dw = conv.weight.grad(&grads).unwrap();
                let db = conv
                    .bias
                    .as_ref()
                    .map(|b| b.grad(&grads).unwrap().reshape([1, 1, 1, 5]));
                (y, dx, dw, db)
            };
            let (y, dx, dw, db) = run(true);
            let (y0, dx0, dw0, db0) = run(false);
            close(y, y0, &format!("{label}: output"));
            close(dx, dx0, &format!("{label}: ∂x"));
            close(dw, dw0, &format!("{label}: ∂w"));
            if let (Some(a), Some(b)) = (db, db0) {
                close(a, b, &format!("{label}: ∂b"));
            }
        }
    }

    #[test]
    fn unsupported_convolutions_fall_back_to_burn() {
        let device = Device::flex();
        let x: Tensor<4> = Tensor::random([1, 4, 8, 8], Distribution::Default, &device);
        let grouped = Conv2dConfig::new([4, 4], [3, 3]).with_groups(2).init(&device);
        let dilated = Conv2dConfig::new([4, 4], [3, 3]).with_dilation([2, 2]).init(&device);
        let same = Conv2dConfig::new([4, 4], [3, 3])
            .with_padding(PaddingConfig2d::Same)
            .init(&device);
        for conv in [grouped, dilated, same] {
            assert!(host_shape(&conv, &x).is_none());
            close(conv2d(&conv, x.clone()), conv.forward(x.clone()), "fallback");
        }
        // f64 inputs too.
        let conv = Conv2dConfig::new([4, 2], [3, 3]).init(&device);
        let x64 = x.cast(DType::F64);
        assert!(host_shape(&conv, &x64).is_none());
    }
}
