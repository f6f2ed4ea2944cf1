//! A row of values split by column parity, and joined back.
//!
//! Stride-2 reads (the tiles of Winograd's transforms, the stem's 3 × 3 stride-2 pooling) become
//! contiguous runs once a row is stored as its even columns followed by its odd ones, so the
//! loops over them vectorise.

/// Writes `values`, the columns `offset..` of a row, into its de-interleaved form: column `p`
/// to `even[p/2]` when `p` is even, else to `odd[p/2]`.
pub(crate) fn deinterleave(values: &[f32], offset: usize, even: &mut [f32], odd: &mut [f32]) {
    for (parity, half) in [(0, even), (1, odd)] {
        // The first value whose column has this parity.
        let first = (parity + 2 - offset % 2) % 2;
        let targets = half.iter_mut().skip((offset + first) / 2);
        for (d, &v) in targets.zip(values.iter().skip(first).step_by(2)) {
            *d = v;
        }
    }
}

/// The inverse of [`deinterleave`]: `out[i]` is column `offset + i` of the row.
pub(crate) fn interleave(even: &[f32], odd: &[f32], offset: usize, out: &mut [f32]) {
    for (parity, half) in [(0, even), (1, odd)] {
        let first = (parity + 2 - offset % 2) % 2;
        let sources = half.iter().skip((offset + first) / 2);
        for (d, &v) in out.iter_mut().skip(first).step_by(2).zip(sources) {
            *d = v;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_split_by_column_parity_and_back() {
        for offset in 0..4 {
            for width in 0usize..7 {
                let values: Vec<f32> = (0..width).map(|i| i as f32 + 1.0).collect();
                let half = (offset + width).div_ceil(2) + 1;
                let (mut even, mut odd) = (vec![0.0; half], vec![0.0; half]);
                deinterleave(&values, offset, &mut even, &mut odd);
                for (i, &v) in values.iter().enumerate() {
                    let p = offset + i;
                    let got = if p % 2 == 0 { even[p / 2] } else { odd[p / 2] };
                    assert_eq!(got, v, "offset {offset} width {width} column {p}");
                }
                let mut back = vec![0.0; width];
                interleave(&even, &odd, offset, &mut back);
                assert_eq!(back, values, "offset {offset} width {width}");
            }
        }
    }
}
