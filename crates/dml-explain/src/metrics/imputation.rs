//! ROAD's noisy linear imputation (Rong et al., *A Consistent and Efficient Evaluation Strategy
//! for Attribution Methods*, ICML 2022): the pixels a deletion or insertion curve removes are
//! filled from their neighbours, not painted black or blurred, so that the perturbed image stays
//! close to the data and a score change measures the removed information, not the artefact.
//!
//! Every removed pixel is the weighted mean of its in-image 8-neighbours (edge neighbours 1/6,
//! diagonal neighbours 1/12, renormalised over the neighbours inside the image), removed
//! neighbours included as unknowns: for the `n` removed pixels of a channel,
//! `s_i x_i − Σ_{j removed} w_ij x_j = Σ_{k kept} w_ik c_k` with `s_i = Σ_{in-image} w`, one
//! sparse `n × n` system, symmetric positive definite, solved by sparse Cholesky (faer) for all channels at once; then Gaussian noise
//! of standard deviation `noise` is added to the imputed values. Checked against pytorch-grad-cam's
//! copy of the authors' imputer on the reference cases of kind `road_imputation`.

use faer::Mat;
use faer::linalg::solvers::Solve;
use faer::sparse::{SparseColMat, Triplet};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::input::values;
use crate::faithfulness::{FaithError, MaskValue, check_len};

/// Weight of an edge neighbour (above, below, left, right).
pub const EDGE_WEIGHT: f64 = 1.0 / 6.0;
/// Weight of a diagonal neighbour.
pub const DIAGONAL_WEIGHT: f64 = 1.0 / 12.0;

/// The 8-neighbourhood as (dy, dx, weight).
const NEIGHBOURS: [(i64, i64, f64); 8] = [
    (-1, -1, DIAGONAL_WEIGHT),
    (-1, 0, EDGE_WEIGHT),
    (-1, 1, DIAGONAL_WEIGHT),
    (0, -1, EDGE_WEIGHT),
    (0, 1, EDGE_WEIGHT),
    (1, -1, DIAGONAL_WEIGHT),
    (1, 0, EDGE_WEIGHT),
    (1, 1, DIAGONAL_WEIGHT),
];

/// `image` (`[channels, h, w]`, row-major per channel) with the pixels `removed` marks
/// (`[h, w]`, object = removed) imputed from their kept neighbours, plus `N(0, noise²)` noise
/// drawn from a ChaCha8 stream of `seed` (`noise = 0` draws nothing). Kept pixels are returned
/// unchanged.
///
/// Errors: wrong lengths or a non-finite pixel; a negative or non-finite `noise`; a group of
/// removed pixels (8-connected) with no kept pixel next to it, whose values nothing determines.
pub fn noisy_linear_imputation<M: MaskValue>(
    image: &[f32],
    removed: &[M],
    channels: usize,
    h: usize,
    w: usize,
    noise: f32,
    seed: u64,
) -> Result<Vec<f32>, FaithError> {
    check_len("image", image.len(), channels, h, w)?;
    values("image", image, channels * h, w)?;
    check_len("removed", removed.len(), 1, h, w)?;
    if !(noise >= 0.0 && noise.is_finite()) {
        return Err(FaithError::Parameter {
            name: "noise",
            value: f64::from(noise),
            reason: "must be a finite standard deviation ≥ 0".into(),
        });
    }
    let removed: Vec<bool> = removed.iter().map(|m| m.is_object()).collect();
    impute(image, &removed, channels, h, w, noise, seed)
}

/// [`noisy_linear_imputation`] after its checks, not generic: compiled (with faer's generic
/// solver) in this crate's optimised profile rather than in every caller's.
fn impute(
    image: &[f32],
    removed: &[bool],
    channels: usize,
    h: usize,
    w: usize,
    noise: f32,
    seed: u64,
) -> Result<Vec<f32>, FaithError> {
    let unknowns: Vec<usize> = (0..h * w).filter(|&i| removed[i]).collect();
    let mut out = image.to_vec();
    if unknowns.is_empty() {
        return Ok(out);
    }
    check_every_group_touches_a_kept_pixel(removed, h, w)?;
    let mut index = vec![usize::MAX; h * w];
    for (k, &p) in unknowns.iter().enumerate() {
        index[p] = k;
    }
    let n = unknowns.len();
    let mut entries = Vec::with_capacity(n * 9);
    let mut rhs = Mat::<f64>::zeros(n, channels);
    for (row, &p) in unknowns.iter().enumerate() {
        let (y, x) = ((p / w) as i64, (p % w) as i64);
        let mut total = 0.0;
        for (dy, dx, weight) in NEIGHBOURS {
            let (ny, nx) = (y + dy, x + dx);
            if ny < 0 || nx < 0 || ny >= h as i64 || nx >= w as i64 {
                continue;
            }
            total += weight;
            let q = ny as usize * w + nx as usize;
            if removed[q] {
                entries.push(Triplet::new(row, index[q], -weight));
            } else {
                for c in 0..channels {
                    rhs[(row, c)] += weight * f64::from(image[c * h * w + q]);
                }
            }
        }
        entries.push(Triplet::new(row, row, total));
    }
    let matrix = SparseColMat::<usize, f64>::try_new_from_triplets(n, n, &entries)
        .map_err(|e| singular(format!("cannot assemble the system: {e:?}")))?;
    // The system is symmetric (w_ij = w_ji) and, since every group of removed pixels touches a
    // kept one, irreducibly diagonally dominant: positive definite, so Cholesky applies (about
    // twice as fast as LU with its column ordering on these grids).
    let llt = matrix
        .sp_cholesky(faer::Side::Lower)
        .map_err(|e| singular(format!("sparse Cholesky failed: {e:?}")))?;
    llt.solve_in_place(rhs.as_mut());
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    for c in 0..channels {
        for (row, &p) in unknowns.iter().enumerate() {
            let value = rhs[(row, c)];
            if !value.is_finite() {
                return Err(singular(format!("the solution is {value} at pixel {p}")));
            }
            let jitter = if noise > 0.0 {
                f64::from(noise) * standard_normal(&mut rng)
            } else {
                0.0
            };
            out[c * h * w + p] = (value + jitter) as f32;
        }
    }
    Ok(out)
}

/// A standard normal draw (Box–Muller).
fn standard_normal(rng: &mut impl Rng) -> f64 {
    let u1: f64 = rng.random_range(f64::EPSILON..1.0);
    let u2: f64 = rng.random::<f64>();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

fn singular(reason: String) -> FaithError {
    FaithError::Parameter {
        name: "removed",
        value: f64::NAN,
        reason,
    }
}

/// Fails when an 8-connected group of removed pixels has no kept pixel among its neighbours:
/// the mean-of-neighbours equations then hold for any constant on the group, so the system is
/// singular.
fn check_every_group_touches_a_kept_pixel(removed: &[bool], h: usize, w: usize) -> Result<(), FaithError> {
    let mut seen = vec![false; h * w];
    for start in 0..h * w {
        if !removed[start] || seen[start] {
            continue;
        }
        let (mut stack, mut touches, mut size) = (vec![start], false, 0usize);
        seen[start] = true;
        while let Some(p) = stack.pop() {
            size += 1;
            let (y, x) = ((p / w) as i64, (p % w) as i64);
            for (dy, dx, _) in NEIGHBOURS {
                let (ny, nx) = (y + dy, x + dx);
                if ny < 0 || nx < 0 || ny >= h as i64 || nx >= w as i64 {
                    continue;
                }
                let q = ny as usize * w + nx as usize;
                if !removed[q] {
                    touches = true;
                } else if !seen[q] {
                    seen[q] = true;
                    stack.push(q);
                }
            }
        }
        if !touches {
            return Err(singular(format!(
                "{size} removed pixels around ({}, {}) have no kept neighbour, so nothing determines them",
                start / w,
                start % w
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hole_in_a_linear_ramp_is_filled_exactly_and_kept_pixels_stay() {
        // A planar ramp is harmonic for this stencil (its weights are symmetric), so the
        // imputation reproduces it.
        let (h, w) = (6, 7);
        let image: Vec<f32> = (0..h * w).map(|i| ((i / w) * 2 + (i % w)) as f32).collect();
        let mut removed = vec![0u8; h * w];
        for p in [15, 16, 22, 23, 24, 30] {
            removed[p] = 1;
        }
        let out = noisy_linear_imputation(&image, &removed, 1, h, w, 0.0, 0).unwrap();
        for (i, (a, b)) in image.iter().zip(&out).enumerate() {
            assert!((a - b).abs() < 1e-4, "pixel {i}: {a} → {b}");
        }
        let noisy = noisy_linear_imputation(&image, &removed, 1, h, w, 0.5, 3).unwrap();
        for (i, (a, b)) in image.iter().zip(&noisy).enumerate() {
            if removed[i] == 0 {
                assert_eq!(a, b);
            } else {
                assert_ne!(a, b, "pixel {i} got no noise");
            }
        }
    }

    #[test]
    fn undetermined_groups_and_bad_input_are_named() {
        let image = vec![1.0f32; 3 * 4 * 4];
        let e = noisy_linear_imputation(&image, &[1u8; 16], 3, 4, 4, 0.0, 0)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("16 removed pixels") && e.contains("no kept neighbour"),
            "{e}"
        );
        let e = noisy_linear_imputation(&image[..40], &[0u8; 16], 3, 4, 4, 0.0, 0)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("image has 40 values but its shape [3, 4, 4] needs 48"),
            "{e}"
        );
        let e = noisy_linear_imputation(&image, &[0u8; 16], 3, 4, 4, -1.0, 0)
            .unwrap_err()
            .to_string();
        assert!(e.contains("noise = -1"), "{e}");
    }
}
