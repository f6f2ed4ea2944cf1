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

use std::sync::{Arc, OnceLock};

use burn::nn::BatchNorm;
use burn::tensor::{DType, Device, Tensor, TensorData};
use dml_backend::is_cpu_device;
use dml_backend::op::{self, HostOp, OpTensor};
use dml_kernels::norm;

/// Training-mode batch norm of `x` `[B, C, H, W]` with `gamma` and `beta` `[C]` on the host, as
/// one operation; the batch statistics it computes are kept for the caller (the running
/// statistics) and for the backward pass.
#[derive(Debug)]
struct BnOp {
    epsilon: f64,
    /// `[B, C, H·W]`.
    shape: [usize; 3],
    /// γ, μ and the biased σ² on the host, once the forward pass ran.
    stats: OnceLock<(Vec<f32>, Vec<f32>, Vec<f32>)>,
}

impl BnOp {
    fn stats(&self) -> &(Vec<f32>, Vec<f32>, Vec<f32>) {
        self.stats
            .get()
            .expect("the batch-norm forward pass recorded its statistics")
    }
}

impl HostOp for BnOp {
    fn forward(&self, inputs: &[OpTensor]) -> OpTensor {
        let (x, gamma, beta) = (&inputs[0], &inputs[1], &inputs[2]);
        let gamma = gamma.with_f32s(<[f32]>::to_vec);
        let beta = beta.with_f32s(<[f32]>::to_vec);
        let out = x
            .with_f32s(|xs| norm::batch_norm_train(xs, self.shape, &gamma, &beta, self.epsilon))
            .expect("the batch-norm shapes match by construction");
        // A second forward pass with the same operation would be a bug of this module.
        self.stats
            .set((gamma, out.mean, out.variance))
            .expect("each batch-norm forward pass has its own operation");
        OpTensor::from_f32s(out.output, x.dims(), &x.device())
    }

    fn backward(&self, grad: OpTensor, inputs: &[OpTensor], _wanted: &[bool]) -> Vec<Option<OpTensor>> {
        let x = &inputs[0];
        let (gamma, mean, variance) = self.stats();
        let out = x
            .with_f32s(|xs| {
                grad.with_f32s(|g| {
                    norm::batch_norm_train_backward(xs, self.shape, gamma, mean, variance, self.epsilon, g)
                })
            })
            .expect("the batch-norm shapes were checked in the forward pass");
        let device = grad.device();
        let channels = self.shape[1];
        vec![
            Some(OpTensor::from_f32s(out.input, x.dims(), &device)),
            Some(OpTensor::from_f32s(out.gamma, vec![channels], &device)),
            Some(OpTensor::from_f32s(out.beta, vec![channels], &device)),
        ]
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
    let op = Arc::new(BnOp {
        epsilon: bn.epsilon,
        shape: [batch, channels, height * width],
        stats: OnceLock::new(),
    });
    let out: Tensor<4> = op::apply(op.clone(), vec![x.into(), bn.gamma.val().into(), bn.beta.val().into()]);
    let (_, mean, variance) = op.stats();
    update_running_statistics(bn, mean, variance, &device);
    out
}

#[cfg(test)]
mod tests {
    use burn::module::Param;
    use burn::nn::BatchNormConfig;
    use burn::tensor::{Device, Distribution};

    use super::*;
    use crate::test_support::{assert_close, values};

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
