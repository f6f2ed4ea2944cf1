//! Maps that know nothing of the model, which every metric reports next to the methods: a method
//! that does not beat them on a measure has shown nothing by it.

use dml_explain::faithfulness::centre_prior;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The baselines, in table order.
pub const BASELINES: [&str; 4] = ["uniform", "random", "centre_prior", "edges"];

/// Baseline `name`'s map `[h, w]` for `image` (`[3, h, w]`, normalised):
///
/// - `uniform`: 1 everywhere;
/// - `random`: independent `U(0, 1)` values from a ChaCha8 stream of `seed`;
/// - `centre_prior`: the isotropic Gaussian of [`centre_prior`];
/// - `edges`: the image's gradient magnitude `√(g_x² + g_y²)` of the channel mean, central
///   differences (one-sided at the border): an edge detector.
///
/// # Panics
/// When `name` is not one of [`BASELINES`] or `image` is not `[3, h, w]`.
pub fn baseline_map(name: &str, image: &[f32], h: usize, w: usize, seed: u64) -> Vec<f32> {
    assert_eq!(
        image.len(),
        3 * h * w,
        "baseline of an image of {} values for [3, {h}, {w}]",
        image.len()
    );
    match name {
        "uniform" => vec![1.0; h * w],
        "random" => {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            (0..h * w).map(|_| rng.random::<f32>()).collect()
        }
        "centre_prior" => centre_prior(h, w),
        "edges" => edges(image, h, w),
        _ => panic!("unknown baseline {name:?}; the baselines are {BASELINES:?}"),
    }
}

/// The gradient magnitude of the channel mean of `image` `[3, h, w]`.
fn edges(image: &[f32], h: usize, w: usize) -> Vec<f32> {
    let plane = h * w;
    let grey: Vec<f32> = (0..plane)
        .map(|p| (image[p] + image[plane + p] + image[2 * plane + p]) / 3.0)
        .collect();
    let at = |y: usize, x: usize| grey[y * w + x];
    let diff = |a: f32, b: f32, span: usize| if span == 0 { 0.0 } else { (b - a) / span as f32 };
    let mut out = vec![0.0; plane];
    for y in 0..h {
        let (y0, y1) = (y.saturating_sub(1), (y + 1).min(h - 1));
        for x in 0..w {
            let (x0, x1) = (x.saturating_sub(1), (x + 1).min(w - 1));
            let gx = diff(at(y, x0), at(y, x1), x1 - x0);
            let gy = diff(at(y0, x), at(y1, x), y1 - y0);
            out[y * w + x] = (gx * gx + gy * gy).sqrt();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_edge_map_is_the_gradient_magnitude_and_zero_on_flat_regions() {
        let (h, w) = (4, 5);
        // A vertical step between columns 1 and 2 in every channel, a horizontal ramp nowhere.
        let image: Vec<f32> = (0..3 * h * w).map(|i| if i % w >= 2 { 1.0 } else { 0.0 }).collect();
        let e = baseline_map("edges", &image, h, w, 0);
        for y in 0..h {
            assert_eq!(&e[y * w..(y + 1) * w], &[0.0, 0.5, 0.5, 0.0, 0.0], "row {y}");
        }
    }

    #[test]
    fn random_maps_follow_their_seed_and_the_centre_prior_peaks_in_the_middle() {
        let image = vec![0.0; 3 * 9 * 9];
        let a = baseline_map("random", &image, 9, 9, 7);
        assert_eq!(a, baseline_map("random", &image, 9, 9, 7));
        assert_ne!(a, baseline_map("random", &image, 9, 9, 8));
        let c = baseline_map("centre_prior", &image, 9, 9, 0);
        let max = c.iter().copied().fold(f32::MIN, f32::max);
        assert_eq!(c[4 * 9 + 4], max);
        assert!(baseline_map("uniform", &image, 9, 9, 0).iter().all(|&v| v == 1.0));
    }
}
