//! Test support shared by the host operations' tests.

use burn::tensor::Tensor;

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
