//! A row of values split by column phase (the column modulo a stride), and joined back.
//!
//! Strided reads (the tiles of Winograd's transforms, whose patches start every 2 or 4
//! columns; the stem's 3 × 3 stride-2 pooling) become contiguous runs once a row is stored as
//! its columns `≡ 0` first, then those `≡ 1`, and so on, so the loops over them vectorise.

/// Writes `values`, the columns `offset..` of a row, into its split form `phases`, `stride`
/// runs of `len` values (the last may be shorter): column `p` to
/// `phases[(p % stride)·len + p / stride]`. Entries no column maps to are left as they are.
pub(crate) fn split_phases(values: &[f32], offset: usize, stride: usize, len: usize, phases: &mut [f32]) {
    // The strides in use get their own copy of the loop, where the step is a constant: with
    // the step read at run time the Winograd layers of `benches/conv.rs` took 5 to 25 % longer.
    match stride {
        2 => split_by::<2>(values, offset, 2, len, phases),
        4 => split_by::<4>(values, offset, 4, len, phases),
        _ => split_by::<0>(values, offset, stride, len, phases),
    }
}

/// [`split_phases`] with the stride `S`, or read from `stride` when `S` is 0.
#[inline(always)]
fn split_by<const S: usize>(values: &[f32], offset: usize, stride: usize, len: usize, phases: &mut [f32]) {
    let stride = if S == 0 { stride } else { S };
    for (phase, run) in phases.chunks_mut(len).take(stride).enumerate() {
        // The first value whose column is in this phase.
        let first = (phase + stride - offset % stride) % stride;
        let targets = run.iter_mut().skip((offset + first) / stride);
        for (d, &v) in targets.zip(values.iter().skip(first).step_by(stride)) {
            *d = v;
        }
    }
}

/// The inverse of [`split_phases`]: `out[i]` is column `offset + i` of the row.
pub(crate) fn join_phases(phases: &[f32], stride: usize, len: usize, offset: usize, out: &mut [f32]) {
    match stride {
        2 => join_by::<2>(phases, 2, len, offset, out),
        4 => join_by::<4>(phases, 4, len, offset, out),
        _ => join_by::<0>(phases, stride, len, offset, out),
    }
}

/// [`join_phases`] with the stride `S`, or read from `stride` when `S` is 0.
#[inline(always)]
fn join_by<const S: usize>(phases: &[f32], stride: usize, len: usize, offset: usize, out: &mut [f32]) {
    let stride = if S == 0 { stride } else { S };
    for (phase, run) in phases.chunks(len).take(stride).enumerate() {
        let first = (phase + stride - offset % stride) % stride;
        let sources = run.iter().skip((offset + first) / stride);
        for (d, &v) in out.iter_mut().skip(first).step_by(stride).zip(sources) {
            *d = v;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_split_by_column_phase_and_back() {
        for stride in [2, 3, 4] {
            for offset in 0..6 {
                for width in 0usize..11 {
                    let values: Vec<f32> = (0..width).map(|i| i as f32 + 1.0).collect();
                    let len = (offset + width).div_ceil(stride) + 1;
                    let mut phases = vec![0.0; stride * len];
                    split_phases(&values, offset, stride, len, &mut phases);
                    for (i, &v) in values.iter().enumerate() {
                        let p = offset + i;
                        assert_eq!(
                            phases[(p % stride) * len + p / stride],
                            v,
                            "stride {stride} offset {offset} width {width} column {p}"
                        );
                    }
                    // Nothing else was written.
                    let written = phases.iter().filter(|&&v| v != 0.0).count();
                    assert_eq!(written, width, "stride {stride} offset {offset} width {width}");
                    let mut back = vec![0.0; width];
                    join_phases(&phases, stride, len, offset, &mut back);
                    assert_eq!(back, values, "stride {stride} offset {offset} width {width}");
                }
            }
        }
    }
}
