//! Deletion curves: erase the pixels a map ranks first and watch the similarity fall.
//!
//! Sign convention: the scorer returns a similarity (e.g. the cosine between the anchor's
//! embedding and the embedding of the erased image) that *drops* as evidence is erased. A
//! faithful map ranks the evidence first, so its curve drops early and its area under the curve
//! (AUC) is *low*; erasing random pixels (same counts) is the reference. Report
//! `random AUC - method AUC` (positive = better than random), as
//! [`super::FaithfulnessSummary::deletion_auc_gain`] does. For a scorer that rises when evidence
//! is erased (a distance), the order reverses.

use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::error::{DeletionError, FaithError, check_finite, check_len};

/// The model side of a deletion curve: called with a batch of erased images
/// `[n, 3, h, w]` (row-major, `n * 3 * h * w` values) and `n`, it returns `n` scores (e.g. the
/// cosine similarity of each image's embedding to the other image of the pair), or its own
/// error `E`.
pub type Scorer<'a, E> = dyn FnMut(&[f32], usize) -> Result<Vec<f64>, E> + 'a;

/// A deletion curve: `scores[i]` is the scorer's value for the image with `fractions[i]` of its
/// pixels erased, and `auc` is the trapezoid area under it over the fraction axis
/// ([`trapezoid_auc`]). Lower `auc` means the similarity fell sooner.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeletionCurve {
    /// Fractions of erased pixels, strictly ascending in `[0, 1]`.
    pub fractions: Vec<f64>,
    /// One score per fraction (for a random curve: the mean over the repeats).
    pub scores: Vec<f64>,
    /// Trapezoid area under `scores` over `fractions`.
    pub auc: f64,
}

/// `steps + 1` evenly spaced fractions `0, 1/steps, …, 1` (`steps = 10` gives 0.0, 0.1, …,
/// 1.0); `steps = 0` is treated as 1. The first is exactly 0 and the last exactly 1.
pub fn deletion_fractions(steps: usize) -> Vec<f64> {
    let steps = steps.max(1);
    (0..=steps).map(|i| i as f64 / steps as f64).collect()
}

/// The trapezoid rule: `Σ (f[i+1] - f[i]) * (s[i] + s[i+1]) / 2` over pairs of neighbours. The
/// area is not divided by the span of `fractions`, so curves are comparable only over the same
/// fractions (over `[0, 1]` the area is the curve's mean height). Uses the shorter of the two
/// slices; 0 for fewer than two points.
pub fn trapezoid_auc(fractions: &[f64], scores: &[f64]) -> f64 {
    let n = fractions.len().min(scores.len());
    (1..n)
        .map(|i| (fractions[i] - fractions[i - 1]) * (scores[i] + scores[i - 1]) / 2.0)
        .sum()
}

/// The deletion curve of `image` under `ranking_map`.
///
/// `image` is `[3, h, w]` row-major (in whatever space the scorer expects, e.g. normalised);
/// `ranking_map` is `[h, w]` and finite. Pixels are ranked by the map, largest first, ties by
/// row-major index (so the curve is deterministic); for each fraction `f` the first
/// `round(f * h * w)` pixels are erased, i.e. all three channels set to `fill` (in the image's
/// space: `[0.0; 3]` in ImageNet-normalised space is the data set's mean colour, a neutral
/// grey). All erased images, `[n_fractions, 3, h, w]` row-major, go to ONE call
/// `score(batch, n_fractions)`, which must return one finite score per image in batch order;
/// one batched forward pass is far cheaper on an accelerator than one per fraction.
///
/// `fractions` must be at least two, strictly ascending, within `[0, 1]` (see
/// [`deletion_fractions`]). Errors: invalid shapes, a non-finite ranking value, invalid
/// fractions, a wrong number of scores or a non-finite score ([`DeletionError::Invalid`]), or
/// the scorer's own error ([`DeletionError::Score`]).
pub fn deletion_curve<E>(
    image: &[f32],
    h: usize,
    w: usize,
    ranking_map: &[f32],
    fractions: &[f64],
    fill: [f32; 3],
    score: &mut Scorer<'_, E>,
) -> Result<DeletionCurve, DeletionError<E>> {
    check_len("image", image.len(), 3, h, w)?;
    check_len("ranking map", ranking_map.len(), 1, h, w)?;
    check_finite("ranking map", ranking_map)?;
    check_fractions(fractions)?;
    let mut order: Vec<usize> = (0..h * w).collect();
    // A stable sort on the value alone keeps equal values in index order. The map is finite,
    // so the comparison is total; -0.0 and 0.0 compare equal and fall back on the index too.
    order.sort_by(|&a, &b| {
        ranking_map[b]
            .partial_cmp(&ranking_map[a])
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    let scores = score_erased(image, h * w, &order, fractions, fill, score)?;
    let auc = trapezoid_auc(fractions, &scores);
    Ok(DeletionCurve {
        fractions: fractions.to_vec(),
        scores,
        auc,
    })
}

/// The random-deletion reference for [`deletion_curve`]: the same fractions and pixel counts,
/// but pixels erased in a random order, scores averaged over `repeats` orders.
///
/// The orders are uniform shuffles drawn from one `ChaCha8Rng` seeded with `seed` (the
/// workspace's generator), so the curve is a pure function of its inputs and the seed. Each
/// repeat makes one scorer call with its `[n_fractions, 3, h, w]` batch, so memory stays at one
/// batch however many repeats are asked for. `auc` is the area under the mean curve, which
/// equals the mean of the repeats' areas. Errors: as [`deletion_curve`], and `repeats == 0`.
#[allow(clippy::too_many_arguments)] // the deletion curve's arguments plus seed and repeats.
pub fn random_deletion_curve<E>(
    image: &[f32],
    h: usize,
    w: usize,
    fractions: &[f64],
    fill: [f32; 3],
    seed: u64,
    repeats: usize,
    score: &mut Scorer<'_, E>,
) -> Result<DeletionCurve, DeletionError<E>> {
    check_len("image", image.len(), 3, h, w)?;
    check_fractions(fractions)?;
    if repeats == 0 {
        return Err(FaithError::NoRepeats.into());
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut order: Vec<usize> = (0..h * w).collect();
    let mut sums = vec![0.0_f64; fractions.len()];
    for _ in 0..repeats {
        order.shuffle(&mut rng);
        let scores = score_erased(image, h * w, &order, fractions, fill, score)?;
        for (sum, s) in sums.iter_mut().zip(scores) {
            *sum += s;
        }
    }
    let scores: Vec<f64> = sums.iter().map(|s| s / repeats as f64).collect();
    let auc = trapezoid_auc(fractions, &scores);
    Ok(DeletionCurve {
        fractions: fractions.to_vec(),
        scores,
        auc,
    })
}

/// Builds the batch of erased images (`order`'s first `round(f * pixels)` pixels set to
/// `fill`, per fraction), scores it with one call and checks the scores.
fn score_erased<E>(
    image: &[f32],
    pixels: usize,
    order: &[usize],
    fractions: &[f64],
    fill: [f32; 3],
    score: &mut Scorer<'_, E>,
) -> Result<Vec<f64>, DeletionError<E>> {
    let n = fractions.len();
    let mut batch = Vec::with_capacity(n * image.len());
    // Fractions ascend, so each image erases a superset of the previous one's pixels: erase
    // incrementally in one working copy and append a snapshot per fraction.
    let mut working = image.to_vec();
    let mut erased = 0;
    for &f in fractions {
        let count = ((f * pixels as f64).round() as usize).min(pixels);
        for &p in &order[erased..count] {
            for (c, &value) in fill.iter().enumerate() {
                working[c * pixels + p] = value;
            }
        }
        erased = erased.max(count);
        batch.extend_from_slice(&working);
    }
    score_batch(&batch, fractions, score)
}

/// Scores `batch` (one image per fraction) in one call of `score`, checking that it returned
/// one finite score per image.
pub(crate) fn score_batch<E>(
    batch: &[f32],
    fractions: &[f64],
    score: &mut Scorer<'_, E>,
) -> Result<Vec<f64>, DeletionError<E>> {
    let n = fractions.len();
    let scores = score(batch, n).map_err(DeletionError::Score)?;
    if scores.len() != n {
        return Err(FaithError::ScoreCount {
            expected: n,
            got: scores.len(),
        }
        .into());
    }
    if let Some(i) = scores.iter().position(|s| !s.is_finite()) {
        return Err(FaithError::NonFiniteScore {
            fraction: fractions[i],
            score: scores[i],
        }
        .into());
    }
    Ok(scores)
}

/// Checks that `fractions` are at least two, finite, within `[0, 1]` and strictly ascending.
pub(crate) fn check_fractions(fractions: &[f64]) -> Result<(), FaithError> {
    let reason = if fractions.len() < 2 {
        Some("a curve needs at least two fractions")
    } else if fractions.iter().any(|f| !(0.0..=1.0).contains(f)) {
        Some("every fraction must lie in [0, 1]")
    } else if fractions.windows(2).any(|p| p[1] <= p[0]) {
        Some("fractions must be strictly ascending")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(FaithError::Fractions {
            fractions: fractions.to_vec(),
            reason,
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::convert::Infallible;

    /// A 4x4 image of ones in every channel; the "evidence" is the top-left 2x2 block
    /// (pixels 0, 1, 4, 5).
    const H: usize = 4;
    const W: usize = 4;
    const REGION: [usize; 4] = [0, 1, 4, 5];

    /// Scores each image of a batch by the sum of its three channels over the region.
    fn region_sum(batch: &[f32], n: usize) -> Result<Vec<f64>, Infallible> {
        let size = 3 * H * W;
        assert_eq!(batch.len(), n * size);
        Ok((0..n)
            .map(|i| {
                let image = &batch[i * size..(i + 1) * size];
                (0..3)
                    .flat_map(|c| REGION.map(|p| f64::from(image[c * H * W + p])))
                    .sum()
            })
            .collect())
    }

    fn region_first_map() -> Vec<f32> {
        (0..H * W)
            .map(|p| if REGION.contains(&p) { 1.0 } else { 0.0 })
            .collect()
    }

    #[test]
    fn a_map_ranking_the_evidence_first_drops_at_once_in_one_call() {
        let image = vec![1.0_f32; 3 * H * W];
        let fractions = [0.0, 0.125, 0.25, 0.5, 1.0];
        let mut calls = 0;
        let mut scorer = |b: &[f32], n: usize| {
            calls += 1;
            region_sum(b, n)
        };
        let curve = deletion_curve(&image, H, W, &region_first_map(), &fractions, [0.0; 3], &mut scorer).unwrap();
        assert_eq!(calls, 1);
        // 0.125 of 16 pixels = 2 pixels: the first two region pixels by index (0 and 1) go, so
        // 2 of the 4 region pixels x 3 channels remain: 6. At 0.25 the whole region is gone.
        assert_eq!(curve.scores, [12.0, 6.0, 0.0, 0.0, 0.0]);
        // 0.125 * (12 + 6) / 2 + 0.125 * (6 + 0) / 2 = 1.125 + 0.375.
        assert_eq!(curve.auc, 1.5);
    }

    #[test]
    fn the_faithful_map_beats_random_and_an_adversarial_map_does_not() {
        let image = vec![1.0_f32; 3 * H * W];
        let fractions = deletion_fractions(8);
        let mut scorer = region_sum;
        let faithful = deletion_curve(&image, H, W, &region_first_map(), &fractions, [0.0; 3], &mut scorer).unwrap();
        let random = random_deletion_curve(&image, H, W, &fractions, [0.0; 3], 7, 20, &mut scorer).unwrap();
        let last: Vec<f32> = region_first_map().iter().map(|v| -v).collect();
        let adversarial = deletion_curve(&image, H, W, &last, &fractions, [0.0; 3], &mut scorer).unwrap();
        // Random erasure keeps 12 * (1 - f) in expectation: area 6 over [0, 1].
        assert!(
            faithful.auc < random.auc && random.auc < adversarial.auc,
            "{faithful:?} {random:?} {adversarial:?}"
        );
        assert!((random.auc - 6.0).abs() < 1.5, "{random:?}");
        assert_eq!(random.scores[0], 12.0);
        assert_eq!(*random.scores.last().unwrap(), 0.0);
    }

    #[test]
    fn random_curves_are_deterministic_per_seed() {
        // A scorer that weights pixels by their index, so different orders give different curves.
        let (h, w) = (8, 8);
        let image = vec![1.0_f32; 3 * h * w];
        let mut scorer = |b: &[f32], n: usize| -> Result<Vec<f64>, Infallible> {
            Ok(b.chunks(3 * h * w)
                .take(n)
                .map(|im| {
                    im.iter()
                        .enumerate()
                        .map(|(i, &v)| (i % (h * w)) as f64 * f64::from(v))
                        .sum()
                })
                .collect())
        };
        let fractions = deletion_fractions(10);
        let a = random_deletion_curve(&image, h, w, &fractions, [0.0; 3], 1, 3, &mut scorer).unwrap();
        let b = random_deletion_curve(&image, h, w, &fractions, [0.0; 3], 1, 3, &mut scorer).unwrap();
        let c = random_deletion_curve(&image, h, w, &fractions, [0.0; 3], 2, 3, &mut scorer).unwrap();
        assert_eq!(a, b);
        assert_ne!(a.scores, c.scores);
    }

    #[test]
    fn invalid_fractions_and_scores_are_errors() {
        let image = vec![1.0_f32; 3 * H * W];
        let map = region_first_map();
        let mut scorer = region_sum;
        for bad in [
            &[0.5][..],
            &[0.0, 1.5],
            &[0.0, 0.5, 0.5],
            &[0.5, 0.25],
            &[0.0, f64::NAN],
        ] {
            let err = deletion_curve(&image, H, W, &map, bad, [0.0; 3], &mut scorer).unwrap_err();
            assert!(
                matches!(err, DeletionError::Invalid(FaithError::Fractions { .. })),
                "{bad:?}: {err}"
            );
        }
        let err = deletion_curve(&image, H, W, &map, &[0.0, 2.0], [0.0; 3], &mut scorer).unwrap_err();
        assert_eq!(
            err.to_string(),
            "deletion fractions [0.0, 2.0] are invalid: every fraction must lie in [0, 1]"
        );
        let err = deletion_curve(&image[1..], H, W, &map, &[0.0, 1.0], [0.0; 3], &mut scorer).unwrap_err();
        assert_eq!(err.to_string(), "image has 47 values but its shape [3, 4, 4] needs 48");
        let mut short = |_: &[f32], _: usize| -> Result<Vec<f64>, Infallible> { Ok(vec![1.0]) };
        let err = deletion_curve(&image, H, W, &map, &[0.0, 1.0], [0.0; 3], &mut short).unwrap_err();
        assert!(matches!(
            err,
            DeletionError::Invalid(FaithError::ScoreCount { expected: 2, got: 1 })
        ));
        let mut nan = |_: &[f32], n: usize| -> Result<Vec<f64>, Infallible> { Ok(vec![f64::NAN; n]) };
        assert!(deletion_curve(&image, H, W, &map, &[0.0, 1.0], [0.0; 3], &mut nan).is_err());
        let err = random_deletion_curve(&image, H, W, &[0.0, 1.0], [0.0; 3], 0, 0, &mut scorer).unwrap_err();
        assert!(matches!(err, DeletionError::Invalid(FaithError::NoRepeats)));
    }

    #[test]
    fn the_scorers_error_comes_back_unchanged() {
        let image = vec![1.0_f32; 3 * H * W];
        let mut failing =
            |_: &[f32], _: usize| -> Result<Vec<f64>, std::io::Error> { Err(std::io::Error::other("device lost")) };
        let err = deletion_curve(&image, H, W, &region_first_map(), &[0.0, 1.0], [0.0; 3], &mut failing).unwrap_err();
        assert_eq!(err.to_string(), "the scorer failed: device lost");
        let DeletionError::Score(inner) = &err else {
            panic!("{err:?}")
        };
        assert_eq!(inner.to_string(), "device lost");
        assert!(std::error::Error::source(&err).is_some());
        // A non-`Error` type (a plain string) works too.
        let mut text = |_: &[f32], _: usize| -> Result<Vec<f64>, String> { Err("no".into()) };
        let err = deletion_curve(&image, H, W, &region_first_map(), &[0.0, 1.0], [0.0; 3], &mut text).unwrap_err();
        assert!(matches!(err, DeletionError::Score(ref s) if s == "no"));
    }
}
