//! The backbones' conv-BN(-ReLU) blocks in training mode on CPU devices, as one operation
//! through `dml_kernels::conv_bn`.
//!
//! Run as [`crate::host_conv`], [`crate::host_bn`] and Burn's ReLU, a block moves its activation
//! through memory several times only to reorder, normalise and rectify it (a small-CNN training
//! step spent about a third of its time there). [`conv_bn`] computes the block's output, its
//! batch statistics and, under autodiff, the gradients of the input, the weight, γ and β in one
//! node, and updates the running statistics exactly as `BatchNorm::forward` does. Where either
//! half cannot run on the host (inference, frozen batch norm, GPUs, other float types, a conv
//! unsupported geometry) it is the two operations one after another.

use std::sync::{Arc, OnceLock};

use burn::nn::BatchNorm;
use burn::nn::conv::Conv2d;
use burn::tensor::Tensor;
use burn::tensor::activation::relu;
use dml_backend::op::{self, HostOp, OpTensor};
use dml_kernels::conv::{Conv2dShape, Wanted};
use dml_kernels::conv_bn::{self as kernels, BnParams, ConvBnSaved};

use crate::host_bn::{batch_norm, trains_on_host, update_running_statistics};
use crate::host_conv::{conv2d, host_shape};

/// A bias-free convolution of `x` `[B, C, H, W]` with `weight` `[O, C, kh, kw]`, training-mode
/// batch norm with `gamma` and `beta` `[O]`, and ReLU when `relu`, on the host as one operation
/// with output `[B, O, Ho, Wo]`. What the forward pass computes is kept for the caller (the batch
/// statistics, for the running ones) and for the backward pass (γ, β and the convolution's
/// output before normalisation); the backward pass reads the input and the weight again.
#[derive(Debug)]
struct ConvBnOp {
    shape: Conv2dShape,
    epsilon: f64,
    relu: bool,
    saved: OnceLock<Saved>,
}

#[derive(Debug)]
struct Saved {
    gamma: Vec<f32>,
    beta: Vec<f32>,
    /// The convolution's output, batch statistics and unfolded input.
    block: ConvBnSaved,
}

impl ConvBnOp {
    fn saved(&self) -> &Saved {
        self.saved.get().expect("the block's forward pass saved its values")
    }

    fn params(&self) -> BnParams<'_> {
        let saved = self.saved();
        BnParams {
            gamma: &saved.gamma,
            beta: &saved.beta,
            epsilon: self.epsilon,
        }
    }
}

impl HostOp for ConvBnOp {
    fn forward(&self, inputs: &[OpTensor]) -> OpTensor {
        let (x, weight) = (&inputs[0], &inputs[1]);
        let gamma = inputs[2].with_f32s(<[f32]>::to_vec);
        let beta = inputs[3].with_f32s(<[f32]>::to_vec);
        let bn = BnParams {
            gamma: &gamma,
            beta: &beta,
            epsilon: self.epsilon,
        };
        let s = &self.shape;
        let out = x
            .with_f32s(|xs| weight.with_f32s(|ws| kernels::conv_bn_train(s, xs, ws, bn, self.relu)))
            .expect("the block's geometry was checked before dispatch");
        let [ho, wo] = s.output_size().expect("a checked convolution shape");
        // A second forward pass with the same operation would be a bug of this module.
        self.saved
            .set(Saved {
                gamma,
                beta,
                block: out.saved,
            })
            .expect("each block forward pass has its own operation");
        OpTensor::from_f32s(out.output, vec![s.batch, s.out_channels, ho, wo], &x.device())
    }

    fn backward(&self, grad: OpTensor, inputs: &[OpTensor], wanted: &[bool]) -> Vec<Option<OpTensor>> {
        let (x, weight) = (&inputs[0], &inputs[1]);
        let s = &self.shape;
        let saved = self.saved();
        let want = Wanted {
            input: wanted[0],
            weight: wanted[1],
            bias: false,
        };
        let out = x
            .with_f32s(|xs| {
                weight.with_f32s(|ws| {
                    grad.with_f32s(|g| {
                        kernels::conv_bn_train_backward(s, xs, ws, &saved.block, self.params(), self.relu, g, want)
                    })
                })
            })
            .expect("the block's geometry was checked in the forward pass");
        let device = grad.device();
        let [kh, kw] = s.kernel;
        let o = s.out_channels;
        vec![
            out.input
                .map(|v| OpTensor::from_f32s(v, vec![s.batch, s.channels, s.height, s.width], &device)),
            out.weight
                .map(|v| OpTensor::from_f32s(v, vec![o, s.channels, kh, kw], &device)),
            Some(OpTensor::from_f32s(out.gamma, vec![o], &device)),
            Some(OpTensor::from_f32s(out.beta, vec![o], &device)),
        ]
    }
}

/// `bn.forward(conv.forward(x))`, rectified when `relu`, for `x` `[B, C, H, W]`: one host
/// operation when both halves train on the host (a convolution the host kernels support, batch
/// norm in training mode on a CPU autodiff device, `f32`), updating the running statistics like
/// `BatchNorm::forward`; otherwise the two operations one after another.
pub(crate) fn conv_bn(conv: &Conv2d, bn: &BatchNorm, x: Tensor<4>, relu_after: bool) -> Tensor<4> {
    let device = x.device();
    let shape = host_shape(conv, &x).filter(|s| trains_on_host(bn, &device, x.dtype(), s.out_channels));
    let Some(shape) = shape else {
        let y = batch_norm(bn, conv2d(conv, x));
        return if relu_after { relu(y) } else { y };
    };
    let op = Arc::new(ConvBnOp {
        shape,
        epsilon: bn.epsilon,
        relu: relu_after,
        saved: OnceLock::new(),
    });
    let inputs = vec![
        x.into(),
        conv.weight.val().into(),
        bn.gamma.val().into(),
        bn.beta.val().into(),
    ];
    let out: Tensor<4> = op::apply(op.clone(), inputs);
    let saved = op.saved();
    // A convolution bias shifts every value of its channel by the same amount, so training-mode
    // batch norm removes it from the output, and its gradient (the sum of ∂z over the channel) is
    // zero; the batch mean that feeds the running mean, used in inference, does include it.
    let mut mean = saved.block.mean.clone();
    if let Some(bias) = &conv.bias {
        let bias: Vec<f32> = bias
            .val()
            .into_data()
            .convert::<f32>()
            .try_to_vec::<f32>()
            .expect("f32 values");
        mean.iter_mut().zip(&bias).for_each(|(m, b)| *m += b);
    }
    update_running_statistics(bn, &mean, &saved.block.variance, &device);
    out
}

#[cfg(test)]
mod tests {
    use burn::module::Param;
    use burn::nn::conv::Conv2dConfig;
    use burn::nn::{BatchNormConfig, PaddingConfig2d};
    use burn::tensor::Device;

    use super::*;
    use crate::test_support::{assert_close, spread, values};

    /// The fused block against Burn's convolution, batch norm and ReLU run one after another:
    /// output, the four gradients and both running statistics.
    #[test]
    fn fused_block_matches_burn_with_gradients_and_running_statistics() {
        let device = Device::flex().autodiff();
        let x0: Tensor<4> = spread([3, 4, 9, 8], 1, 0.3, 1.5, &device);
        for (stride, padding, relu_after) in [
            ([1, 1], PaddingConfig2d::Explicit(1, 1, 1, 1), true),
            ([2, 2], PaddingConfig2d::Explicit(1, 0, 1, 0), false),
        ] {
            let label = format!("stride {stride:?} relu {relu_after}");
            let run = |host: bool| {
                let conv = Conv2dConfig::new([4, 6], [3, 3])
                    .with_stride(stride)
                    .with_padding(padding.clone())
                    .with_bias(false)
                    .init(&device);
                let conv = Conv2d {
                    weight: Param::from_tensor(Tensor::<4>::ones([6, 4, 3, 3], &device).cumsum(3).sin() * 0.4),
                    ..conv
                };
                let bn = BatchNormConfig::new(6).init(&device);
                let bn = BatchNorm {
                    gamma: Param::from_tensor(Tensor::from_floats([1.2, -0.7, 0.4, 1.0, 0.9, 2.0], &device)),
                    beta: Param::from_tensor(Tensor::from_floats([0.3, 0.0, -1.1, 0.5, -0.2, 0.1], &device)),
                    ..bn
                };
                let x = x0.clone().detach().require_grad();
                let y = if host {
                    assert!(host_shape(&conv, &x).is_some(), "{label}: the host path applies");
                    conv_bn(&conv, &bn, x.clone(), relu_after)
                } else {
                    let y = bn.forward(conv.forward(x.clone()));
                    if relu_after { relu(y) } else { y }
                };
                let g = Tensor::<4>::ones(y.dims(), &device).cumsum(3) / 7.0;
                let grads = (y.clone() * g).sum().backward();
                [
                    values(y),
                    values(x.grad(&grads).unwrap()),
                    values(conv.weight.grad(&grads).unwrap()),
                    values(bn.gamma.grad(&grads).unwrap()),
                    values(bn.beta.grad(&grads).unwrap()),
                    values(bn.running_mean.value()),
                    values(bn.running_var.value()),
                ]
            };
            let (host, burn) = (run(true), run(false));
            let names = ["output", "∂x", "∂W", "∂γ", "∂β", "running mean", "running variance"];
            for ((h, b), name) in host.iter().zip(&burn).zip(names) {
                // f32 summation order differs (whole-channel sums against Burn's reductions).
                assert_close(h, b, 2e-4, &format!("{label}: {name}"));
            }
        }
    }

    #[test]
    fn inference_and_biased_blocks_match_burn() {
        let device = Device::flex();
        let conv = Conv2dConfig::new([2, 3], [3, 3]).with_bias(false).init(&device);
        let conv = Conv2d {
            weight: Param::from_tensor(spread([3, 2, 3, 3], 2, 0.0, 0.25, &device)),
            ..conv
        };
        let bn = BatchNormConfig::new(3).init(&device);
        let x: Tensor<4> = spread([2, 2, 5, 5], 3, 0.5, 0.29, &device);
        // Not an autodiff device: inference with the running statistics.
        let want = values(relu(bn.forward(conv.forward(x.clone()))));
        assert_close(&values(conv_bn(&conv, &bn, x, true)), &want, 1e-5, "inference");
        // A biased convolution in training (BN-Inception's): batch norm cancels the bias in the
        // output, but the running mean includes it.
        let device = Device::flex().autodiff();
        let conv = Conv2dConfig::new([2, 3], [3, 3]).init(&device);
        let conv = Conv2d {
            weight: Param::from_tensor(spread([3, 2, 3, 3], 4, 0.0, 0.25, &device)),
            bias: Some(Param::from_tensor(Tensor::from_floats([0.5, -2.0, 1.0], &device))),
            ..conv
        };
        let (host_bn, burn_bn) = (
            BatchNormConfig::new(3).init(&device),
            BatchNormConfig::new(3).init(&device),
        );
        let x: Tensor<4> = spread([2, 2, 5, 5], 5, 0.5, 0.29, &device);
        assert!(host_shape(&conv, &x).is_some(), "the host path applies");
        let want = values(burn_bn.forward(conv.forward(x.clone())));
        assert_close(
            &values(conv_bn(&conv, &host_bn, x, false)),
            &want,
            2e-4,
            "biased convolution",
        );
        for (host, burn, what) in [
            (
                host_bn.running_mean.value(),
                burn_bn.running_mean.value(),
                "running mean",
            ),
            (
                host_bn.running_var.value(),
                burn_bn.running_var.value(),
                "running variance",
            ),
        ] {
            assert_close(
                &values(host),
                &values(burn),
                1e-5,
                &format!("biased convolution: {what}"),
            );
        }
    }
}
