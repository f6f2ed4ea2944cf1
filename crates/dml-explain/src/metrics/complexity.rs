//! Complexity of a map: how concentrated its relevance is, with no ground truth needed. The
//! definitions are Quantus 0.6's (`Sparseness`, `Complexity`, `EffectiveComplexity`, each on
//! `|map|`), checked against its output on the reference cases of kind `explanation_metric`.

use super::input::values;
use crate::faithfulness::FaithError;

/// The Gini index of `|a| + 10⁻⁷` (Chalasani et al., ICML 2020): with the `N` values sorted
/// ascending, `Σ_i (2i − N − 1) a_(i) / (N Σ_i a_i)`, `i = 1..N`. 0 for a uniform map, towards 1
/// when one position holds all the relevance.
pub fn sparseness<T: Copy + Into<f64>>(map: &[T], h: usize, w: usize) -> Result<f64, FaithError> {
    let mut a: Vec<f64> = values("map", map, h, w)?.iter().map(|v| v.abs() + 1e-7).collect();
    a.sort_by(f64::total_cmp);
    let n = a.len() as f64;
    let weighted: f64 = a
        .iter()
        .enumerate()
        .map(|(i, &v)| (2.0 * (i + 1) as f64 - n - 1.0) * v)
        .sum();
    Ok(weighted / (n * a.iter().sum::<f64>()))
}

/// The entropy (natural logarithm) of the map's relevance as a distribution over positions,
/// `−Σ_i p_i ln p_i` with `p_i = |a_i| / Σ_j |a_j|` (Bhatt et al., IJCAI 2020); positions with
/// `p_i = 0` add nothing. `ln(h·w)` for a uniform map, 0 when one position holds everything. A
/// map of zeros has no distribution and is an error.
pub fn complexity<T: Copy + Into<f64>>(map: &[T], h: usize, w: usize) -> Result<f64, FaithError> {
    let a: Vec<f64> = values("map", map, h, w)?.iter().map(|v| v.abs()).collect();
    let total: f64 = a.iter().sum();
    if total == 0.0 {
        return Err(FaithError::ConstantMap {
            what: "map (all zero)",
            measure: "its entropy",
        });
    }
    Ok(-a
        .iter()
        .filter(|&&v| v > 0.0)
        .map(|&v| {
            let p = v / total;
            p * p.ln()
        })
        .sum::<f64>())
}

/// The number of positions whose relevance exceeds `eps` in magnitude, `|{i : |a_i| > eps}|`
/// (Nguyen & Martínez, 2020); `eps ≥ 0`.
pub fn effective_complexity<T: Copy + Into<f64>>(map: &[T], h: usize, w: usize, eps: f64) -> Result<f64, FaithError> {
    if !(eps >= 0.0 && eps.is_finite()) {
        return Err(FaithError::Parameter {
            name: "eps",
            value: eps,
            reason: "must be a finite number ≥ 0".into(),
        });
    }
    Ok(values("map", map, h, w)?.iter().filter(|v| v.abs() > eps).count() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_and_concentrated_maps_are_the_extremes() {
        let uniform = [0.5f64; 12];
        assert!(sparseness(&uniform, 3, 4).unwrap().abs() < 1e-9);
        assert!((complexity(&uniform, 3, 4).unwrap() - 12f64.ln()).abs() < 1e-12);
        let mut peak = [0.0f64; 12];
        peak[5] = 2.0;
        assert!(sparseness(&peak, 3, 4).unwrap() > 0.9);
        assert_eq!(complexity(&peak, 3, 4).unwrap(), 0.0);
        assert_eq!(effective_complexity(&peak, 3, 4, 0.0).unwrap(), 1.0);
        // Negative relevance counts by its magnitude.
        assert_eq!(effective_complexity(&[-1.0f64, 0.2, 0.0, 3.0], 2, 2, 0.5).unwrap(), 2.0);
        let e = effective_complexity(&peak, 3, 4, -1.0).unwrap_err().to_string();
        assert!(e.contains("eps = -1"), "{e}");
        let e = complexity(&[0.0f64; 4], 2, 2).unwrap_err().to_string();
        assert!(e.contains("all zero"), "{e}");
    }
}
