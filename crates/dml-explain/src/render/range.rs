//! The value range a colour scale spans, shared by the overlays and the colour bar of a figure.

use super::error::RenderError;

/// A closed value interval `[min, max]` that the colormap's `[0, 1]` is stretched over.
///
/// One range is shared by every map of a figure, so equal colours mean equal values across its
/// columns and the colour bar's labels hold for all of them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ValueRange {
    /// The value drawn as colormap position 0 (dark blue).
    pub min: f32,
    /// The value drawn as colormap position 1 (dark red).
    pub max: f32,
}

impl ValueRange {
    /// A range from its ends; both must be finite with `min <= max`.
    pub fn new(min: f32, max: f32) -> Result<Self, RenderError> {
        if min.is_finite() && max.is_finite() && min <= max {
            Ok(Self { min, max })
        } else {
            Err(RenderError::Range { min, max })
        }
    }

    /// The smallest and largest finite value over all `maps` (each any length).
    ///
    /// Non-finite values are skipped because one NaN or infinity would otherwise make the whole
    /// scale meaningless; with no finite value at all the range is `[0, 1]`, the range of
    /// already normalised maps.
    pub fn of(maps: &[&[f32]]) -> Self {
        let mut min = f32::INFINITY;
        let mut max = f32::NEG_INFINITY;
        for &v in maps.iter().flat_map(|m| m.iter()) {
            if v.is_finite() {
                min = min.min(v);
                max = max.max(v);
            }
        }
        if min <= max {
            Self { min, max }
        } else {
            Self { min: 0.0, max: 1.0 }
        }
    }

    /// The position of `value` on the colour scale: `(value - min) / (max - min)`, not clamped
    /// (the colormap clamps). A degenerate range (`min == max`) puts every finite value at 0.5,
    /// the middle of the scale, since there is no contrast to show; NaN stays NaN.
    pub fn normalise(&self, value: f32) -> f32 {
        let span = self.max - self.min;
        if span > 0.0 {
            (value - self.min) / span
        } else if value.is_nan() {
            f32::NAN
        } else {
            0.5
        }
    }

    /// [`Self::normalise`] applied to every value of a map, returning a new `Vec` of the same
    /// length (row-major, same shape).
    pub fn normalise_all(&self, map: &[f32]) -> Vec<f32> {
        map.iter().map(|&v| self.normalise(v)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_of_skips_non_finite_values() {
        let a = [0.5_f32, f32::NAN, -2.0];
        let b = [f32::INFINITY, 3.0];
        assert_eq!(ValueRange::of(&[&a, &b]), ValueRange { min: -2.0, max: 3.0 });
        assert_eq!(ValueRange::of(&[&[f32::NAN]]), ValueRange { min: 0.0, max: 1.0 });
    }

    #[test]
    fn normalise_maps_ends_to_zero_and_one() {
        let r = ValueRange::new(-1.0, 3.0).unwrap();
        assert_eq!(r.normalise(-1.0), 0.0);
        assert_eq!(r.normalise(3.0), 1.0);
        assert_eq!(r.normalise(1.0), 0.5);
        assert_eq!(ValueRange::new(2.0, 2.0).unwrap().normalise(2.0), 0.5);
        assert!(ValueRange::new(1.0, 0.0).is_err());
        assert!(ValueRange::new(0.0, f32::NAN).is_err());
    }
}
