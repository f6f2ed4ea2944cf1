//! The backbones' batch normalisation in training mode on CPU devices, through
//! `dml_kernels::norm`.
//!
//! Burn's CPU backends compose training-mode batch norm from tensor operations that transpose
//! the activation to `[C, B·H·W]` for every reduction, forward and backward. [`batch_norm`]
//! computes the output, the batch statistics and, under autodiff, the three gradients in one
//! pass per channel, and updates the running statistics exactly as `BatchNorm::forward` does.
//! Everywhere else (inference, frozen layers, GPUs, other float types) it is
//! `BatchNorm::forward`.

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
use burn::nn::BatchNorm;
use burn::tensor::{DType, Tensor, TensorData};
use dml_kernels::norm;

use crate::host_data::HostRead;
use crate::runtime::is_cpu_device;

/// What the backward pass needs from the forward pass.
#[derive(Debug)]
pub(crate) struct BnSaved {
    /// The input's values (`f32`).
    x: TensorData,
    /// `[B, C, H·W]`.
    shape: [usize; 3],
    gamma: Vec<f32>,
    mean: Vec<f32>,
    variance: Vec<f32>,
    epsilon: f64,
}

/// The extension: `output` passes through; under autodiff it is differentiable with respect to
/// `x`, `gamma` and `beta` through the saved forward pass.
#[backend_extension(Flex, NdArray, Cube, Autodiff)]
pub(crate) trait HostBnOp: Backend {
    /// Returns `output` (the host batch norm of `x` with `gamma` and `beta`, see `saved`).
    fn attach_batch_norm(
        output: FloatTensor<Self>,
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        saved: Arc<BnSaved>,
    ) -> FloatTensor<Self> {
        let _ = (x, gamma, beta, saved);
        output
    }
}

impl HostBnOp for Flex {}
impl HostBnOp for NdArray {}
impl HostBnOp for Cube {}

#[derive(Debug)]
struct HostBnBackward;

impl<B: Backend + HostRead> Backward<B, 3> for HostBnBackward {
    type State = (Arc<BnSaved>, [usize; 4]);

    fn backward(self, ops: Ops<Self::State, 3>, grads: &mut Gradients, _checkpointer: &mut Checkpointer) {
        let grad = grads.consume::<B>(&ops.node);
        let device = grad.device();
        let (saved, dims) = ops.state;
        let out = B::with_f32s(grad, |g| {
            norm::batch_norm_train_backward(
                &dml_kernels::f32s_in_ne_bytes(saved.x.as_bytes()),
                saved.shape,
                &saved.gamma,
                &saved.mean,
                &saved.variance,
                saved.epsilon,
                g,
            )
        })
        .expect("the batch-norm shapes were checked in the forward pass");
        let channels = saved.shape[1];
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
    fn attach_batch_norm(
        output: FloatTensor<Self>,
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        saved: Arc<BnSaved>,
    ) -> FloatTensor<Self> {
        let dims: [usize; 4] = x.shape().dims::<4>();
        let output = output.primitive().clone();
        match HostBnBackward
            .prepare::<C>([x.node(), gamma.node(), beta.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => prep.finish((saved, dims), output),
            OpsKind::UnTracked(prep) => prep.finish(output),
        }
    }
}

/// `bn.forward(x)` for `x` `[B, C, H, W]`: in training mode on a CPU device in `f32` through the
/// host kernels (updating the running statistics like `BatchNorm::forward`), otherwise Burn's.
pub(crate) fn batch_norm(bn: &BatchNorm, x: Tensor<4>) -> Tensor<4> {
    let device = x.device();
    let usable = device.is_autodiff()
        && bn.training.is_enabled()
        && is_cpu_device(&device)
        && x.dtype() == DType::F32
        && bn.gamma.val().dtype() == DType::F32
        && bn.gamma.dims()[0] == x.dims()[1];
    if !usable {
        return bn.forward(x);
    }
    let [batch, channels, height, width] = x.dims();
    let shape = [batch, channels, height * width];
    let host =
        |t: Tensor<1>| -> Vec<f32> { dml_kernels::f32s_in_ne_bytes(t.detach().into_data().as_bytes()).into_owned() };
    let (gamma, beta) = (bn.gamma.val(), bn.beta.val());
    let (gamma_host, beta_host) = (host(gamma.clone()), host(beta.clone()));
    let data = x.clone().detach().into_data();
    let forward = norm::batch_norm_train(
        &dml_kernels::f32s_in_ne_bytes(data.as_bytes()),
        shape,
        &gamma_host,
        &beta_host,
        bn.epsilon,
    )
    .expect("the batch-norm shapes match by construction");
    // The running statistics, exactly as `BatchNorm::forward` updates them (biased variance).
    let stat = |values: &[f32]| Tensor::<1>::from_data(TensorData::new(values.to_vec(), [channels]), &device);
    let momentum = bn.momentum;
    let running_mean = bn.running_mean.value_sync().to_device(&device);
    let running_var = bn.running_var.value_sync().to_device(&device);
    let running_mean = running_mean
        .mul_scalar(1.0 - momentum)
        .add(stat(&forward.mean).mul_scalar(momentum));
    let running_var = running_var
        .mul_scalar(1.0 - momentum)
        .add(stat(&forward.variance).mul_scalar(momentum));
    bn.running_mean.update(running_mean.detach());
    bn.running_var.update(running_var.detach());
    let output = Tensor::<4>::from_data(
        TensorData::new(forward.output, [batch, channels, height, width]),
        &device,
    );
    let saved = Arc::new(BnSaved {
        x: data,
        shape,
        gamma: gamma_host,
        mean: forward.mean,
        variance: forward.variance,
        epsilon: bn.epsilon,
    });
    let out = <Dispatch as HostBnOp>::attach_batch_norm(
        output.into_dispatch(),
        x.into_dispatch(),
        gamma.into_dispatch(),
        beta.into_dispatch(),
        saved,
    );
    Tensor::from_dispatch(out)
}

#[cfg(test)]
mod tests {
    use burn::module::Param;
    use burn::nn::BatchNormConfig;
    use burn::tensor::{Device, Distribution};

    use super::*;

    fn values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
        t.into_data().to_vec().unwrap()
    }

    fn close(a: &[f32], b: &[f32], what: &str) {
        assert_eq!(a.len(), b.len(), "{what}: sizes");
        let scale = b.iter().fold(0.0f32, |m, v| m.max(v.abs())).max(1e-6);
        for (i, (p, q)) in a.iter().zip(b).enumerate() {
            assert!((p - q).abs() <= 2e-4 * scale, "{what}[{i}]: {p} vs {q}");
        }
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
