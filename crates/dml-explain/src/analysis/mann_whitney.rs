//! The Mann–Whitney U test (Mann & Whitney, 1947; the paper's ref. 21), with which the paper
//! compares the NR-Precision of ranking and classification losses per property (Sec. 4.2, 1 %
//! level).
//!
//! This reproduces `scipy.stats.mannwhitneyu(x, y, use_continuity=True,
//! method="asymptotic")` (scipy ≥ 1.7, whose statistic is `U1`, the one of `x`):
//!
//! - mid-ranks `r` of the pooled sample (tied values share the mean of their ranks);
//! - `U1 = R1 - n1 (n1 + 1) / 2` with `R1` the rank sum of `x`, `U2 = n1 n2 - U1`;
//! - `μ = n1 n2 / 2`, `σ = sqrt(n1 n2 / 12 · ((n + 1) - Σ (t³ - t) / (n (n - 1))))` over the
//!   sizes `t` of the tie groups, `n = n1 + n2`;
//! - one-sided `p = sf((U - μ - ½) / σ)`, with `U = U1` for "greater" (`x` stochastically
//!   larger) and `U = U2` for "less", the standard normal survival function `sf`;
//! - two-sided `p = min(1, 2 sf((max(U1, U2) - μ - ½) / σ))`.
//!
//! The continuity correction is always `-½` on the statistic of the alternative, which is
//! scipy's convention (not `±½` towards the mean); it is why `p_greater + p_less` exceeds 1.
//! scipy before 1.7 returned `min(U1, U2)` and a one-sided p by default, so older numbers
//! differ.

use statrs::distribution::{ContinuousCDF, Normal};

use super::error::AnalysisError;

/// The Mann–Whitney U test of `x` against `y`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct MannWhitney {
    /// `n1 = |x|`.
    pub n1: usize,
    /// `n2 = |y|`.
    pub n2: usize,
    /// `U1 = R1 - n1 (n1 + 1) / 2`, the number of pairs `(x_i, y_j)` with `x_i > y_j`, ties
    /// counting ½ (what scipy ≥ 1.7 returns as `statistic`).
    pub u1: f64,
    /// `U2 = n1 n2 - U1`.
    pub u2: f64,
    /// `μ = n1 n2 / 2`, the mean of `U` under the null hypothesis.
    pub mean_u: f64,
    /// The tie-corrected standard deviation of `U` under the null hypothesis,
    /// `sqrt(n1 n2 / 12 · ((n + 1) - Σ (t³ - t) / (n (n - 1))))`.
    pub sd_u: f64,
    /// Sizes of the groups of equal values in the pooled sample (only groups of 2 or more), in
    /// ascending order of the value; `-0.0` and `0.0` are one value.
    pub tie_group_sizes: Vec<usize>,
    /// Two-sided p-value, `min(1, 2 sf((max(U1, U2) - μ - ½) / σ))`.
    pub p_two_sided: f64,
    /// One-sided p-value for "`x` is stochastically greater than `y`", `sf((U1 - μ - ½) / σ)`.
    pub p_greater: f64,
    /// One-sided p-value for "`x` is stochastically less than `y`", `sf((U2 - μ - ½) / σ)`.
    pub p_less: f64,
}

/// The asymptotic Mann–Whitney U test with continuity correction, as
/// `scipy.stats.mannwhitneyu(x, y, use_continuity=True, method="asymptotic")` (module docs).
///
/// `x`: `[n1]`, `y`: `[n2]` (e.g. the NR-Precisions of the ranking and of the classification
/// losses for one property).
///
/// When every pooled value is equal, `σ = 0` and the statistic is exactly `μ`: scipy's
/// `z = -½ / 0 = -∞` gives `p = 1` for every alternative, and so does this function.
///
/// # Errors
/// [`AnalysisError::Empty`] when `x` or `y` is empty, [`AnalysisError::InvalidValue`] for a NaN
/// (scipy would propagate it into a NaN p-value).
pub fn mann_whitney_u(x: &[f64], y: &[f64]) -> Result<MannWhitney, AnalysisError> {
    for (what, sample) in [("x", x), ("y", y)] {
        if sample.is_empty() {
            return Err(AnalysisError::Empty { what: what.into() });
        }
        if let Some(index) = sample.iter().position(|v| v.is_nan()) {
            return Err(AnalysisError::InvalidValue {
                what: what.into(),
                index,
                value: f64::NAN,
                reason: "NaN has no rank",
            });
        }
    }
    let (n1, n2) = (x.len(), y.len());
    let pooled: Vec<f64> = x.iter().chain(y).copied().collect();
    let (ranks, tie_group_sizes) = mid_ranks(&pooled);
    let r1: f64 = ranks[..n1].iter().sum();
    let (n1f, n2f) = (n1 as f64, n2 as f64);
    let u1 = r1 - n1f * (n1f + 1.0) / 2.0;
    let u2 = n1f * n2f - u1;
    let mean_u = n1f * n2f / 2.0;
    let n = n1f + n2f;
    let tie_term: f64 = tie_group_sizes.iter().map(|&t| (t as f64).powi(3) - t as f64).sum();
    // n ≥ 2 here (both samples non-empty), so n (n - 1) > 0; all values equal gives exactly
    // (n + 1) - (n³ - n) / (n (n - 1)) = 0.
    let sd_u = (n1f * n2f / 12.0 * ((n + 1.0) - tie_term / (n * (n - 1.0))))
        .max(0.0)
        .sqrt();
    let normal = Normal::standard();
    let sf = |u: f64| {
        if sd_u > 0.0 {
            normal.sf((u - mean_u - 0.5) / sd_u)
        } else {
            // U = μ: the numerator is -½ and the z-score -∞.
            1.0
        }
    };
    Ok(MannWhitney {
        n1,
        n2,
        u1,
        u2,
        mean_u,
        sd_u,
        tie_group_sizes,
        p_two_sided: (2.0 * sf(u1.max(u2))).min(1.0),
        p_greater: sf(u1),
        p_less: sf(u2),
    })
}

/// The mid-ranks (1-based, ties averaged, as `scipy.stats.rankdata(method="average")`) of
/// `values` in their original order, and the sizes of the tie groups larger than 1 in
/// ascending order of the value.
///
/// `values` must hold no NaN (the Mann–Whitney test and the explanation metrics reject NaN
/// before ranking). Equality is numeric (`partial_cmp`), so `-0.0` and `0.0` tie,
/// as in numpy; `total_cmp` would rank them apart.
pub(crate) fn mid_ranks(values: &[f64]) -> (Vec<f64>, Vec<usize>) {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&a, &b| {
        values[a]
            .partial_cmp(&values[b])
            .expect("NaN was rejected before ranking")
    });
    let mut ranks = vec![0.0; values.len()];
    let mut ties = Vec::new();
    let mut start = 0;
    while start < order.len() {
        let mut end = start + 1;
        while end < order.len() && values[order[end]] == values[order[start]] {
            end += 1;
        }
        // Positions start..end (0-based) hold ranks start + 1 ..= end; their mean:
        let rank = (start + 1 + end) as f64 / 2.0;
        for &i in &order[start..end] {
            ranks[i] = rank;
        }
        if end - start > 1 {
            ties.push(end - start);
        }
        start = end;
    }
    (ranks, ties)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(got: f64, want: f64) -> bool {
        (got - want).abs() <= 1e-12 * want.abs().max(1.0)
    }

    /// For p-values against Python's `math.erfc`: statrs' `erfc` agrees with it to about
    /// 5e-11 relative (measured over z in [-3, 8]), not to the last bit, so the hand values
    /// are compared at 1e-9 relative (the oracle cases need only 1e-6 absolute).
    fn close_p(got: f64, want: f64) -> bool {
        (got - want).abs() <= 1e-9 * want.abs()
    }

    #[test]
    fn separated_samples_without_ties() {
        // x below y: R1 = 1 + 2, U1 = 0, U2 = 4, μ = 2, σ = sqrt(4 / 12 · 5).
        let t = mann_whitney_u(&[1.0, 2.0], &[3.0, 4.0]).unwrap();
        assert_eq!((t.u1, t.u2, t.mean_u), (0.0, 4.0, 2.0));
        assert!(close(t.sd_u, (5.0f64 / 3.0).sqrt()));
        assert!(t.tie_group_sizes.is_empty());
        // sf values from 0.5 erfc(z / √2) at z = ±1.5 / σ and -2.5 / σ (Python's math.erfc).
        assert!(close_p(t.p_two_sided, 0.24527811680677286), "{t:?}");
        assert!(close_p(t.p_greater, 0.9735962442919432), "{t:?}");
        assert!(close_p(t.p_less, 0.12263905840338643), "{t:?}");
    }

    #[test]
    fn ties_get_mid_ranks_and_shrink_the_deviation() {
        // Pooled 1, 2, 2, 2, 3: ranks 1, 3, 3, 3, 5; R1 = 1 + 3 + 3 = 7, U1 = 7 - 6 = 1, U2 = 5.
        // σ = sqrt(6 / 12 · (6 - 24 / 20)) = sqrt(2.4).
        let t = mann_whitney_u(&[1.0, 2.0, 2.0], &[2.0, 3.0]).unwrap();
        assert_eq!((t.u1, t.u2, t.mean_u), (1.0, 5.0, 3.0));
        assert_eq!(t.tie_group_sizes, vec![3]);
        assert!(close(t.sd_u, 2.4f64.sqrt()));
        assert!(close_p(t.p_two_sided, 0.33292160806556603), "{t:?}");
        assert!(close_p(t.p_greater, 0.9467084152125562), "{t:?}");
        assert!(close_p(t.p_less, 0.16646080403278302), "{t:?}");
    }

    #[test]
    fn negative_zero_ties_with_zero() {
        let t = mann_whitney_u(&[0.0, 1.0], &[-0.0, 2.0]).unwrap();
        assert_eq!(t.tie_group_sizes, vec![2]);
        assert_eq!(t.u1, 1.5);
    }

    #[test]
    fn u_counts_pairs_and_swapping_swaps_the_alternatives() {
        let x = [0.3, 1.6, 1.0, 2.4, 0.2, 1.0];
        let y = [-0.3, 0.4, 0.3, 1.0, -0.2];
        let t = mann_whitney_u(&x, &y).unwrap();
        let pairs: f64 = x
            .iter()
            .flat_map(|a| {
                y.iter().map(move |b| {
                    if a > b {
                        1.0
                    } else if a == b {
                        0.5
                    } else {
                        0.0
                    }
                })
            })
            .sum();
        assert_eq!(t.u1, pairs);
        let s = mann_whitney_u(&y, &x).unwrap();
        assert_eq!((s.u1, s.u2), (t.u2, t.u1));
        assert!(close(s.p_greater, t.p_less) && close(s.p_less, t.p_greater));
        assert!(close(s.p_two_sided, t.p_two_sided));
    }

    #[test]
    fn all_equal_values_give_p_one() {
        let t = mann_whitney_u(&[2.0, 2.0], &[2.0, 2.0, 2.0]).unwrap();
        assert_eq!(t.sd_u, 0.0);
        assert_eq!((t.p_two_sided, t.p_greater, t.p_less), (1.0, 1.0, 1.0));
    }

    #[test]
    fn two_sided_p_is_capped_at_one() {
        // U1 = U2 = μ: 2 sf(-½ / σ) > 1 before the cap.
        let t = mann_whitney_u(&[1.0, 4.0], &[2.0, 3.0]).unwrap();
        assert_eq!(t.u1, t.mean_u);
        assert_eq!(t.p_two_sided, 1.0);
    }

    #[test]
    fn empty_or_nan_samples_are_errors() {
        assert!(matches!(mann_whitney_u(&[], &[1.0]).unwrap_err(), AnalysisError::Empty { ref what } if what == "x"));
        assert!(matches!(mann_whitney_u(&[1.0], &[]).unwrap_err(), AnalysisError::Empty { ref what } if what == "y"));
        let e = mann_whitney_u(&[1.0], &[0.0, f64::NAN]).unwrap_err();
        assert!(matches!(e, AnalysisError::InvalidValue { index: 1, .. }), "{e}");
    }
}
