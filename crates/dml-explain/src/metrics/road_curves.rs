//! ROAD's deletion curves (Rong et al., ICML 2022): remove the pixels a map ranks *most*
//! relevant first (MoRF) or *least* relevant first (LeRF), fill them by
//! [`noisy_linear_imputation`] instead of a constant, and score every perturbed image with the
//! model, the partner held fixed.
//!
//! Each curve is divided by `s₀`, the score of the untouched image, so curves of different pairs
//! share a scale, and is reported next to the same curve for random orders. A faithful map makes
//! the MoRF curve fall early (low area) and the LeRF curve stay high (high area); ROAD's summary
//! is `(AUC_LeRF − AUC_MoRF) / 2`, positive for a map that ranks the evidence well.

use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::imputation::noisy_linear_imputation;
use super::input::{descending, values};
use crate::faithfulness::{DeletionError, FaithError, Scorer, check_fractions, check_len, score_batch, trapezoid_auc};

/// ROAD's curves of one image under one map, every score divided by `s0`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoadCurves {
    /// Fractions of removed pixels: the first is 0, strictly ascending, all below 1.
    pub fractions: Vec<f64>,
    /// The score of the untouched image, which every curve is divided by.
    pub s0: f64,
    /// Most relevant first.
    pub morf: Vec<f64>,
    /// Least relevant first.
    pub lerf: Vec<f64>,
    /// Random orders, the mean over the repeats.
    pub random: Vec<f64>,
    /// Trapezoid areas under `morf`, `lerf` and `random` over `fractions`.
    pub auc_morf: f64,
    /// See `auc_morf`.
    pub auc_lerf: f64,
    /// See `auc_morf`.
    pub auc_random: f64,
    /// ROAD's summary `(auc_lerf − auc_morf) / 2`.
    pub summary: f64,
}

/// The curves of `image` (`[3, h, w]`, in the scorer's space) under `map` (`[h, w]`, finite;
/// ties ranked by position). For every fraction `f` the first `round(f·h·w)` pixels of an order
/// are imputed (`noise`, and the seed of the noise and of the random orders, as given); each
/// order's images go to ONE call `score(batch, n_fractions)`. `repeats` random orders make the
/// reference curve.
///
/// Errors: shapes, a non-finite map, fractions that do not start at 0, ascend strictly and stay
/// below 1 (removing every pixel leaves nothing to impute from), `repeats = 0`, a wrong number of
/// scores or a non-finite one, `s0 = 0`, or the scorer's own error.
#[allow(clippy::too_many_arguments)] // the image, its map, the fractions and the imputer's noise and seed.
pub fn road_curves<E>(
    image: &[f32],
    h: usize,
    w: usize,
    map: &[f32],
    fractions: &[f64],
    noise: f32,
    seed: u64,
    repeats: usize,
    score: &mut Scorer<'_, E>,
) -> Result<RoadCurves, DeletionError<E>> {
    check_len("image", image.len(), 3, h, w)?;
    let map = values("map", map, h, w)?;
    check_road_fractions(fractions)?;
    if repeats == 0 {
        return Err(FaithError::NoRepeats.into());
    }
    let most_first = descending(&map);
    let least_first: Vec<usize> = most_first.iter().rev().copied().collect();
    let morf = curve(image, h, w, &most_first, fractions, noise, seed, score)?;
    let s0 = morf[0];
    if s0 == 0.0 {
        return Err(FaithError::Parameter {
            name: "s0",
            value: 0.0,
            reason: "the untouched image scores 0, so no curve can be divided by it".into(),
        }
        .into());
    }
    let lerf = curve(image, h, w, &least_first, fractions, noise, seed, score)?;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut order: Vec<usize> = (0..h * w).collect();
    let mut random = vec![0.0; fractions.len()];
    for _ in 0..repeats {
        order.shuffle(&mut rng);
        for (sum, s) in random
            .iter_mut()
            .zip(curve(image, h, w, &order, fractions, noise, seed, score)?)
        {
            *sum += s / repeats as f64;
        }
    }
    let scale = |c: Vec<f64>| -> Vec<f64> { c.into_iter().map(|s| s / s0).collect() };
    let (morf, lerf, random) = (scale(morf), scale(lerf), scale(random));
    let (auc_morf, auc_lerf, auc_random) = (
        trapezoid_auc(fractions, &morf),
        trapezoid_auc(fractions, &lerf),
        trapezoid_auc(fractions, &random),
    );
    Ok(RoadCurves {
        fractions: fractions.to_vec(),
        s0,
        morf,
        lerf,
        random,
        auc_morf,
        auc_lerf,
        auc_random,
        summary: (auc_lerf - auc_morf) / 2.0,
    })
}

/// The pixels of `map` (`[h, w]`, finite) most relevant first, ties ranked by position: the MoRF
/// order of [`road_curves`] (reversed, its LeRF order) for [`road_curve`].
pub fn relevance_order(map: &[f32], h: usize, w: usize) -> Result<Vec<usize>, FaithError> {
    Ok(descending(&values("map", map, h, w)?))
}

/// The raw scores (not divided by `s0`) of `image` (`[3, h, w]`) with the first `round(f·h·w)`
/// pixels of `order` (a permutation of `0..h·w`, most relevant first for MoRF) imputed by
/// [`noisy_linear_imputation`], for every fraction, in ONE call `score(batch, n_fractions)`: one
/// curve of [`road_curves`], for callers that share the random orders between several maps.
///
/// Errors: as [`road_curves`], and an `order` that is not a permutation of the pixels.
#[allow(clippy::too_many_arguments)] // the image, the order, the fractions and the imputer's noise and seed.
pub fn road_curve<E>(
    image: &[f32],
    h: usize,
    w: usize,
    order: &[usize],
    fractions: &[f64],
    noise: f32,
    seed: u64,
    score: &mut Scorer<'_, E>,
) -> Result<Vec<f64>, DeletionError<E>> {
    check_len("image", image.len(), 3, h, w)?;
    check_road_fractions(fractions)?;
    // The offending value: a pixel out of range or repeated, else a wrong length.
    let mut seen = vec![false; h * w];
    let bad = order
        .iter()
        .find(|&&p| p >= h * w || std::mem::replace(&mut seen[p], true))
        .map(|&p| p as f64)
        .or((order.len() != h * w).then_some(order.len() as f64));
    if let Some(value) = bad {
        return Err(FaithError::Parameter {
            name: "order",
            value,
            reason: format!("must be a permutation of the {} pixels", h * w),
        }
        .into());
    }
    curve(image, h, w, order, fractions, noise, seed, score)
}

/// The raw scores of `image` with the first `round(f·h·w)` pixels of `order` imputed, for every
/// fraction, in one scorer call.
#[allow(clippy::too_many_arguments)]
fn curve<E>(
    image: &[f32],
    h: usize,
    w: usize,
    order: &[usize],
    fractions: &[f64],
    noise: f32,
    seed: u64,
    score: &mut Scorer<'_, E>,
) -> Result<Vec<f64>, DeletionError<E>> {
    let pixels = h * w;
    let mut batch = Vec::with_capacity(fractions.len() * image.len());
    for &f in fractions {
        let count = ((f * pixels as f64).round() as usize).min(pixels);
        let mut removed = vec![false; pixels];
        for &p in &order[..count] {
            removed[p] = true;
        }
        batch.extend(noisy_linear_imputation(image, &removed, 3, h, w, noise, seed)?);
    }
    score_batch(&batch, fractions, score)
}

/// [`check_fractions`], and ROAD's rules: the first fraction is 0 (the untouched image, whose
/// score is `s0`) and every fraction stays below 1 (removing every pixel leaves nothing to impute
/// from).
fn check_road_fractions(fractions: &[f64]) -> Result<(), FaithError> {
    check_fractions(fractions)?;
    let reason = if fractions[0] != 0.0 {
        "the first must be 0 (the untouched image, s0)"
    } else if fractions.iter().any(|&f| f >= 1.0) {
        "must stay below 1: removing every pixel leaves nothing to impute from"
    } else {
        return Ok(());
    };
    Err(FaithError::Fractions {
        fractions: fractions.to_vec(),
        reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A model that looks at one bright square only: its score is the mean of the square's
    /// first channel.
    fn square_scorer(h: usize, w: usize) -> impl FnMut(&[f32], usize) -> Result<Vec<f64>, String> {
        move |batch: &[f32], n: usize| {
            Ok((0..n)
                .map(|i| {
                    let image = &batch[i * 3 * h * w..(i + 1) * 3 * h * w];
                    let mut sum = 0.0;
                    for y in 2..5 {
                        for x in 2..5 {
                            sum += f64::from(image[y * w + x]);
                        }
                    }
                    sum / 9.0
                })
                .collect())
        }
    }

    #[test]
    fn a_map_on_the_evidence_beats_its_inverse_and_random_orders() {
        let (h, w) = (10, 12);
        let mut image = vec![0.1f32; 3 * h * w];
        for y in 2..5 {
            for x in 2..5 {
                image[y * w + x] = 1.0;
            }
        }
        let on_square: Vec<f32> = (0..h * w)
            .map(|p| {
                if (2..5).contains(&(p / w)) && (2..5).contains(&(p % w)) {
                    1.0
                } else {
                    0.0
                }
            })
            .collect();
        let inverse: Vec<f32> = on_square.iter().map(|v| 1.0 - v).collect();
        let fractions = [0.0, 0.05, 0.1, 0.3, 0.6, 0.9];
        let mut scorer = square_scorer(h, w);
        let good = road_curves(&image, h, w, &on_square, &fractions, 0.0, 1, 4, &mut scorer).unwrap();
        let bad = road_curves(&image, h, w, &inverse, &fractions, 0.0, 1, 4, &mut scorer).unwrap();
        assert_eq!(good.morf[0], 1.0);
        assert!(
            good.summary > 0.0 && bad.summary < 0.0,
            "{} {}",
            good.summary,
            bad.summary
        );
        assert!(good.auc_morf < good.auc_random && good.auc_random < bad.auc_morf);
        // Removing the 9 square pixels (7.5 % of 120) fills them from the 0.1 background.
        assert!((good.morf[2] - 0.1).abs() < 1e-4, "{:?}", good.morf);
    }

    #[test]
    fn bad_fractions_and_scores_are_named() {
        let (h, w) = (4, 4);
        let image = vec![0.5f32; 48];
        let map = vec![0.0f32; 16];
        let mut ok = |_: &[f32], n: usize| -> Result<Vec<f64>, String> { Ok(vec![1.0; n]) };
        let e = road_curves(&image, h, w, &map, &[0.0, 1.0], 0.0, 0, 1, &mut ok)
            .unwrap_err()
            .to_string();
        assert!(e.contains("must stay below 1"), "{e}");
        let e = road_curves(&image, h, w, &map, &[0.1, 0.5], 0.0, 0, 1, &mut ok)
            .unwrap_err()
            .to_string();
        assert!(e.contains("the first must be 0"), "{e}");
        let mut zero = |_: &[f32], n: usize| -> Result<Vec<f64>, String> { Ok(vec![0.0; n]) };
        let e = road_curves(&image, h, w, &map, &[0.0, 0.5], 0.0, 0, 1, &mut zero)
            .unwrap_err()
            .to_string();
        assert!(e.contains("s0 = 0"), "{e}");
        let mut short = |_: &[f32], _: usize| -> Result<Vec<f64>, String> { Ok(vec![1.0]) };
        let e = road_curves(&image, h, w, &map, &[0.0, 0.5], 0.0, 0, 1, &mut short)
            .unwrap_err()
            .to_string();
        assert!(e.contains("returned 1 scores for a batch of 2"), "{e}");
    }
}
