//! Overlap of the thresholded map with the object mask.

use super::error::{FaithError, check_finite, check_len};
use super::mask::{MaskValue, check_mask};

/// The threshold fraction used unless a study says otherwise: half of the normalised map's
/// range, a common way to binarise CAMs. A study that follows another protocol passes its own
/// (Grad-CAM's weakly-supervised localisation, for instance, keeps values above 15 % of the
/// maximum).
pub const DEFAULT_IOU_THRESHOLD: f64 = 0.5;

/// Intersection over union of the map's salient region with the object mask.
///
/// The map (row-major `[h, w]`, finite) is min-max normalised to `[0, 1]` and the salient
/// region is every pixel with normalised value `>= threshold_fraction`, i.e. `v >= min +
/// threshold_fraction * (max - min)` (a fraction of the normalised maximum 1). A constant map
/// selects every pixel (there is no contrast to threshold). Normalising first makes the
/// threshold independent of the map's units and of an offset, so maps of different methods
/// are thresholded alike. The salient region is never empty (it holds the maximum), and the
/// mask must mark at least one object pixel, so the union is never empty.
///
/// Returns `|salient ∩ object| / |salient ∪ object|` in `[0, 1]`. Errors: wrong lengths, an
/// empty shape, a non-finite map value, an empty mask, `threshold_fraction` outside `[0, 1]`.
pub fn iou_at_threshold<M: MaskValue>(
    map: &[f32],
    mask: &[M],
    h: usize,
    w: usize,
    threshold_fraction: f64,
) -> Result<f64, FaithError> {
    if !(0.0..=1.0).contains(&threshold_fraction) {
        return Err(FaithError::Threshold(threshold_fraction));
    }
    check_len("map", map.len(), 1, h, w)?;
    check_finite("map", map)?;
    check_mask(mask, h, w)?;
    let min = map.iter().fold(f64::INFINITY, |m, &v| m.min(f64::from(v)));
    let max = map.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(f64::from(v)));
    let span = max - min;
    let (mut intersection, mut union) = (0_usize, 0_usize);
    for (&v, m) in map.iter().zip(mask) {
        // In f64 so that the maximum normalises to exactly 1 and a threshold of 1 keeps it.
        let salient = span == 0.0 || (f64::from(v) - min) / span >= threshold_fraction;
        let object = m.is_object();
        intersection += usize::from(salient && object);
        union += usize::from(salient || object);
    }
    Ok(intersection as f64 / union as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_computed_overlap_in_four_by_four() {
        // Object: the 2x2 block at rows 1-2, columns 1-2. Salient (>= 0.5 after min-max
        // normalisation of values in [0, 10]): rows 1-2, columns 2-3. Overlap: column 2 of
        // rows 1-2 = 2 pixels; union = 4 + 4 - 2 = 6; IoU = 1/3.
        let mask: Vec<u8> = (0..16)
            .map(|i| u8::from((1..=2).contains(&(i / 4)) && (1..=2).contains(&(i % 4))))
            .collect();
        let map: Vec<f32> = (0..16)
            .map(|i| {
                if (1..=2).contains(&(i / 4)) && i % 4 >= 2 {
                    10.0
                } else if i == 0 {
                    0.0
                } else {
                    4.0
                }
            })
            .collect();
        assert_eq!(iou_at_threshold(&map, &mask, 4, 4, 0.5).unwrap(), 2.0 / 6.0);
        // At threshold 0.4 every pixel valued 4 (normalised 0.4) joins: salient = 15 pixels,
        // which contain all 4 object pixels, so IoU = 4 / 15.
        assert_eq!(iou_at_threshold(&map, &mask, 4, 4, 0.4).unwrap(), 4.0 / 15.0);
        // A map equal to the mask gives 1 at any threshold in (0, 1].
        let exact: Vec<f32> = mask.iter().map(|&m| f32::from(m) * 3.0 - 1.0).collect();
        assert_eq!(iou_at_threshold(&exact, &mask, 4, 4, 1.0).unwrap(), 1.0);
        // A constant map selects everything: 4 / 16.
        assert_eq!(iou_at_threshold(&[2.0; 16], &mask, 4, 4, 0.5).unwrap(), 0.25);
    }

    #[test]
    fn bad_thresholds_and_masks_are_errors() {
        let mask = [true, false, false, false];
        assert!(matches!(
            iou_at_threshold(&[0.0; 4], &mask, 2, 2, 1.5),
            Err(FaithError::Threshold(_))
        ));
        assert!(iou_at_threshold(&[0.0; 4], &mask, 2, 2, f64::NAN).is_err());
        assert!(matches!(
            iou_at_threshold(&[0.0; 4], &[0_u8; 4], 2, 2, 0.5),
            Err(FaithError::EmptyMask { .. })
        ));
        assert!(iou_at_threshold(&[0.0; 3], &mask, 2, 2, 0.5).is_err());
    }
}
