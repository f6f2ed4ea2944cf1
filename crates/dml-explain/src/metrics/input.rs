//! The input checks every metric shares: a map as `f64` values of a given shape, all finite, and
//! an object mask of the same shape.

use crate::faithfulness::{FaithError, MaskValue, check_len};

/// `map` (row-major `[h, w]`, any float type) as `f64`, after checking its length, that the shape
/// is not empty, and that every value is finite.
pub(super) fn values<T: Copy + Into<f64>>(
    what: &'static str,
    map: &[T],
    h: usize,
    w: usize,
) -> Result<Vec<f64>, FaithError> {
    check_len(what, map.len(), 1, h, w)?;
    let values: Vec<f64> = map.iter().map(|&v| v.into()).collect();
    if let Some((index, &value)) = values.iter().enumerate().find(|(_, v)| !v.is_finite()) {
        return Err(FaithError::NonFinite {
            what,
            index,
            value: value as f32,
        });
    }
    Ok(values)
}

/// `mask` (row-major `[h, w]`) as booleans, after checking its length and that it marks at least
/// one object pixel.
pub(super) fn object<M: MaskValue>(mask: &[M], h: usize, w: usize) -> Result<Vec<bool>, FaithError> {
    check_len("mask", mask.len(), 1, h, w)?;
    let object: Vec<bool> = mask.iter().map(|m| m.is_object()).collect();
    if object.iter().any(|&o| o) {
        Ok(object)
    } else {
        Err(FaithError::EmptyMask { h, w })
    }
}

/// A map and its mask, both `[h, w]`: [`values`] and [`object`].
pub(super) fn map_and_mask<T: Copy + Into<f64>, M: MaskValue>(
    map: &[T],
    mask: &[M],
    h: usize,
    w: usize,
) -> Result<(Vec<f64>, Vec<bool>), FaithError> {
    Ok((values("map", map, h, w)?, object(mask, h, w)?))
}

/// Row-major indices of `values` from the largest to the smallest; ties keep index order.
pub(super) fn descending(values: &[f64]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&a, &b| values[b].total_cmp(&values[a]).then(a.cmp(&b)));
    order
}
