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

/// Row-major indices of `values` from the largest to the smallest; ties keep index order.
pub(super) fn descending(values: &[f64]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&a, &b| values[b].total_cmp(&values[a]).then(a.cmp(&b)));
    order
}

/// The ranks of `values` (1 for the smallest), ties given the mean of the ranks they span.
pub(super) fn average_ranks(values: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&a, &b| values[a].total_cmp(&values[b]));
    let mut ranks = vec![0.0; values.len()];
    let mut start = 0;
    while start < order.len() {
        let mut end = start + 1;
        while end < order.len() && values[order[end]] == values[order[start]] {
            end += 1;
        }
        // Positions start..end (0-based) hold ranks start + 1 ..= end; their mean:
        let rank = (start + end + 1) as f64 / 2.0;
        for &i in &order[start..end] {
            ranks[i] = rank;
        }
        start = end;
    }
    ranks
}
