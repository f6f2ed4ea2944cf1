//! Helpers shared by the integration tests: a seeded generator and host/tensor conversions.
#![allow(dead_code)]

use burn::tensor::{DType, Device, Tensor, TensorData};

pub use dml_testkit::rng::Rng;

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
