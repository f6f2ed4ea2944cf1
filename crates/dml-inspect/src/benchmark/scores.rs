//! One map scored by every metric of the table: localisation and complexity (`dml-explain`'s
//! metrics on plain maps), ROAD's curves of the pair's similarity, and the part-level measures of
//! the parts set.

use dml_explain::faithfulness::{Scorer, trapezoid_auc};
use dml_explain::metrics::{
    complexity, pointing_game, relevance_mass_accuracy, relevance_order, relevance_rank_accuracy, road_curve, roc_auc,
    sparseness, spearman, ssim, top_k_intersection,
};
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;

use super::types::{Scores, TOP_K_FRACTION};

/// How ROAD's curves are drawn.
#[derive(Debug, Clone, PartialEq)]
pub struct RoadSettings {
    /// Removed fractions: 0 first, ascending, below 1.
    pub fractions: Vec<f64>,
    /// Standard deviation of the imputation's noise (ROAD: 0.01 of the value range; here in
    /// normalised units).
    pub noise: f32,
    /// Random orders averaged for the reference curve.
    pub repeats: usize,
}

impl Default for RoadSettings {
    /// Fractions 0, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9; noise 0.01; 2 random orders.
    fn default() -> Self {
        Self {
            fractions: vec![0.0, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9],
            noise: 0.01,
            repeats: 2,
        }
    }
}

/// The pair's reference: the untouched score and the random orders' curve divided by it.
pub(super) struct RoadReference {
    /// `s0 = s(q, r)`.
    pub s0: f64,
    /// Area under the random orders' normalised curve.
    pub auc_random: f64,
}

/// `map` with negative values set to 0: evidence for the similarity only.
pub(super) fn positive(map: &[f32]) -> Vec<f32> {
    map.iter().map(|&v| v.max(0.0)).collect()
}

/// The localisation metrics of `map` against the object `mask` (both `[h, w]`).
pub(super) fn localisation(map: &[f32], mask: &[bool], h: usize, w: usize, s: &mut Scores) {
    let e = |r: Result<f64, dml_explain::faithfulness::FaithError>| r.map_err(|e| e.to_string());
    let k = ((TOP_K_FRACTION * (h * w) as f64).ceil() as usize).max(1);
    s.set("pointing", e(pointing_game(map, mask, h, w)));
    s.set("mass", e(relevance_mass_accuracy(map, mask, h, w)));
    s.set("rank", e(relevance_rank_accuracy(map, mask, h, w)));
    s.set("auc", e(roc_auc(map, mask, h, w)));
    s.set("top_k", e(top_k_intersection(map, mask, h, w, k)));
}

/// The complexity metrics of `map` `[h, w]`.
pub(super) fn complexity_of(map: &[f32], h: usize, w: usize, s: &mut Scores) {
    s.set("sparseness", sparseness(map, h, w).map_err(|e| e.to_string()));
    s.set("entropy", complexity(map, h, w).map_err(|e| e.to_string()));
}

/// The untouched score and the random orders' curve of `image` `[3, h, w]`.
pub(super) fn road_reference(
    image: &[f32],
    h: usize,
    w: usize,
    settings: &RoadSettings,
    seed: u64,
    score: &mut Scorer<'_, String>,
) -> Result<RoadReference, String> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut order: Vec<usize> = (0..h * w).collect();
    let mut sum = vec![0.0; settings.fractions.len()];
    for _ in 0..settings.repeats.max(1) {
        order.shuffle(&mut rng);
        let curve = road_curve(image, h, w, &order, &settings.fractions, settings.noise, seed, score)
            .map_err(|e| e.to_string())?;
        for (a, c) in sum.iter_mut().zip(curve) {
            *a += c / settings.repeats.max(1) as f64;
        }
    }
    let s0 = sum[0];
    if !(s0 > 0.0 && s0.is_finite()) {
        return Err(format!("the untouched pair scores s0 = {s0}; curves are divided by it"));
    }
    let random: Vec<f64> = sum.iter().map(|v| v / s0).collect();
    Ok(RoadReference {
        s0,
        auc_random: trapezoid_auc(&settings.fractions, &random),
    })
}

/// ROAD's summary, deletion and insertion of `map` for `image` against the pair's `reference`.
#[allow(clippy::too_many_arguments)] // the map, its image, the settings, the reference and the scorer.
pub(super) fn road(
    map: &[f32],
    image: &[f32],
    h: usize,
    w: usize,
    settings: &RoadSettings,
    seed: u64,
    reference: &RoadReference,
    score: &mut Scorer<'_, String>,
    s: &mut Scores,
) {
    let result = (|| -> Result<(f64, f64), String> {
        let most_first = relevance_order(map, h, w).map_err(|e| e.to_string())?;
        let least_first: Vec<usize> = most_first.iter().rev().copied().collect();
        let mut auc = |order: &[usize]| -> Result<f64, String> {
            let curve = road_curve(image, h, w, order, &settings.fractions, settings.noise, seed, score)
                .map_err(|e| e.to_string())?;
            let normalised: Vec<f64> = curve.iter().map(|v| v / reference.s0).collect();
            Ok(trapezoid_auc(&settings.fractions, &normalised))
        };
        Ok((auc(&most_first)?, auc(&least_first)?))
    })();
    match result {
        Ok((morf, lerf)) => {
            s.set("road", Ok((lerf - morf) / 2.0));
            s.set("deletion", Ok(reference.auc_random - morf));
            s.set("insertion", Ok(lerf - reference.auc_random));
        }
        Err(e) => {
            for m in ["road", "deletion", "insertion"] {
                s.set(m, Err(e.clone()));
            }
        }
    }
}

/// The map's sum on each of `masks` (`[h, w]` each) over its sum: its share on each part.
pub(super) fn shares(map: &[f32], masks: &[&[bool]]) -> Result<Vec<f64>, String> {
    let total: f64 = map.iter().map(|&v| f64::from(v)).sum();
    if total <= 0.0 {
        return Err("the map sums to 0 (no positive relevance)".into());
    }
    Ok(masks
        .iter()
        .map(|m| {
            map.iter()
                .zip(m.iter())
                .filter(|(_, o)| **o)
                .map(|(&v, _)| f64::from(v))
                .sum::<f64>()
                / total
        })
        .collect())
}

/// Spearman's ρ of the map's shares on the query's parts and the falls of the similarity when each
/// is removed; at least 3 parts, and neither list constant.
pub(super) fn part_faithfulness(shares: &[f64], drops: &[f64]) -> Result<f64, String> {
    if shares.len() < 3 {
        return Err(format!(
            "the query has {} part(s); a rank correlation needs 3 or more",
            shares.len()
        ));
    }
    spearman(shares, drops, 1, shares.len(), false).map_err(|e| e.to_string())
}

/// Spearman's ρ and the SSIM of two maps `[h, w]` (the SSIM of their min-max normalised forms,
/// as Adebayo et al. compare them).
pub(super) fn map_similarity(a: &[f32], b: &[f32], h: usize, w: usize, s: &mut Scores, names: [&str; 2]) {
    s.set(names[0], spearman(a, b, h, w, false).map_err(|e| e.to_string()));
    s.set(
        names[1],
        ssim(&min_max(a, 0.0), &min_max(b, 0.0), h, w).map_err(|e| e.to_string()),
    );
}

/// `map` scaled to `[0, 1]` (a constant map to `constant`).
pub(super) fn min_max(map: &[f32], constant: f32) -> Vec<f32> {
    let min = map.iter().copied().fold(f32::INFINITY, f32::min);
    let max = map.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let span = max - min;
    map.iter()
        .map(|&v| if span > 0.0 { (v - min) / span } else { constant })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn part_faithfulness_needs_three_parts_and_ranks_shares_against_drops() {
        assert!(
            part_faithfulness(&[0.1, 0.2], &[0.3, 0.1])
                .unwrap_err()
                .contains("2 part(s)")
        );
        let rho = part_faithfulness(&[0.1, 0.5, 0.3], &[0.01, 0.2, 0.05]).unwrap();
        assert!((rho - 1.0).abs() < 1e-12, "{rho}");
        let rho = part_faithfulness(&[0.1, 0.5, 0.3], &[0.2, 0.01, 0.05]).unwrap();
        assert!((rho + 1.0).abs() < 1e-12, "{rho}");
    }

    #[test]
    fn shares_divide_each_part_sum_by_the_whole_map() {
        let map = [1.0, 2.0, 3.0, 4.0];
        let a = [true, false, false, false];
        let b = [false, false, true, true];
        let s = shares(&map, &[&a, &b]).unwrap();
        assert_eq!(s, vec![0.1, 0.7]);
        assert!(shares(&[0.0; 4], &[&a]).is_err());
    }
}
