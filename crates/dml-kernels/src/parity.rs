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
///
/// With a constant stride the row goes in three parts: the columns before the first one of
/// phase 0, then whole groups of `S` columns, one value to each phase's run, then the rest. For
/// stride 2 the compiler turns the groups' loop into vector loads and shuffles; for 4 it stays
/// one value at a time, without the per-value bookkeeping of strided iterators (which made the
/// split and join 5 % of a ResNet-18 training step; the A/B figures, and a register transpose
/// for stride 4 that did not pay: `docs/performance-log.md`).
#[inline(always)]
fn split_by<const S: usize>(values: &[f32], offset: usize, stride: usize, len: usize, phases: &mut [f32]) {
    let (stride, head, groups) = parts::<S>(stride, offset, values.len());
    for i in (0..head).chain(head + groups * stride..values.len()) {
        phases[place(offset + i, stride, len)] = values[i];
    }
    if groups > 0 {
        let first = (offset + head) / S;
        let mut rest = phases.chunks_mut(len);
        let mut runs: [&mut [f32]; S] =
            std::array::from_fn(|_| &mut rest.next().expect("a run per phase")[first..first + groups]);
        for (j, group) in values[head..head + groups * S].chunks_exact(S).enumerate() {
            for (run, &v) in runs.iter_mut().zip(group) {
                run[j] = v;
            }
        }
    }
}

/// Where column `p` of a row lies in its split form, `stride` runs of `len` values.
#[inline(always)]
fn place(p: usize, stride: usize, len: usize) -> usize {
    (p % stride) * len + p / stride
}

/// For the columns `offset..offset + width`: the stride (`S`, or `stride` when `S` is 0), how
/// many columns come before the first one of phase 0, and how many whole groups of `S` columns
/// follow them (none when `S` is 0: then every column is placed one by one).
#[inline(always)]
fn parts<const S: usize>(stride: usize, offset: usize, width: usize) -> (usize, usize, usize) {
    if S == 0 {
        return (stride, width, 0);
    }
    let head = ((S - offset % S) % S).min(width);
    (S, head, (width - head) / S)
}

/// The inverse of [`split_phases`]: `out[i]` is column `offset + i` of the row.
pub(crate) fn join_phases(phases: &[f32], stride: usize, len: usize, offset: usize, out: &mut [f32]) {
    match stride {
        2 => join_by::<2>(phases, 2, len, offset, out),
        4 => join_by::<4>(phases, 4, len, offset, out),
        _ => join_by::<0>(phases, stride, len, offset, out),
    }
}

/// [`join_phases`] with the stride `S`, or read from `stride` when `S` is 0 (in three parts, as
/// [`split_by`]).
#[inline(always)]
fn join_by<const S: usize>(phases: &[f32], stride: usize, len: usize, offset: usize, out: &mut [f32]) {
    let (stride, head, groups) = parts::<S>(stride, offset, out.len());
    for i in (0..head).chain(head + groups * stride..out.len()) {
        out[i] = phases[place(offset + i, stride, len)];
    }
    if groups > 0 {
        let first = (offset + head) / S;
        let mut rest = phases.chunks(len);
        let runs: [&[f32]; S] = std::array::from_fn(|_| &rest.next().expect("a run per phase")[first..first + groups]);
        for (j, group) in out[head..head + groups * S].chunks_exact_mut(S).enumerate() {
            for (d, run) in group.iter_mut().zip(&runs) {
                *d = run[j];
            }
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
                // Up to 10 whole groups of columns, with columns before and after them.
                for width in 0usize..41 {
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
