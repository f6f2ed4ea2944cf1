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
use burn::nn::BatchNorm;
use burn::nn::conv::Conv2d;
use burn::tensor::activation::relu;
use burn::tensor::{Tensor, TensorData};
use dml_kernels::conv::{Conv2dShape, Wanted};
use dml_kernels::conv_bn::{self as kernels, BnParams, ConvBnSaved};

use crate::host_bn::{batch_norm, trains_on_host, update_running_statistics};
use crate::host_conv::{conv2d, host_shape};
use crate::host_data::HostRead;

/// What the forward pass leaves for the caller (the batch statistics, for the running ones) and
/// for the backward pass (γ, β and the convolution's output before normalisation).
#[derive(Debug)]
pub(crate) struct BlockState {
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

impl BlockState {
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

/// The extension: a bias-free convolution of `x` `[B, C, H, W]` with `weight` `[O, C, kh, kw]`,
/// training-mode batch norm with `gamma` and `beta` `[O]`, and ReLU when the state says so, on
/// the host; differentiable with respect to all four under autodiff.
#[backend_extension(Flex, NdArray, Cube, Autodiff)]
pub(crate) trait HostConvBnOp: Backend {
    /// The block's output `[B, O, Ho, Wo]`.
    fn host_conv_bn(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        state: Arc<BlockState>,
    ) -> FloatTensor<Self>;
}

impl HostConvBnOp for Flex {
    fn host_conv_bn(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        state: Arc<BlockState>,
    ) -> FloatTensor<Self> {
        forward::<Self>(x, weight, gamma, beta, &state)
    }
}

impl HostConvBnOp for NdArray {
    fn host_conv_bn(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        state: Arc<BlockState>,
    ) -> FloatTensor<Self> {
        forward::<Self>(x, weight, gamma, beta, &state)
    }
}

impl HostConvBnOp for Cube {
    fn host_conv_bn(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        state: Arc<BlockState>,
    ) -> FloatTensor<Self> {
        forward::<Self>(x, weight, gamma, beta, &state)
    }
}

/// The forward pass on the host, for any inner backend.
fn forward<B: Backend + HostRead>(
    x: FloatTensor<B>,
    weight: FloatTensor<B>,
    gamma: FloatTensor<B>,
    beta: FloatTensor<B>,
    state: &BlockState,
) -> FloatTensor<B> {
    let device = x.device();
    let gamma = B::with_f32s(gamma, <[f32]>::to_vec);
    let beta = B::with_f32s(beta, <[f32]>::to_vec);
    let bn = BnParams {
        gamma: &gamma,
        beta: &beta,
        epsilon: state.epsilon,
    };
    let out = B::with_f32s(x, |xs| {
        B::with_f32s(weight, |ws| {
            kernels::conv_bn_train(&state.shape, xs, ws, bn, state.relu)
        })
    })
    .expect("the block's geometry was checked before dispatch");
    let s = &state.shape;
    let [ho, wo] = s.output_size().expect("a checked convolution shape");
    let output = B::float_from_data(TensorData::new(out.output, [s.batch, s.out_channels, ho, wo]), &device);
    // A second forward pass with the same state would be a bug of this module.
    state
        .saved
        .set(Saved {
            gamma,
            beta,
            block: out.saved,
        })
        .expect("each block forward pass has its own state");
    output
}

#[derive(Debug)]
struct HostConvBnBackward;

impl<B: Backend + HostRead> Backward<B, 4> for HostConvBnBackward {
    /// The input and the weight (device tensors, read in place again) and the block's state.
    type State = (FloatTensor<B>, FloatTensor<B>, Arc<BlockState>);

    fn backward(self, ops: Ops<Self::State, 4>, grads: &mut Gradients, _checkpointer: &mut Checkpointer) {
        let grad = grads.consume::<B>(&ops.node);
        let device = grad.device();
        let (x, weight, state) = ops.state;
        let [x_node, w_node, gamma_node, beta_node] = ops.parents;
        let s = state.shape;
        let saved = state.saved();
        let wanted = Wanted {
            input: x_node.is_some(),
            weight: w_node.is_some(),
            bias: false,
        };
        let out = B::with_f32s(x, |xs| {
            B::with_f32s(weight, |ws| {
                B::with_f32s(grad, |g| {
                    kernels::conv_bn_train_backward(&s, xs, ws, &saved.block, state.params(), state.relu, g, wanted)
                })
            })
        })
        .expect("the block's geometry was checked in the forward pass");
        let [kh, kw] = s.kernel;
        let o = s.out_channels;
        let results = [
            (x_node, out.input, vec![s.batch, s.channels, s.height, s.width]),
            (w_node, out.weight, vec![o, s.channels, kh, kw]),
            (gamma_node, Some(out.gamma), vec![o]),
            (beta_node, Some(out.beta), vec![o]),
        ];
        for (node, values, shape) in results {
            if let (Some(node), Some(values)) = (node, values) {
                grads.register::<B>(node.id, B::float_from_data(TensorData::new(values, shape), &device));
            }
        }
    }
}

impl<B: Backend + HostConvBnOp + HostRead, C: CheckpointStrategy> HostConvBnOp for Autodiff<B, C> {
    fn host_conv_bn(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        state: Arc<BlockState>,
    ) -> FloatTensor<Self> {
        let (xp, wp) = (x.primitive().clone(), weight.primitive().clone());
        let output = B::host_conv_bn(
            xp.clone(),
            wp.clone(),
            gamma.primitive().clone(),
            beta.primitive().clone(),
            state.clone(),
        );
        match HostConvBnBackward
            .prepare::<C>([x.node(), weight.node(), gamma.node(), beta.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => prep.finish((xp, wp, state), output),
            OpsKind::UnTracked(prep) => prep.finish(output),
        }
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
    let state = Arc::new(BlockState {
        shape,
        epsilon: bn.epsilon,
        relu: relu_after,
        saved: OnceLock::new(),
    });
    let out = <Dispatch as HostConvBnOp>::host_conv_bn(
        x.into_dispatch(),
        conv.weight.val().into_dispatch(),
        bn.gamma.val().into_dispatch(),
        bn.beta.val().into_dispatch(),
        state.clone(),
    );
    let saved = state.saved();
    // A convolution bias shifts every value of its channel by the same amount, so training-mode
    // batch norm removes it from the output, and its gradient (the sum of ∂z over the channel) is
    // zero; the batch mean that feeds the running mean, used in inference, does include it.
    let mut mean = saved.block.mean.clone();
    if let Some(bias) = &conv.bias {
        let bias: Vec<f32> = bias.val().into_data().convert::<f32>().to_vec().expect("f32 values");
        mean.iter_mut().zip(&bias).for_each(|(m, b)| *m += b);
    }
    update_running_statistics(bn, &mean, &saved.block.variance, &device);
    Tensor::from_dispatch(out)
}

#[cfg(test)]
mod tests {
    use burn::module::Param;
    use burn::nn::conv::Conv2dConfig;
    use burn::nn::{BatchNormConfig, PaddingConfig2d};
    use burn::tensor::{Device, Distribution};

    use super::*;
    use crate::host_data::test_support::{assert_close, values};

    /// The fused block against Burn's convolution, batch norm and ReLU run one after another:
    /// output, the four gradients and both running statistics.
    #[test]
    fn fused_block_matches_burn_with_gradients_and_running_statistics() {
        let device = Device::flex().autodiff();
        let x0: Tensor<4> = Tensor::random([3, 4, 9, 8], Distribution::Normal(0.3, 1.5), &device);
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
        let bn = BatchNormConfig::new(3).init(&device);
        let x: Tensor<4> = Tensor::random([2, 2, 5, 5], Distribution::Default, &device);
        // Not an autodiff device: inference with the running statistics.
        let want = values(relu(bn.forward(conv.forward(x.clone()))));
        assert_close(&values(conv_bn(&conv, &bn, x, true)), &want, 1e-5, "inference");
        // A biased convolution in training (BN-Inception's): batch norm cancels the bias in the
        // output, but the running mean includes it.
        let device = Device::flex().autodiff();
        let conv = Conv2dConfig::new([2, 3], [3, 3]).init(&device);
        let conv = Conv2d {
            bias: Some(Param::from_tensor(Tensor::from_floats([0.5, -2.0, 1.0], &device))),
            ..conv
        };
        let (host_bn, burn_bn) = (
            BatchNormConfig::new(3).init(&device),
            BatchNormConfig::new(3).init(&device),
        );
        let x: Tensor<4> = Tensor::random([2, 2, 5, 5], Distribution::Default, &device);
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
