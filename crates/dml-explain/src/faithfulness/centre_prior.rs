//! The centre-prior baseline map.

/// The centre prior's standard deviation as a fraction of the image's shorter side.
pub const CENTRE_PRIOR_SIGMA_FRACTION: f64 = 0.25;

/// The centre-prior baseline: an isotropic Gaussian `exp(-d² / (2σ²))` centred in the image,
/// row-major `[h, w]`, with `d` the distance of a pixel centre from the image centre
/// `((h - 1) / 2, (w - 1) / 2)` and `σ = CENTRE_PRIOR_SIGMA_FRACTION * min(h, w)`.
///
/// Report the pointing game and IoU of this map next to a method's: objects in retrieval data
/// sets are mostly centred, so a method is only informative where it beats this map that looks
/// at nothing. The peak value is 1 (at the centre pixel when `h` and `w` are odd; for even
/// sides the four central pixels tie and [`super::pointing_game`] takes the first of them), and
/// the map is exactly symmetric under horizontal and vertical flips. Empty for a zero side.
pub fn centre_prior(h: usize, w: usize) -> Vec<f32> {
    let sigma = CENTRE_PRIOR_SIGMA_FRACTION * h.min(w) as f64;
    let (cy, cx) = ((h as f64 - 1.0) / 2.0, (w as f64 - 1.0) / 2.0);
    let mut map = Vec::with_capacity(h * w);
    for y in 0..h {
        for x in 0..w {
            // Offsets are multiples of 0.5 and exact, so mirrored pixels get identical values.
            let d2 = (y as f64 - cy).powi(2) + (x as f64 - cx).powi(2);
            map.push((-d2 / (2.0 * sigma * sigma)).exp() as f32);
        }
    }
    map
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peaks_at_the_centre_and_is_symmetric() {
        let (h, w) = (9, 13);
        let map = centre_prior(h, w);
        assert_eq!(map.len(), h * w);
        assert_eq!(map[4 * w + 6], 1.0);
        assert!(map.iter().all(|&v| v > 0.0 && v <= 1.0));
        for y in 0..h {
            for x in 0..w {
                assert_eq!(map[y * w + x], map[(h - 1 - y) * w + x]);
                assert_eq!(map[y * w + x], map[y * w + (w - 1 - x)]);
            }
        }
        // sigma = 0.25 * min(9, 13) = 2.25 px, so 4 px right of the centre the value is
        // exp(-16 / (2 * 2.25^2)).
        let expected = (-16.0_f64 / (2.0 * 2.25 * 2.25)).exp() as f32;
        assert_eq!(map[4 * w + 10], expected);
        assert!(centre_prior(0, 5).is_empty());
    }

    #[test]
    fn even_sides_tie_at_the_four_central_pixels() {
        let map = centre_prior(4, 4);
        let centre = [map[5], map[6], map[9], map[10]];
        assert!(centre.iter().all(|&v| v == centre[0]));
        assert!(map.iter().all(|&v| v <= centre[0]));
    }
}
