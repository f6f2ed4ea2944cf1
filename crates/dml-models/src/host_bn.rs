//! The backbones' batch normalisation in training mode on CPU devices, through
//! `dml_kernels::norm`.
//!
//! Burn's CPU backends compose training-mode batch norm from tensor operations that transpose
//! the activation to `[C, B·H·W]` for every reduction, forward and backward. [`batch_norm`]
//! computes the output, the batch statistics and, under autodiff, the three gradients in one
//! pass per channel, and updates the running statistics exactly as `BatchNorm::forward` does.
//! The input is read in place on flex and kept as a tensor for the backward pass, not copied.
//! Everywhere else (inference, frozen layers, GPUs, other float types) it is
//! `BatchNorm::forward`.

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
use burn::tensor::{DType, Device, Tensor, TensorData};
use dml_kernels::norm;

use crate::host_data::HostRead;
use crate::runtime::is_cpu_device;

/// The batch statistics of one forward pass, filled in by the operation: the caller needs them
/// for the running statistics and the backward pass for the gradients.
#[derive(Debug)]
pub(crate) struct BnStats {
    epsilon: f64,
    /// `[B, C, H·W]`.
    shape: [usize; 3],
    /// γ, μ and the biased σ² on the host, once the forward pass ran.
    values: OnceLock<(Vec<f32>, Vec<f32>, Vec<f32>)>,
}

impl BnStats {
    fn get(&self) -> &(Vec<f32>, Vec<f32>, Vec<f32>) {
        self.values
            .get()
            .expect("the batch-norm forward pass recorded its statistics")
    }
}

/// The extension: training-mode batch norm of `x` `[B, C, H, W]` with `gamma` and `beta`, on the
/// host; differentiable with respect to all three under autodiff. The statistics are written
/// to `stats`.
#[backend_extension(Flex, NdArray, Cube, Autodiff)]
pub(crate) trait HostBnOp: Backend {
    /// The normalised output `[B, C, H, W]`.
    fn host_batch_norm(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        stats: Arc<BnStats>,
    ) -> FloatTensor<Self>;
}

impl HostBnOp for Flex {
    fn host_batch_norm(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        stats: Arc<BnStats>,
    ) -> FloatTensor<Self> {
        forward::<Self>(x, gamma, beta, &stats)
    }
}

impl HostBnOp for NdArray {
    fn host_batch_norm(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        stats: Arc<BnStats>,
    ) -> FloatTensor<Self> {
        forward::<Self>(x, gamma, beta, &stats)
    }
}

impl HostBnOp for Cube {
    fn host_batch_norm(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        stats: Arc<BnStats>,
    ) -> FloatTensor<Self> {
        forward::<Self>(x, gamma, beta, &stats)
    }
}

/// The forward pass on the host, for any inner backend: `x` is read in place where possible.
fn forward<B: Backend + HostRead>(
    x: FloatTensor<B>,
    gamma: FloatTensor<B>,
    beta: FloatTensor<B>,
    stats: &BnStats,
) -> FloatTensor<B> {
    let device = x.device();
    let dims = x.shape();
    let gamma = B::with_f32s(gamma, <[f32]>::to_vec);
    let beta = B::with_f32s(beta, <[f32]>::to_vec);
    let out = B::with_f32s(x, |xs| {
        norm::batch_norm_train(xs, stats.shape, &gamma, &beta, stats.epsilon)
    })
    .expect("the batch-norm shapes match by construction");
    // A second forward pass with the same statistics object would be a bug of this module.
    stats
        .values
        .set((gamma, out.mean, out.variance))
        .expect("each batch-norm forward pass has its own statistics");
    B::float_from_data(TensorData::new(out.output, dims), &device)
}

#[derive(Debug)]
struct HostBnBackward;

impl<B: Backend + HostRead> Backward<B, 3> for HostBnBackward {
    /// The input (kept as a tensor, read in place again) and the statistics.
    type State = (FloatTensor<B>, Arc<BnStats>);

    fn backward(self, ops: Ops<Self::State, 3>, grads: &mut Gradients, _checkpointer: &mut Checkpointer) {
        let grad = grads.consume::<B>(&ops.node);
        let device = grad.device();
        let (x, stats) = ops.state;
        let dims = x.shape();
        let (gamma, mean, variance) = stats.get();
        let out = B::with_f32s(x, |xs| {
            B::with_f32s(grad, |g| {
                norm::batch_norm_train_backward(xs, stats.shape, gamma, mean, variance, stats.epsilon, g)
            })
        })
        .expect("the batch-norm shapes were checked in the forward pass");
        let channels = stats.shape[1];
        let [x_node, gamma_node, beta_node] = ops.parents;
        for (node, values, shape) in [
            (x_node, out.input, dims.to_vec()),
            (gamma_node, out.gamma, vec![channels]),
            (beta_node, out.beta, vec![channels]),
        ] {
            if let Some(node) = node {
                grads.register::<B>(node.id, B::float_from_data(TensorData::new(values, shape), &device));
            }
        }
    }
}

impl<B: Backend + HostBnOp + HostRead, C: CheckpointStrategy> HostBnOp for Autodiff<B, C> {
    fn host_batch_norm(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        stats: Arc<BnStats>,
    ) -> FloatTensor<Self> {
        let xp = x.primitive().clone();
        let output = B::host_batch_norm(
            xp.clone(),
            gamma.primitive().clone(),
            beta.primitive().clone(),
            stats.clone(),
        );
        match HostBnBackward
            .prepare::<C>([x.node(), gamma.node(), beta.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => prep.finish((xp, stats), output),
            OpsKind::UnTracked(prep) => prep.finish(output),
        }
    }
}

/// Whether `bn` trains on the host for an input of `dtype` with `channels` channels on `device`:
/// training mode (not frozen) on a CPU autodiff device, in `f32`, with matching channels.
pub(crate) fn trains_on_host(bn: &BatchNorm, device: &Device, dtype: DType, channels: usize) -> bool {
    device.is_autodiff()
        && bn.training.is_enabled()
        && is_cpu_device(device)
        && dtype == DType::F32
        && bn.gamma.val().dtype() == DType::F32
        && bn.gamma.dims()[0] == channels
}

/// Updates the running statistics of `bn` with a batch's `mean` and biased `variance` `[C]`,
/// exactly as `BatchNorm::forward` does: `r ← (1 − momentum)·r + momentum·s`.
pub(crate) fn update_running_statistics(bn: &BatchNorm, mean: &[f32], variance: &[f32], device: &Device) {
    let stat = |values: &[f32]| Tensor::<1>::from_data(TensorData::new(values.to_vec(), [values.len()]), device);
    let momentum = bn.momentum;
    let running_mean = bn.running_mean.value_sync().to_device(device);
    let running_var = bn.running_var.value_sync().to_device(device);
    let running_mean = running_mean
        .mul_scalar(1.0 - momentum)
        .add(stat(mean).mul_scalar(momentum));
    let running_var = running_var
        .mul_scalar(1.0 - momentum)
        .add(stat(variance).mul_scalar(momentum));
    bn.running_mean.update(running_mean.detach());
    bn.running_var.update(running_var.detach());
}

/// `bn.forward(x)` for `x` `[B, C, H, W]`: in training mode on a CPU device in `f32` through the
/// host kernels (updating the running statistics like `BatchNorm::forward`), otherwise Burn's.
pub(crate) fn batch_norm(bn: &BatchNorm, x: Tensor<4>) -> Tensor<4> {
    let device = x.device();
    let [batch, channels, height, width] = x.dims();
    if !trains_on_host(bn, &device, x.dtype(), channels) {
        return bn.forward(x);
    }
    let stats = Arc::new(BnStats {
        epsilon: bn.epsilon,
        shape: [batch, channels, height * width],
        values: OnceLock::new(),
    });
    let out = <Dispatch as HostBnOp>::host_batch_norm(
        x.into_dispatch(),
        bn.gamma.val().into_dispatch(),
        bn.beta.val().into_dispatch(),
        stats.clone(),
    );
    let (_, mean, variance) = stats.get();
    update_running_statistics(bn, mean, variance, &device);
    Tensor::from_dispatch(out)
}

#[cfg(test)]
mod tests {
    use burn::module::Param;
    use burn::nn::BatchNormConfig;
    use burn::tensor::{Device, Distribution};

    use super::*;
    use crate::host_data::test_support::{assert_close, values};

    fn close(a: &[f32], b: &[f32], what: &str) {
        assert_close(a, b, 2e-4, what);
    }

    #[test]
    fn host_batch_norm_matches_burn_with_gradients_and_running_statistics() {
        let device = Device::flex().autodiff();
        let x0: Tensor<4> = Tensor::random([4, 3, 5, 6], Distribution::Normal(0.5, 2.0), &device);
        let run = |host: bool| {
            let bn = BatchNormConfig::new(3).init(&device);
            // Non-trivial affine parameters.
            let bn = BatchNorm {
                gamma: Param::from_tensor(Tensor::from_floats([1.2, -0.7, 0.4], &device)),
                beta: Param::from_tensor(Tensor::from_floats([0.3, 0.0, -1.1], &device)),
                ..bn
            };
            let x = x0.clone().detach().require_grad();
            let y = if host {
                batch_norm(&bn, x.clone())
            } else {
                bn.forward(x.clone())
            };
            let g = Tensor::<4>::ones(y.dims(), &device).cumsum(3) / 7.0;
            let grads = (y.clone() * g).sum().backward();
            (
                values(y),
                values(x.grad(&grads).unwrap()),
                values(bn.gamma.grad(&grads).unwrap()),
                values(bn.beta.grad(&grads).unwrap()),
                values(bn.running_mean.value()),
                values(bn.running_var.value()),
            )
        };
        let (host, burn) = (run(true), run(false));
        close(&host.0, &burn.0, "output");
        close(&host.1, &burn.1, "∂x");
        close(&host.2, &burn.2, "∂γ");
        close(&host.3, &burn.3, "∂β");
        close(&host.4, &burn.4, "running mean");
        close(&host.5, &burn.5, "running variance");
    }

    #[test]
    fn inference_and_frozen_layers_use_burn() {
        let device = Device::flex();
        let bn = BatchNormConfig::new(2).init(&device);
        let x: Tensor<4> = Tensor::random([2, 2, 3, 3], Distribution::Default, &device);
        // Not an autodiff device: inference with the running statistics.
        close(&values(batch_norm(&bn, x.clone())), &values(bn.forward(x)), "inference");
    }
}
