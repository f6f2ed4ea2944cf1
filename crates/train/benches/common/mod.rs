//! What the `train` benches share: their command-line flags, the synthetic batch they train on and
//! the timed loop of training steps.

#![allow(dead_code)]

use std::str::FromStr;
use std::time::Instant;

use burn::tensor::{Device, Tensor, TensorData};
use dml_train::Learner;

/// The value after `flag` on the bench's command line (`--steps 5` → `Some("5")`).
pub fn arg(flag: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

/// The value after `flag` parsed as `T`, or `default` when the flag is absent; an unparsable
/// value stops the bench naming the flag.
pub fn parsed<T: FromStr>(flag: &str, default: T) -> T {
    arg(flag).map_or(default, |s| {
        s.parse().unwrap_or_else(|_| panic!("{flag}: cannot read {s:?}"))
    })
}

/// A deterministic batch of `batch` images `[batch, 3, side, side]` with values in `[-1, 1)`.
pub fn pixels(batch: usize, side: usize) -> Vec<f32> {
    (0..batch * 3 * side * side)
        .map(|i| ((i * 7919) % 1013) as f32 / 506.0 - 1.0)
        .collect()
}

/// The same batch as a tensor on `device`.
pub fn batch(pixels: &[f32], batch: usize, side: usize, device: &Device) -> Tensor<4> {
    Tensor::from_data(TensorData::new(pixels.to_vec(), [batch, 3, side, side]), device)
}

/// Seconds per training step of `learner` on `images()`: two warm-up steps (allocation pools,
/// autotuning and, on wgpu, shader compilation), then `steps` timed ones between device
/// synchronisations.
pub fn seconds_per_step(
    learner: &mut Learner,
    images: impl Fn() -> Tensor<4>,
    labels: &[u32],
    steps: usize,
    device: &Device,
) -> f64 {
    for s in 0..2 {
        learner.step(images(), labels, s, [1e-4; 3]).expect("step");
    }
    let _ = device.sync();
    let start = Instant::now();
    for s in 0..steps {
        learner.step(images(), labels, s as u64, [1e-4; 3]).expect("step");
    }
    let _ = device.sync();
    start.elapsed().as_secs_f64() / steps as f64
}
