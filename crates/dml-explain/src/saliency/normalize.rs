//! The saliency maps' normalisation: `(g − min) / (p99 − min)` clipped to `[0, 1]`.

/// NumPy's `np.percentile(values, q)` with its default linear interpolation: the sorted values
/// at rank `q/100 · (n − 1)`, interpolated between the two neighbouring ranks. `None` for no
/// values or a non-finite one.
pub fn percentile(values: &[f32], q: f64) -> Option<f64> {
    if values.is_empty() || values.iter().any(|v| !v.is_finite()) || !(0.0..=100.0).contains(&q) {
        return None;
    }
    let mut sorted: Vec<f64> = values.iter().map(|&v| f64::from(v)).collect();
    sorted.sort_by(f64::total_cmp);
    let rank = q / 100.0 * (sorted.len() - 1) as f64;
    let lo = rank.floor() as usize;
    let hi = (lo + 1).min(sorted.len() - 1);
    Some(sorted[lo] + (rank - lo as f64) * (sorted[hi] - sorted[lo]))
}

/// A saliency map normalised as the authors' code does: `(g − min g) / (p99 − min g)` clipped to
/// `[0, 1]`, with `p99` the 99th percentile ([`percentile`]); returns the map and `p99`. A map whose
/// 99th percentile equals its minimum becomes zeros (nothing stands out); `None` for an empty map
/// or a non-finite value.
pub fn normalize_p99(map: &[f32]) -> Option<(Vec<f32>, f64)> {
    let p99 = percentile(map, 99.0)?;
    let min = map.iter().fold(f64::INFINITY, |m, &v| m.min(f64::from(v)));
    let range = p99 - min;
    let out = map
        .iter()
        .map(|&v| {
            if range > 0.0 {
                ((f64::from(v) - min) / range).clamp(0.0, 1.0) as f32
            } else {
                0.0
            }
        })
        .collect();
    Some((out, p99))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_matches_numpy_linear_interpolation() {
        // np.percentile([1, 2, 3, 4], 99) = 3 + 0.97 * 1 = 3.97; np.percentile([5], 99) = 5.
        assert!((percentile(&[4.0, 1.0, 3.0, 2.0], 99.0).unwrap() - 3.97).abs() < 1e-12);
        assert_eq!(percentile(&[5.0], 99.0), Some(5.0));
        assert_eq!(percentile(&[], 99.0), None);
        assert_eq!(percentile(&[f32::NAN], 99.0), None);
        let (map, p99) = normalize_p99(&[0.0, 1.0, 2.0, 100.0]).unwrap();
        // p99 = 2 + 0.97 * 98 = 97.06; 100 clips to 1.
        assert!((p99 - 97.06).abs() < 1e-9);
        assert_eq!(map[3], 1.0);
        assert!((map[2] - (2.0 / 97.06) as f32).abs() < 1e-7);
        assert_eq!(normalize_p99(&[3.0, 3.0]).unwrap().0, vec![0.0, 0.0]);
    }
}
