//! Localisation against a ground-truth mask: does the map's relevance lie on the object (or the
//! part) the mask marks? The definitions are Quantus 0.6's (`PointingGame`,
//! `RelevanceMassAccuracy`, `TopKIntersection`, `RelevanceRankAccuracy`, `AUC`), checked against
//! its output on the reference cases of kind `explanation_metric`.
//!
//! Every function takes a row-major map `[h, w]` (larger is more relevant; `f32` or `f64`) and a
//! mask `[h, w]` with at least one object pixel, and returns one score per map.

use super::input::{descending, map_and_mask};
use crate::analysis::mid_ranks;
use crate::faithfulness::{FaithError, MaskValue};

/// 1 if a position of the map's maximum lies in the mask (any of them, when the maximum is
/// tied), else 0 (Zhang et al., ECCV 2016, as Quantus computes it; unlike
/// [`faithfulness::pointing_game`](crate::faithfulness::pointing_game), which takes the first
/// maximum and a tolerance).
pub fn pointing_game<T: Copy + Into<f64>, M: MaskValue>(
    map: &[T],
    mask: &[M],
    h: usize,
    w: usize,
) -> Result<f64, FaithError> {
    let (map, object) = map_and_mask(map, mask, h, w)?;
    let max = map.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let hit = map.iter().zip(&object).any(|(&v, &o)| v == max && o);
    Ok(if hit { 1.0 } else { 0.0 })
}

/// The share of the map's mass inside the mask, `Σ_{i ∈ mask} a_i / Σ_i a_i` (Arras et al.,
/// *CLEVR-XAI*, 2022). Meant for non-negative maps; a map summing to zero has no mass and is an
/// error.
pub fn relevance_mass_accuracy<T: Copy + Into<f64>, M: MaskValue>(
    map: &[T],
    mask: &[M],
    h: usize,
    w: usize,
) -> Result<f64, FaithError> {
    let (map, object) = map_and_mask(map, mask, h, w)?;
    let total: f64 = map.iter().sum();
    if total == 0.0 {
        return Err(FaithError::ConstantMap {
            what: "map (zero mass)",
            measure: "its relevance mass",
        });
    }
    let inside: f64 = map.iter().zip(&object).filter(|(_, o)| **o).map(|(v, _)| v).sum();
    Ok(inside / total)
}

/// The fraction of the map's `k` largest positions that lie in the mask (Theiner et al., 2021),
/// `|top_k(a) ∩ mask| / k`, `1 ≤ k ≤ h·w`; ties at the k-th value are broken by position.
pub fn top_k_intersection<T: Copy + Into<f64>, M: MaskValue>(
    map: &[T],
    mask: &[M],
    h: usize,
    w: usize,
    k: usize,
) -> Result<f64, FaithError> {
    let (map, object) = map_and_mask(map, mask, h, w)?;
    if k == 0 || k > map.len() {
        return Err(FaithError::Parameter {
            name: "k",
            value: k as f64,
            reason: format!("must be in 1..={} (the map's positions)", map.len()),
        });
    }
    Ok(top_k_hits(&map, &object, k) as f64 / k as f64)
}

/// [`top_k_intersection`] with `k` the mask's size (Arras et al., 2022): the fraction of the
/// mask that the map's `|mask|` largest positions cover.
pub fn relevance_rank_accuracy<T: Copy + Into<f64>, M: MaskValue>(
    map: &[T],
    mask: &[M],
    h: usize,
    w: usize,
) -> Result<f64, FaithError> {
    let (map, object) = map_and_mask(map, mask, h, w)?;
    let k = object.iter().filter(|&&o| o).count();
    Ok(top_k_hits(&map, &object, k) as f64 / k as f64)
}

/// How many of the `k` largest positions of `map` are object pixels.
fn top_k_hits(map: &[f64], object: &[bool], k: usize) -> usize {
    descending(map).into_iter().take(k).filter(|&i| object[i]).count()
}

/// The ROC AUC of the map as a score for the mask's pixels: the probability that an object
/// pixel outranks a background pixel, ties counted one half (`(R₊ − n₊(n₊+1)/2) / (n₊ n₋)` with
/// `R₊` the sum of the object pixels' mid-ranks: the Mann–Whitney `U` of the object pixels over
/// `n₊ n₋`; scikit-learn's `roc_auc_score`). The mask
/// must mark some pixels and not all.
pub fn roc_auc<T: Copy + Into<f64>, M: MaskValue>(
    map: &[T],
    mask: &[M],
    h: usize,
    w: usize,
) -> Result<f64, FaithError> {
    let (map, object) = map_and_mask(map, mask, h, w)?;
    let positives = object.iter().filter(|&&o| o).count();
    let negatives = object.len() - positives;
    if negatives == 0 {
        return Err(FaithError::FullMask { h, w });
    }
    let (ranks, _) = mid_ranks(&map);
    let rank_sum: f64 = ranks.iter().zip(&object).filter(|(_, o)| **o).map(|(r, _)| r).sum();
    let (p, n) = (positives as f64, negatives as f64);
    Ok((rank_sum - p * (p + 1.0) / 2.0) / (p * n))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAP: [f32; 6] = [0.1, 0.9, 0.3, 0.9, 0.2, 0.0];
    const MASK: [u8; 6] = [0, 0, 0, 1, 1, 0];

    #[test]
    fn scores_follow_their_definitions() {
        // The maximum 0.9 is tied at positions 1 and 3; 3 is in the mask.
        assert_eq!(pointing_game(&MAP, &MASK, 2, 3).unwrap(), 1.0);
        let mass = relevance_mass_accuracy(&MAP, &MASK, 2, 3).unwrap();
        assert!((mass - 1.1 / 2.4).abs() < 1e-6, "{mass}");
        // Top 2: positions 1 and 3 (tie kept in index order): one of two in the mask.
        assert_eq!(top_k_intersection(&MAP, &MASK, 2, 3, 2).unwrap(), 0.5);
        assert_eq!(relevance_rank_accuracy(&MAP, &MASK, 2, 3).unwrap(), 0.5);
        // Object scores 0.9 and 0.2 against 0.1, 0.9, 0.3, 0.0: wins 3 + 0.5 tie, then 2, of 8.
        let auc = roc_auc(&MAP, &MASK, 2, 3).unwrap();
        assert!((auc - 5.5 / 8.0).abs() < 1e-12, "{auc}");
    }

    #[test]
    fn bad_input_is_named() {
        let e = pointing_game(&MAP[..5], &MASK, 2, 3).unwrap_err().to_string();
        assert!(e.contains("map has 5 values but its shape [2, 3] needs 6"), "{e}");
        let e = roc_auc(&MAP, &[1u8; 6], 2, 3).unwrap_err().to_string();
        assert!(e.contains("marks every pixel"), "{e}");
        let e = top_k_intersection(&MAP, &MASK, 2, 3, 7).unwrap_err().to_string();
        assert!(e.contains("k = 7") && e.contains("1..=6"), "{e}");
        let e = relevance_rank_accuracy(&MAP, &[0u8; 6], 2, 3).unwrap_err().to_string();
        assert!(e.contains("marks no object pixel"), "{e}");
        let e = relevance_mass_accuracy(&[0.0f32; 6], &MASK, 2, 3)
            .unwrap_err()
            .to_string();
        assert!(e.contains("zero mass"), "{e}");
        let nan = [0.0, f32::NAN, 0.0, 0.0, 0.0, 0.0];
        let e = pointing_game(&nan, &MASK, 2, 3).unwrap_err().to_string();
        assert!(e.contains("non-finite value NaN at index 1"), "{e}");
    }
}
