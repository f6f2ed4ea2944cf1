//! Helpers shared by the integration tests: a seeded generator and host/tensor conversions.
#![allow(dead_code)]

use burn::tensor::{DType, Device, Tensor, TensorData};

/// SplitMix64: a tiny deterministic generator, so that the tests need no random-number crate.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Standard normal (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let u = self.uniform().max(1e-300);
        let v = self.uniform();
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }
}

/// An `f64` tensor on `device`.
pub fn tensor<const D: usize>(values: &[f64], shape: [usize; D], device: &Device) -> Tensor<D> {
    Tensor::from_data(TensorData::new(values.to_vec(), shape), (device, DType::F64))
}

/// Any float tensor's values as `f64`.
pub fn host<const D: usize>(t: Tensor<D>) -> Vec<f64> {
    t.into_data().try_into_vec_as::<f64>().unwrap()
}

/// [`host`] for rank 2 (kept for call sites that name the rank).
pub fn host2(t: Tensor<2>) -> Vec<f64> {
    host(t)
}
