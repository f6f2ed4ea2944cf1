//! The pointing game: does the map's peak lie on the object?

use super::error::{FaithError, check_finite, check_len};
use super::mask::{MaskValue, check_mask};

/// The pointing game of Zhang et al. (ECCV 2016) for one map: `true` (a hit) if the map's
/// maximum lies on the object, or within `tolerance_px` pixels (Euclidean) of an object pixel.
///
/// `map` is row-major `[h, w]` and finite; `mask` is `[h, w]` with at least one object pixel.
/// The maximum is the *first* maximal pixel in row-major order, so ties are decided
/// deterministically and a flat map (e.g. an all-zero CAM) points at the top-left corner
/// instead of getting credit for touching the object somewhere. `tolerance_px = 0` demands the
/// exact pixel; Zhang et al. use 15 px at the original image resolution, so scale that to the
/// resolution of `map` (e.g. 15 px of a 500-px-wide photo is about 7 px at 224).
///
/// Errors: wrong lengths, an empty shape, a non-finite map value, an empty mask.
pub fn pointing_game<M: MaskValue>(
    map: &[f32],
    mask: &[M],
    h: usize,
    w: usize,
    tolerance_px: usize,
) -> Result<bool, FaithError> {
    check_len("map", map.len(), 1, h, w)?;
    check_finite("map", map)?;
    check_mask(mask, h, w)?;
    let peak = first_argmax(map);
    let (py, px) = ((peak / w) as i64, (peak % w) as i64);
    let t = tolerance_px as i64;
    for dy in -t..=t {
        for dx in -t..=t {
            let (y, x) = (py + dy, px + dx);
            let inside = (0..h as i64).contains(&y) && (0..w as i64).contains(&x);
            if inside && dy * dy + dx * dx <= t * t && mask[y as usize * w + x as usize].is_object() {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// Row-major index of the first largest value of a non-empty, finite map.
pub(super) fn first_argmax(map: &[f32]) -> usize {
    let mut best = 0;
    for (i, &v) in map.iter().enumerate() {
        if v > map[best] {
            best = i;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 5x5 mask with the object at rows 1-2, columns 1-2.
    fn mask() -> Vec<bool> {
        (0..25)
            .map(|i| (1..=2).contains(&(i / 5)) && (1..=2).contains(&(i % 5)))
            .collect()
    }

    #[test]
    fn hit_and_miss() {
        let mut map = vec![0.0_f32; 25];
        map[2 * 5 + 2] = 1.0;
        assert!(pointing_game(&map, &mask(), 5, 5, 0).unwrap());
        let mut map = vec![0.0_f32; 25];
        map[4 * 5 + 4] = 1.0;
        assert!(!pointing_game(&map, &mask(), 5, 5, 0).unwrap());
        // (4, 4) is sqrt(8) ~ 2.83 px from the nearest object pixel (2, 2).
        assert!(!pointing_game(&map, &mask(), 5, 5, 2).unwrap());
        assert!(pointing_game(&map, &mask(), 5, 5, 3).unwrap());
    }

    #[test]
    fn ties_take_the_first_maximum_and_u8_masks_work() {
        // Two equal peaks: (0, 4) outside the object comes first, (2, 2) inside comes later.
        let mut map = vec![0.0_f32; 25];
        map[4] = 1.0;
        map[12] = 1.0;
        assert!(!pointing_game(&map, &mask(), 5, 5, 0).unwrap());
        let bytes: Vec<u8> = mask().iter().map(|&m| if m { 255 } else { 0 }).collect();
        map[4] = 0.5;
        assert!(pointing_game(&map, &bytes, 5, 5, 0).unwrap());
    }

    #[test]
    fn invalid_inputs_are_errors() {
        let map = vec![0.0_f32; 25];
        assert_eq!(
            pointing_game(&map, &mask()[..24], 5, 5, 0).unwrap_err().to_string(),
            "mask has 24 values but its shape [5, 5] needs 25"
        );
        assert!(matches!(
            pointing_game(&map, &[false; 25], 5, 5, 0),
            Err(FaithError::EmptyMask { .. })
        ));
        let mut nan = map.clone();
        nan[3] = f32::NAN;
        assert!(matches!(
            pointing_game(&nan, &mask(), 5, 5, 0),
            Err(FaithError::NonFinite { index: 3, .. })
        ));
    }
}
