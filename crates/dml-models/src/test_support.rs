//! Test support shared by the host operations' tests.

use burn::tensor::{Device, Tensor};

/// The values of a tensor as `f32`.
pub(crate) fn values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data().try_to_vec::<f32>().unwrap()
}

/// Asserts that `got` equals `want` within `tolerance` times the largest magnitude of `want`.
pub(crate) fn assert_close(got: &[f32], want: &[f32], tolerance: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: sizes");
    let scale = want.iter().fold(0.0f32, |m, v| m.max(v.abs())).max(1e-6);
    for (i, (p, q)) in got.iter().zip(want).enumerate() {
        assert!((p - q).abs() <= tolerance * scale, "{what}[{i}]: {p} vs {q}");
    }
}

/// A tensor of `dims` with fixed values spread uniformly with mean `mean` and standard deviation
/// `std` (from `dml_testkit::rng::Rng` seeded with `seed`): the same on every run, unlike
/// `Tensor::random`, whose unseeded draws made a tight comparison fail about once in a thousand
/// runs (a batch-norm gradient that happened to cancel almost to zero).
pub(crate) fn spread<const D: usize>(dims: [usize; D], seed: u64, mean: f32, std: f32, device: &Device) -> Tensor<D> {
    let mut rng = dml_testkit::rng::Rng::new(seed);
    // A uniform variable of width √12·std has standard deviation std.
    let values: Vec<f32> = (0..dims.iter().product::<usize>())
        .map(|_| mean + (rng.uniform() as f32 - 0.5) * 12f32.sqrt() * std)
        .collect();
    Tensor::<1>::from_floats(values.as_slice(), device).reshape(dims)
}
