//! How similar two maps are, for randomisation and partner-sensitivity tests: Spearman's rank
//! correlation (signed and of magnitudes) and the structural similarity index, as SciPy and
//! scikit-image compute them, checked against them on the reference cases of kind
//! `map_similarity`.

use super::input::values;
use crate::analysis::mid_ranks;
use crate::faithfulness::FaithError;

/// Spearman's rank correlation of two maps of shape `[h, w]`: the Pearson correlation of their
/// positions' ranks, ties given their average rank (`scipy.stats.spearmanr` on the flattened
/// maps). With `magnitude`, the ranks are those of `|a|` and `|b|` (whether the same positions
/// matter, whatever their sign). A constant map has no ranking and is an error.
pub fn spearman<T: Copy + Into<f64>>(a: &[T], b: &[T], h: usize, w: usize, magnitude: bool) -> Result<f64, FaithError> {
    let prepare = |what, map: &[T]| -> Result<Vec<f64>, FaithError> {
        let v = values(what, map, h, w)?;
        Ok(if magnitude {
            v.iter().map(|x| x.abs()).collect()
        } else {
            v
        })
    };
    let (a, b) = (prepare("first map", a)?, prepare("second map", b)?);
    let (ra, rb) = (mid_ranks(&a).0, mid_ranks(&b).0);
    let mean = (ra.len() as f64 + 1.0) / 2.0;
    let (mut sab, mut saa, mut sbb) = (0.0, 0.0, 0.0);
    for (x, y) in ra.iter().zip(&rb) {
        let (dx, dy) = (x - mean, y - mean);
        sab += dx * dy;
        saa += dx * dx;
        sbb += dy * dy;
    }
    for (what, s) in [("first map", saa), ("second map", sbb)] {
        if s == 0.0 {
            return Err(FaithError::ConstantMap {
                what,
                measure: "the rank correlation",
            });
        }
    }
    Ok(sab / (saa * sbb).sqrt())
}

/// Side of the structural similarity's square window (scikit-image's default).
pub const SSIM_WINDOW: usize = 7;

/// The structural similarity index of two maps of shape `[h, w]` (Wang et al., 2004), as
/// scikit-image's `structural_similarity` computes it by default: for every `7 × 7` window,
/// `(2 μ_a μ_b + C₁)(2 σ_ab + C₂) / ((μ_a² + μ_b² + C₁)(σ_a² + σ_b² + C₂))` with sample
/// (co)variances (divided by 48), `C₁ = (0.01 L)²`, `C₂ = (0.03 L)²` and `L` the data range (the
/// larger maximum minus the smaller minimum of the two maps); the mean over the windows whose
/// centre lies at least 3 positions from every border. Both sides must be at least 7; two equal
/// constant maps (`L = 0`) are an error.
pub fn ssim<T: Copy + Into<f64>>(a: &[T], b: &[T], h: usize, w: usize) -> Result<f64, FaithError> {
    let (a, b) = (values("first map", a, h, w)?, values("second map", b, h, w)?);
    if h < SSIM_WINDOW || w < SSIM_WINDOW {
        return Err(FaithError::Parameter {
            name: "shape",
            value: h.min(w) as f64,
            reason: format!("[{h}, {w}] is smaller than the {SSIM_WINDOW} × {SSIM_WINDOW} window"),
        });
    }
    let (lo, hi) = a
        .iter()
        .chain(&b)
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &v| {
            (lo.min(v), hi.max(v))
        });
    let range = hi - lo;
    if range == 0.0 {
        return Err(FaithError::ConstantMap {
            what: "both maps (data range 0)",
            measure: "SSIM",
        });
    }
    let (c1, c2) = ((0.01 * range).powi(2), (0.03 * range).powi(2));
    let n = (SSIM_WINDOW * SSIM_WINDOW) as f64;
    let half = SSIM_WINDOW / 2;
    let mut total = 0.0;
    let mut windows = 0usize;
    for cy in half..h - half {
        for cx in half..w - half {
            let (mut sa, mut sb, mut saa, mut sbb, mut sab) = (0.0, 0.0, 0.0, 0.0, 0.0);
            for y in cy - half..=cy + half {
                for x in cx - half..=cx + half {
                    let (p, q) = (a[y * w + x], b[y * w + x]);
                    sa += p;
                    sb += q;
                    saa += p * p;
                    sbb += q * q;
                    sab += p * q;
                }
            }
            let (ma, mb) = (sa / n, sb / n);
            // scikit-image's sample covariance: n / (n − 1) times the population one.
            let norm = n / (n - 1.0);
            let va = norm * (saa / n - ma * ma);
            let vb = norm * (sbb / n - mb * mb);
            let vab = norm * (sab / n - ma * mb);
            total += ((2.0 * ma * mb + c1) * (2.0 * vab + c2)) / ((ma * ma + mb * mb + c1) * (va + vb + c2));
            windows += 1;
        }
    }
    Ok(total / windows as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ramp(h: usize, w: usize) -> Vec<f64> {
        (0..h * w).map(|i| ((i * 7) % 11) as f64 - 5.0).collect()
    }

    #[test]
    fn identical_maps_score_one_and_reversed_minus_one() {
        let a = ramp(8, 9);
        assert!((spearman(&a, &a, 8, 9, false).unwrap() - 1.0).abs() < 1e-12);
        let reversed: Vec<f64> = a.iter().map(|v| -v).collect();
        assert!((spearman(&a, &reversed, 8, 9, false).unwrap() + 1.0).abs() < 1e-12);
        // Negating keeps every magnitude, so the magnitudes still agree perfectly.
        assert!((spearman(&a, &reversed, 8, 9, true).unwrap() - 1.0).abs() < 1e-12);
        assert!((ssim(&a, &a, 8, 9).unwrap() - 1.0).abs() < 1e-12);
        assert!(ssim(&a, &reversed, 8, 9).unwrap() < 0.0);
    }

    #[test]
    fn undefined_cases_are_named() {
        let a = ramp(8, 9);
        let flat = vec![1.0; 72];
        let e = spearman(&a, &flat, 8, 9, false).unwrap_err().to_string();
        assert!(e.contains("second map is constant"), "{e}");
        let e = ssim(&a[..30], &a[..30], 5, 6).unwrap_err().to_string();
        assert!(e.contains("[5, 6] is smaller than the 7 × 7 window"), "{e}");
        let e = ssim(&flat, &flat, 8, 9).unwrap_err().to_string();
        assert!(e.contains("data range 0"), "{e}");
    }
}
