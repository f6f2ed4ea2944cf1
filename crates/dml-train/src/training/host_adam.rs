//! Adam whose update runs in one host pass on CPU tensors ([`dml_kernels::adam`]).
//!
//! On the flex backend Burn's `Adam` makes about a dozen passes over every parameter, its
//! gradient and both moments (55 ms of a 0.55 s ResNet-18 step on the development machine);
//! [`HostAdam`] reads each value once, with Burn's arithmetic operation for operation, so the
//! result is Burn's to the bit. Its state is Burn's [`AdamState`], so checkpoints written by
//! either optimiser resume with the other. Tensors elsewhere (wgpu, cuda, ndarray, other
//! dtypes) take Burn's `Adam` unchanged.

use burn::optim::{AdamConfig, AdamState, AdaptiveMomentumState, LearningRate, Optimizer};
use burn::tensor::{Device, Tensor, TensorData};
use dml_backend::host::with_flex_f32s;
use dml_kernels::adam::{AdamStep, adam_step};

/// Adam (Kingma & Ba 2015, Algorithm 1) with an optional L2 penalty added to the gradient, as
/// Burn's `AdamConfig` builds it; see the module documentation for when it runs on the host.
#[derive(Clone)]
pub struct HostAdam {
    beta_1: f32,
    beta_2: f32,
    epsilon: f32,
    weight_decay: Option<f32>,
    /// Burn's optimiser with the same settings, for the tensors the host pass cannot read.
    fallback: burn::optim::Adam,
}

impl HostAdam {
    /// Adam with PyTorch's defaults (`β = (0.9, 0.999)`) and the given `ε` and L2 penalty
    /// (`None`: no penalty).
    pub fn new(epsilon: f32, weight_decay: Option<f32>) -> Self {
        let (beta_1, beta_2) = (0.9, 0.999);
        let config = AdamConfig::new()
            .with_beta_1(beta_1)
            .with_beta_2(beta_2)
            .with_epsilon(epsilon)
            .with_weight_decay(weight_decay.map(burn::optim::decay::WeightDecayConfig::new));
        Self {
            beta_1,
            beta_2,
            epsilon,
            weight_decay,
            fallback: config.build(),
        }
    }

    /// The update in one host pass, when the parameter, its gradient and the moments are all
    /// contiguous `f32` flex tensors; `None` (nothing computed) otherwise.
    fn host_step<const D: usize>(
        &self,
        lr: LearningRate,
        tensor: &Tensor<D>,
        grad: &Tensor<D>,
        state: Option<&AdamState<D>>,
    ) -> Option<(Tensor<D>, AdamState<D>)> {
        let momentum = state.map(|s| &s.momentum);
        // This optimiser never keeps the AMSGrad maximum; a state that holds one came from
        // elsewhere and takes Burn's path, which knows it.
        if momentum.is_some_and(|m| m.max_moment_2.is_some()) {
            return None;
        }
        let time = momentum.map_or(1, |m| m.time + 1);
        let step = AdamStep {
            beta_1: self.beta_1,
            beta_2: self.beta_2,
            epsilon: self.epsilon,
            weight_decay: self.weight_decay,
            lr: lr as f32,
            time: i32::try_from(time).unwrap_or(i32::MAX),
        };
        let (device, shape) = (tensor.device(), tensor.shape().to_vec());
        let dispatched = |t: &Tensor<D>| t.clone().into_dispatch();
        let (p, g) = (dispatched(tensor), dispatched(grad));
        let [p_out, m_out, v_out] = match momentum {
            Some(m) => {
                let (m1, m2) = (dispatched(&m.moment_1), dispatched(&m.moment_2));
                with_flex_f32s([&p, &g, &m1, &m2], |[p, g, m1, m2]| {
                    adam_step(&step, p, g, Some((m1, m2)))
                })?
            }
            None => with_flex_f32s([&p, &g], |[p, g]| adam_step(&step, p, g, None))?,
        };
        let to_tensor = |values: Vec<f32>| Tensor::<D>::from_data(TensorData::new(values, shape.clone()), &device);
        let momentum = AdaptiveMomentumState::new(time, to_tensor(m_out), to_tensor(v_out));
        Some((to_tensor(p_out), AdamState::new(momentum)))
    }
}

impl Optimizer for HostAdam {
    type State<const D: usize> = AdamState<D>;

    fn step<const D: usize>(
        &self,
        lr: LearningRate,
        tensor: Tensor<D>,
        grad: Tensor<D>,
        state: Option<Self::State<D>>,
    ) -> (Tensor<D>, Option<Self::State<D>>) {
        match self.host_step(lr, &tensor, &grad, state.as_ref()) {
            Some((tensor, state)) => (tensor, Some(state)),
            None => self.fallback.step(lr, tensor, grad, state),
        }
    }

    fn to_device<const D: usize>(state: Self::State<D>, device: &Device) -> Self::State<D> {
        <burn::optim::Adam as Optimizer>::to_device(state, device)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::module::{Module, Param};
    use burn::optim::{GradientsParams, ModuleOptimizer};

    #[derive(Module, Debug)]
    struct Two {
        w: Param<Tensor<2>>,
        b: Param<Tensor<1>>,
    }

    /// A model with fixed values (not drawn: tests run in parallel and share the device's
    /// random generator, so two draws of one seed could differ).
    fn model(device: &Device) -> Two {
        let values =
            |n: usize, k: usize| -> Vec<f32> { (0..n).map(|i| ((i * k % 211) as f32 - 105.0) / 60.0).collect() };
        Two {
            w: Param::from_tensor(Tensor::<1>::from_floats(values(70 * 300, 37).as_slice(), device).reshape([70, 300])),
            b: Param::from_tensor(Tensor::from_floats(values(70, 53).as_slice(), device)),
        }
    }

    /// Five steps of a quadratic-plus-sine loss with `optim`, returning the final values.
    fn train(mut optim: ModuleOptimizer, device: &Device) -> (Vec<f32>, Vec<f32>, ModuleOptimizer) {
        let ad = device.clone().autodiff();
        let mut m = model(&ad);
        for step in 0..5 {
            let loss = (m.w.val().sin() * (step as f32 + 1.0)).sum() + m.b.val().powf_scalar(2.0).sum();
            let grads = GradientsParams::from_grads(loss.backward(), &m);
            m = optim.step(1e-2, m, grads);
        }
        let w = m.w.val().into_data().try_to_vec::<f32>().unwrap();
        let b = m.b.val().into_data().try_to_vec::<f32>().unwrap();
        (w, b, optim)
    }

    #[test]
    fn five_steps_equal_burns_adam_to_the_bit() {
        // The flex device (the host pass) against Burn's Adam on the same device, with and
        // without weight decay.
        let device = Device::flex();
        for decay in [None, Some(0.05f32)] {
            let host = ModuleOptimizer::from(HostAdam::new(1e-8, decay));
            let burns = AdamConfig::new()
                .with_epsilon(1e-8)
                .with_weight_decay(decay.map(burn::optim::decay::WeightDecayConfig::new))
                .init();
            let (w1, b1, _) = train(host, &device);
            let (w2, b2, _) = train(burns, &device);
            for (name, x, y) in [("weights", &w1, &w2), ("biases", &b1, &b2)] {
                let first = x.iter().zip(y.iter()).position(|(a, b)| a != b);
                assert!(
                    first.is_none(),
                    "{name}, decay {decay:?}: first difference at {first:?}: {:?}",
                    first.map(|i| (x[i], y[i]))
                );
            }
        }
    }

    #[test]
    fn a_run_resumes_from_a_record_of_either_optimiser_with_the_other() {
        // Three steps with one optimiser, its record loaded into the other, two more steps: the
        // same values as five steps of Burn's Adam alone, in both directions.
        let device = Device::flex();
        let ad = device.clone().autodiff();
        let burns = || AdamConfig::new().with_epsilon(1e-8).init();
        let host = || ModuleOptimizer::from(HostAdam::new(1e-8, None));
        let loss =
            |m: &Two, step: usize| (m.w.val().sin() * (step as f32 + 1.0)).sum() + m.b.val().powf_scalar(2.0).sum();
        let values = |m: &Two| m.w.val().into_data().try_to_vec::<f32>().unwrap();
        let mut reference = model(&ad);
        let mut reference_optim = burns();
        for step in 0..5 {
            let grads = GradientsParams::from_grads(loss(&reference, step).backward(), &reference);
            reference = reference_optim.step(1e-2, reference, grads);
        }
        for (first, second) in [(burns(), host()), (host(), burns())] {
            let mut m = model(&ad);
            let mut optim = first;
            for step in 0..5 {
                if step == 3 {
                    optim = second.clone().load_record(optim.to_record());
                }
                let grads = GradientsParams::from_grads(loss(&m, step).backward(), &m);
                m = optim.step(1e-2, m, grads);
            }
            assert_eq!(values(&m), values(&reference));
        }
    }

    #[test]
    fn flex_tensors_take_the_host_pass_and_others_burns_path() {
        // On flex the host pass runs (so the comparisons above compare it with Burn's Adam);
        // ndarray tensors cannot be read in place, and Burn's Adam runs and gives its result.
        let adam = HostAdam::new(1e-8, None);
        let on = |device: &Device| {
            let t = Tensor::<1>::from_floats([1.0, -2.0, 0.5], device);
            adam.host_step(1e-2, &t, &t.clone().mul_scalar(0.1), None).is_some()
        };
        #[allow(deprecated)]
        let ndarray = Device::ndarray();
        assert!(on(&Device::flex()));
        assert!(!on(&ndarray));
        let device = ndarray;
        let (w1, _, _) = train(ModuleOptimizer::from(HostAdam::new(1e-8, None)), &device);
        let (w2, _, _) = train(AdamConfig::new().with_epsilon(1e-8).init(), &device);
        assert_eq!(w1, w2);
    }
}
