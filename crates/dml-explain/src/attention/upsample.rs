//! Bilinear upsampling of attention maps to image size, as PyTorch's
//! `F.interpolate(mode="bilinear", align_corners=False)`.
//!
//! The resampling is separable, so it is two matrix products with fixed interpolation matrices
//! `U_h` `[H, h]` and `U_w` `[W, w]`: `M↑ = U_h M U_wᵀ`. Written this way it is exact, runs on
//! every backend and is differentiable with respect to `M`, which similarity mining needs.

use burn::tensor::{Device, Tensor, TensorData};

/// The `[out, in]` matrix of 1-D linear interpolation with half-pixel centres
/// (`align_corners = False`): output `i` samples `x = (i + 0.5) in/out − 0.5`, clamped below
/// at 0 as PyTorch does, between `⌊x⌋` and `min(⌊x⌋ + 1, in − 1)`.
pub fn interpolation_matrix(input: usize, output: usize) -> Vec<f32> {
    let mut m = vec![0.0f32; output * input];
    let scale = input as f64 / output as f64;
    for i in 0..output {
        let x = ((i as f64 + 0.5) * scale - 0.5).max(0.0);
        let lo = (x.floor() as usize).min(input - 1);
        let hi = (lo + 1).min(input - 1);
        let frac = (x - lo as f64) as f32;
        m[i * input + lo] += 1.0 - frac;
        m[i * input + hi] += frac;
    }
    m
}

fn matrix(input: usize, output: usize, device: &Device) -> Tensor<2> {
    Tensor::from_data(
        TensorData::new(interpolation_matrix(input, output), [output, input]),
        device,
    )
}

/// Upsamples maps `[N, h, w]` to `[N, height, width]` bilinearly with half-pixel centres
/// (PyTorch's `align_corners=False`, edge samples clamped), differentiably.
///
/// # Panics
/// When a size is zero.
pub fn upsample_bilinear(maps: Tensor<3>, height: usize, width: usize) -> Tensor<3> {
    let [n, h, w] = maps.dims();
    assert!(
        n * h * w > 0 && height * width > 0,
        "cannot upsample [{n}, {h}, {w}] to {height}x{width}"
    );
    let device = maps.device();
    let along_w = maps.reshape([n * h, w]).matmul(matrix(w, width, &device).transpose());
    let rows_last = along_w.reshape([n, h, width]).swap_dims(1, 2).reshape([n * width, h]);
    let along_h = rows_last.matmul(matrix(h, height, &device).transpose());
    along_h.reshape([n, width, height]).swap_dims(1, 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interpolation_rows_sum_to_one_and_match_pytorch_for_2_to_4() {
        // torch.nn.functional.interpolate(torch.tensor([[[[0., 1.]]]]), size=(1, 4),
        // mode="bilinear", align_corners=False) = [0, 0.25, 0.75, 1].
        let m = interpolation_matrix(2, 4);
        let out: Vec<f32> = (0..4).map(|i| m[i * 2 + 1]).collect();
        assert_eq!(out, vec![0.0, 0.25, 0.75, 1.0]);
        for (input, output) in [(3, 48), (2, 7), (5, 5), (7, 3)] {
            let m = interpolation_matrix(input, output);
            for row in m.chunks(input) {
                assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-6);
            }
        }
        // Same size: the identity.
        let m = interpolation_matrix(4, 4);
        for i in 0..4 {
            for j in 0..4 {
                assert_eq!(m[i * 4 + j], if i == j { 1.0 } else { 0.0 });
            }
        }
    }
}
