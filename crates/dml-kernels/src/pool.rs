//! 2-D max pooling on the host (NCHW, `f32`), forward and backward.
//!
//! The forward pass records, for every output, the position of its maximum in the input plane,
//! so that the backward pass is one scatter per plane and never reads the input again. Windows
//! follow PyTorch's `max_pool2d` (and Burn's): padding counts as `−∞`, dilation spaces the
//! window's taps, ceil mode adds a last partial window unless it would start in the trailing
//! padding, ties go to the first maximum in row-major window order, and NaN wins (it
//! propagates instead of being skipped; the last NaN of a window is its index, as in PyTorch).

use rayon::prelude::*;

use crate::conv::valid_range;
use crate::parity::split_phases;

/// The geometry of one max pooling: input `[batch, channels, height, width]`, and per spatial
/// axis the window size, stride, padding before and after, and dilation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pool2dShape {
    /// B.
    pub batch: usize,
    /// C.
    pub channels: usize,
    /// H.
    pub height: usize,
    /// W.
    pub width: usize,
    /// `[kh, kw]`.
    pub kernel: [usize; 2],
    /// `[sh, sw]`.
    pub stride: [usize; 2],
    /// `[(top, bottom), (left, right)]`.
    pub padding: [(usize, usize); 2],
    /// `[dh, dw]`.
    pub dilation: [usize; 2],
    /// Round the output size up instead of down.
    pub ceil_mode: bool,
}

impl Pool2dShape {
    /// `[Ho, Wo]`, or an error naming the axis when a size is zero or no window fits.
    pub fn output_size(&self) -> Result<[usize; 2], String> {
        let sizes = [self.height, self.width];
        let mut out = [0; 2];
        for axis in 0..2 {
            let (size, (before, after)) = (sizes[axis], self.padding[axis]);
            let (k, s, d) = (self.kernel[axis], self.stride[axis], self.dilation[axis]);
            if k == 0 || s == 0 || d == 0 {
                return Err(format!(
                    "max pooling axis {axis}: kernel, stride and dilation must be positive"
                ));
            }
            let (padded, extent) = (size + before + after, d * (k - 1) + 1);
            let round = if self.ceil_mode { s - 1 } else { 0 };
            if padded + round < extent {
                return Err(format!(
                    "max pooling axis {axis}: window extent {extent} is larger than the padded input {padded}"
                ));
            }
            let mut len = (padded + round - extent) / s + 1;
            // A ceil-mode window that would start in the trailing padding is dropped.
            if self.ceil_mode && len > 1 && (len - 1) * s >= size + before {
                len -= 1;
            }
            out[axis] = len;
        }
        Ok(out)
    }

    fn input_len(&self) -> usize {
        self.batch * self.channels * self.height * self.width
    }
}

/// Per output position along an axis, its first in-bounds input position and how many of its
/// taps (`o·s − before + t·d` for `t < k`) lie inside `0..size`. Computed once per call, so the
/// per-window loops run over plain ranges.
fn tap_ranges(axis: usize, s: &Pool2dShape, size: usize, out_len: usize) -> Vec<(usize, usize)> {
    let (k, d) = (s.kernel[axis] as isize, s.dilation[axis] as isize);
    (0..out_len)
        .map(|o| {
            let start = (o * s.stride[axis]) as isize - s.padding[axis].0 as isize;
            let inside = |t: &isize| (0..size as isize).contains(&(start + t * d));
            match (0..k).find(inside) {
                Some(first) => {
                    let count = (first..k).take_while(inside).count();
                    ((start + first * d) as usize, count)
                }
                None => (0, 0),
            }
        })
        .collect()
}

/// Max pooling of `input` `[B, C, H, W]`: the output `[B, C, Ho, Wo]` and, for each output, the
/// index of its maximum within its input plane (`y·W + x`; for a window entirely in the padding,
/// which ceil mode can produce, the output is `−∞` and the index `u32::MAX`, which the backward
/// pass skips).
///
/// # Errors
/// When the geometry is invalid, the input does not match it, or a plane has more than
/// `u32::MAX` values.
pub fn max_pool2d(s: &Pool2dShape, input: &[f32]) -> Result<(Vec<f32>, Vec<u32>), String> {
    let [ho, wo] = s.output_size()?;
    if input.len() != s.input_len() {
        return Err(format!(
            "max pooling {s:?}: {} input values, expected {}",
            input.len(),
            s.input_len()
        ));
    }
    let plane = s.height * s.width;
    if plane > u32::MAX as usize {
        return Err(format!("max pooling: a plane of {plane} values is too large"));
    }
    let out_plane = ho * wo;
    let planes = s.batch * s.channels;
    let mut output = vec![0.0f32; planes * out_plane];
    let mut index = vec![0u32; planes * out_plane];
    if out_plane == 0 {
        return Ok((output, index));
    }
    let rows = tap_ranges(0, s, s.height, ho);
    // Per window column tap: its offset from `x·sw` and the outputs `x0..x1` for which it lies
    // inside the input.
    let col_taps: Vec<(isize, usize, usize)> = (0..s.kernel[1])
        .map(|t| {
            let offset = (t * s.dilation[1]) as isize - s.padding[1].0 as isize;
            let (x0, x1) = valid_range(wo, s.stride[1], offset, s.width);
            (offset, x0, x1)
        })
        .collect();
    // The 2 × 2, stride-2 windows of the small CNN, all inside the input: a loop with no table.
    let pairs =
        s.kernel == [2, 2] && s.stride == [2, 2] && s.dilation == [1, 1] && s.padding == [(0, 0); 2] && !s.ceil_mode;
    // One task per channel, over every image, as the fused convolution block that wrote the input
    // splits its work: each thread then reads mostly what it wrote itself (a plane another core
    // wrote is read at a fraction of the speed, measured: 3.5 → 2.2 ms for the small CNN's first
    // pooling).
    let (out_planes, idx_planes) = (Planes::new(&mut output, out_plane), Planes::new(&mut index, out_plane));
    let split_columns = s.stride[1] == 2 && s.dilation[1] == 1;
    (0..s.channels).into_par_iter().for_each(|c| {
        let mut split = Vec::new();
        for b in 0..s.batch {
            let p = b * s.channels + c;
            // SAFETY: plane p = (b, c) belongs to channel c's task alone.
            let (out, idx) = unsafe { (out_planes.plane(p), idx_planes.plane(p)) };
            let src = &input[p * plane..][..plane];
            if pairs {
                pool_pairs(src, s.width, out, idx, wo);
                continue;
            }
            if split_columns {
                pool_plane_stride_2(s, src, &rows, &col_taps, out, idx, wo, &mut split);
                continue;
            }
            pool_plane(s, src, &rows, &col_taps, out, idx, wo);
        }
    });
    Ok((output, index))
}

/// One plane of the general max pooling, tap by tap: for each output row, every in-bounds tap
/// `(ty, tx)` of the window, in row-major window order, is compared with the running maximum of
/// all the row's outputs at once. Per output this is the order, tie rule and NaN rule of a loop
/// over its own window, but the inner loop runs along the outputs without branches: which tap
/// wins is unpredictable on real activations, and the per-window loop's mispredicted branches
/// made ResNet's 3 × 3, stride-2 pooling 5 % of a training step.
fn pool_plane(
    s: &Pool2dShape,
    src: &[f32],
    rows: &[(usize, usize)],
    col_taps: &[(isize, usize, usize)],
    out: &mut [f32],
    idx: &mut [u32],
    wo: usize,
) {
    let (sw, dh) = (s.stride[1], s.dilation[0]);
    for ((best, at), &(first_y, count_y)) in out.chunks_exact_mut(wo).zip(idx.chunks_exact_mut(wo)).zip(rows) {
        best.fill(f32::NEG_INFINITY);
        at.fill(u32::MAX);
        for ty in 0..count_y {
            let line_start = (first_y + ty * dh) * s.width;
            let line = &src[line_start..][..s.width];
            for &(offset, x0, x1) in col_taps {
                for x in x0..x1 {
                    let column = ((x * sw) as isize + offset) as usize;
                    let v = line[column];
                    // PyTorch's rule: the first tap, a larger value or any NaN takes the window.
                    let take = at[x] == u32::MAX || v > best[x] || v.is_nan();
                    take_if(take, (&mut best[x], &mut at[x]), (v, (line_start + column) as u32));
                }
            }
        }
    }
}

/// [`pool_plane`] for a column stride of 2 without dilation (ResNet's 3 × 3 stem pooling): each
/// input row is first split into its even and odd columns, so that every tap of a window reads
/// a contiguous run (column `2x + offset` is `even[x + offset/2]` or `odd[x + ⌊offset/2⌋]`) and
/// the comparison runs on whole vectors. Read with a stride of 2, the same loop did not
/// vectorise (14 ms for the stem pooling of a 32-image batch at 112²).
#[allow(clippy::too_many_arguments)]
fn pool_plane_stride_2(
    s: &Pool2dShape,
    src: &[f32],
    rows: &[(usize, usize)],
    col_taps: &[(isize, usize, usize)],
    out: &mut [f32],
    idx: &mut [u32],
    wo: usize,
    split: &mut Vec<f32>,
) {
    let (width, dh) = (s.width, s.dilation[0]);
    let half = width.div_ceil(2);
    // Row r's even columns at `r·width`, its odd ones right after them.
    split.resize(src.len(), 0.0);
    for (line, dst) in src.chunks_exact(width).zip(split.chunks_exact_mut(width)) {
        split_phases(line, 0, 2, half, dst);
    }
    for ((best, at), &(first_y, count_y)) in out.chunks_exact_mut(wo).zip(idx.chunks_exact_mut(wo)).zip(rows) {
        best.fill(f32::NEG_INFINITY);
        at.fill(u32::MAX);
        for ty in 0..count_y {
            let line_start = (first_y + ty * dh) * width;
            let (even, odd) = split[line_start..][..width].split_at(half);
            for &(offset, x0, x1) in col_taps {
                if x0 >= x1 {
                    continue;
                }
                let shift = offset.div_euclid(2);
                let values = if offset.rem_euclid(2) == 0 { even } else { odd };
                let values = &values[(x0 as isize + shift) as usize..][..x1 - x0];
                let first_index = (line_start as isize + 2 * x0 as isize + offset) as u32;
                let (best, at) = (&mut best[x0..x1], &mut at[x0..x1]);
                take_window_maxima(values, first_index, best, at);
            }
        }
    }
}

/// One tap for a run of outputs: `values[i]` (at plane index `first_index + 2i`) replaces the
/// running maximum `best[i]` and its index `at[i]` under PyTorch's rule (the first tap, a larger
/// value, or any NaN). Sixteen outputs at a time with AVX-512 mask selects where the CPU has
/// it: the compiler left this loop scalar, with a branch per value.
fn take_window_maxima(values: &[f32], first_index: u32, best: &mut [f32], at: &mut [u32]) {
    let n = best.len();
    assert!(values.len() >= n && at.len() == n, "pooling runs of different lengths");
    #[cfg(target_arch = "x86_64")]
    if crate::sgemm::available() {
        // SAFETY: the CPU has AVX-512F, and the three runs hold at least `n` values (asserted).
        unsafe { take_window_maxima_avx512(values, first_index, best, at) };
        return;
    }
    take_window_maxima_scalar(values, first_index, best, at);
}

/// [`take_window_maxima`] one value at a time (CPUs without AVX-512F).
fn take_window_maxima_scalar(values: &[f32], first_index: u32, best: &mut [f32], at: &mut [u32]) {
    for i in 0..best.len() {
        let (v, b, a) = (values[i], best[i], at[i]);
        let take = (a == u32::MAX) | (v > b) | v.is_nan();
        best[i] = if take { v } else { b };
        at[i] = if take { first_index + 2 * i as u32 } else { a };
    }
}

/// [`take_window_maxima`] in 16-lane masks.
///
/// # Safety
/// The CPU must support AVX-512F; `values` must hold at least `best.len()` values and `at`
/// exactly as many.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn take_window_maxima_avx512(values: &[f32], first_index: u32, best: &mut [f32], at: &mut [u32]) {
    use std::arch::x86_64::*;
    let n = best.len();
    let none = _mm512_set1_epi32(-1);
    let lanes = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    let mut i = 0;
    while i < n {
        let mask: u16 = if n - i >= 16 { u16::MAX } else { (1u16 << (n - i)) - 1 };
        // SAFETY: the masked lanes stay inside the runs (i + lane < n).
        unsafe {
            let v = _mm512_maskz_loadu_ps(mask, values.as_ptr().add(i));
            let b = _mm512_maskz_loadu_ps(mask, best.as_ptr().add(i));
            let a = _mm512_maskz_loadu_epi32(mask, at.as_ptr().add(i).cast());
            let take = _mm512_cmpeq_epi32_mask(a, none)
                | _mm512_cmp_ps_mask::<_CMP_GT_OQ>(v, b)
                | _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(v, v);
            let index = _mm512_add_epi32(_mm512_set1_epi32((first_index + 2 * i as u32) as i32), lanes);
            _mm512_mask_storeu_ps(best.as_mut_ptr().add(i), mask & take, v);
            _mm512_mask_storeu_epi32(at.as_mut_ptr().add(i).cast(), mask & take, index);
        }
        i += 16;
    }
}

/// Replaces a window's running maximum and its index by `(v, i)` when `take`, without a branch
/// (bit masks): on real activations which tap wins is unpredictable, and mispredicted branches
/// made the pooling loops several times slower than their memory traffic.
#[inline(always)]
fn take_if(take: bool, (best, at): (&mut f32, &mut u32), (v, i): (f32, u32)) {
    // All-ones when v takes the window.
    let mask = 0u32.wrapping_sub(u32::from(take));
    *best = f32::from_bits(best.to_bits() ^ ((best.to_bits() ^ v.to_bits()) & mask));
    *at ^= (*at ^ i) & mask;
}

/// A buffer of equal planes, handed out to parallel tasks that each own different planes.
struct Planes<T> {
    ptr: *mut T,
    planes: usize,
    len: usize,
}

// SAFETY: planes are only reached through `plane`, whose callers guarantee exclusive access.
unsafe impl<T: Send> Send for Planes<T> {}
unsafe impl<T: Send> Sync for Planes<T> {}

impl<T> Planes<T> {
    /// `buffer` as planes of `len` values (the buffer must outlive every plane handed out).
    fn new(buffer: &mut [T], len: usize) -> Self {
        Self {
            ptr: buffer.as_mut_ptr(),
            planes: buffer.len() / len.max(1),
            len,
        }
    }

    /// Plane `p`.
    ///
    /// # Safety
    /// No other reference to plane `p` may exist while the returned one is used.
    #[allow(clippy::mut_from_ref)]
    unsafe fn plane(&self, p: usize) -> &mut [T] {
        assert!(p < self.planes, "plane {p} of {}", self.planes);
        // SAFETY: in bounds (asserted); exclusive by the caller's guarantee.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(p * self.len), self.len) }
    }
}

/// One plane of a 2 × 2, stride-2 max pooling without padding: output row `y` reads input rows
/// `2y` and `2y + 1`, with the window order and NaN rule of the general loop.
fn pool_pairs(src: &[f32], width: usize, out: &mut [f32], idx: &mut [u32], wo: usize) {
    for (y, (out_row, idx_row)) in out.chunks_exact_mut(wo).zip(idx.chunks_exact_mut(wo)).enumerate() {
        let top = 2 * y * width;
        let (upper, lower) = (&src[top..][..2 * wo], &src[top + width..][..2 * wo]);
        let (top, width) = (top as u32, width as u32);
        // Value and offset are chosen without branches ([`take_if`]); pairs of columns as exact
        // chunks, so the loop has no bounds checks either.
        let windows = upper.chunks_exact(2).zip(lower.chunks_exact(2));
        for (x, ((u, l), (o, i))) in windows.zip(out_row.iter_mut().zip(idx_row.iter_mut())).enumerate() {
            let (mut best, mut at) = (u[0], 0u32);
            for (v, offset) in [(u[1], 1), (l[0], width), (l[1], width + 1)] {
                take_if(v > best || v.is_nan(), (&mut best, &mut at), (v, offset));
            }
            *o = best;
            *i = top + 2 * x as u32 + at;
        }
    }
}

/// The input gradient `[B, C, H, W]` of [`max_pool2d`] from the output gradient `grad`
/// `[B, C, Ho, Wo]` and the forward pass's indices: each output's gradient goes to its maximum
/// (summed where windows overlap on the same maximum).
///
/// # Errors
/// When the geometry is invalid or a buffer does not match it.
pub fn max_pool2d_backward(s: &Pool2dShape, index: &[u32], grad: &[f32]) -> Result<Vec<f32>, String> {
    let [ho, wo] = s.output_size()?;
    let (plane, out_plane) = (s.height * s.width, ho * wo);
    let planes = s.batch * s.channels;
    if index.len() != planes * out_plane || grad.len() != planes * out_plane {
        return Err(format!(
            "max pooling backward {s:?}: {} indices and {} gradients, expected {}",
            index.len(),
            grad.len(),
            planes * out_plane
        ));
    }
    if plane == 0 || out_plane == 0 {
        return Ok(vec![0.0f32; s.input_len()]);
    }
    // Each plane is zeroed by the task that scatters into it, right before: zeroing the whole
    // buffer first was a separate pass over memory on one thread, and the scatter then read
    // the planes back from memory.
    let mut dx: Vec<f32> = Vec::with_capacity(s.input_len());
    dx.spare_capacity_mut()[..s.input_len()]
        .par_chunks_mut(plane)
        .enumerate()
        .for_each(|(p, dst)| {
            dst.iter_mut().for_each(|d| {
                d.write(0.0);
            });
            // SAFETY: every slot of `dst` was just initialised, and `MaybeUninit<f32>` has the
            // layout of `f32`.
            let dst = unsafe { &mut *(std::ptr::from_mut(dst) as *mut [f32]) };
            let (idx, g) = (
                &index[p * out_plane..][..out_plane],
                &grad[p * out_plane..][..out_plane],
            );
            for (&i, &gv) in idx.iter().zip(g) {
                if let Some(d) = dst.get_mut(i as usize) {
                    *d += gv;
                }
            }
        });
    // SAFETY: every plane of the `input_len` slots was filled (the chunks cover them all).
    unsafe { dx.set_len(s.input_len()) };
    Ok(dx)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(n: usize, seed: usize) -> Vec<f32> {
        crate::shared::test_values(n, seed, 500.0, 400.0)
    }

    fn shapes() -> Vec<Pool2dShape> {
        let base = Pool2dShape {
            batch: 2,
            channels: 3,
            height: 7,
            width: 6,
            kernel: [2, 2],
            stride: [2, 2],
            padding: [(0, 0), (0, 0)],
            dilation: [1, 1],
            ceil_mode: false,
        };
        vec![
            base,
            // ResNet's stem: 3 × 3, stride 2, padding 1 (overlapping windows).
            Pool2dShape {
                kernel: [3, 3],
                padding: [(1, 1), (1, 1)],
                ..base
            },
            // BN-Inception's: 3 × 3, stride 2, ceil mode (a last partial window).
            Pool2dShape {
                kernel: [3, 3],
                ceil_mode: true,
                ..base
            },
            Pool2dShape {
                kernel: [2, 3],
                stride: [1, 2],
                padding: [(1, 0), (0, 2)],
                dilation: [2, 1],
                ..base
            },
            // The stem's windows on an odd width (even and odd columns of unequal count).
            Pool2dShape {
                width: 7,
                kernel: [3, 3],
                padding: [(1, 1), (1, 1)],
                ..base
            },
            // Column strides other than 2, and a dilated column: the general tap loop.
            Pool2dShape {
                kernel: [3, 3],
                stride: [1, 1],
                padding: [(1, 1), (1, 1)],
                ..base
            },
            Pool2dShape {
                kernel: [3, 2],
                stride: [2, 3],
                padding: [(0, 1), (1, 0)],
                dilation: [1, 2],
                ..base
            },
            Pool2dShape {
                kernel: [2, 2],
                stride: [2, 2],
                dilation: [1, 2],
                ..base
            },
        ]
    }

    /// PyTorch's rule for one window, by definition: the first maximum in row-major window
    /// order, or the last NaN; `(−∞, u32::MAX)` for a window with no input cell.
    fn naive_argmax(s: &Pool2dShape, x: &[f32]) -> Vec<(f32, u32)> {
        let [ho, wo] = s.output_size().unwrap();
        let plane = s.height * s.width;
        let mut out = Vec::new();
        for p in 0..s.batch * s.channels {
            for y in 0..ho {
                for xx in 0..wo {
                    let mut best: Option<(f32, u32)> = None;
                    for i in 0..s.kernel[0] {
                        for j in 0..s.kernel[1] {
                            let iy = (y * s.stride[0] + i * s.dilation[0]) as isize - s.padding[0].0 as isize;
                            let ix = (xx * s.stride[1] + j * s.dilation[1]) as isize - s.padding[1].0 as isize;
                            if iy < 0 || ix < 0 || iy as usize >= s.height || ix as usize >= s.width {
                                continue;
                            }
                            let at = (iy as usize * s.width + ix as usize) as u32;
                            let v = x[p * plane + at as usize];
                            best = match best {
                                None => Some((v, at)),
                                Some((b, _)) if v > b || v.is_nan() => Some((v, at)),
                                kept => kept,
                            };
                        }
                    }
                    out.push(best.unwrap_or((f32::NEG_INFINITY, u32::MAX)));
                }
            }
        }
        out
    }

    #[test]
    #[cfg_attr(not(host_avx512), ignore = "needs AVX-512F, which this CPU lacks")]
    fn the_vector_and_scalar_tap_updates_agree() {
        // Runs of 1 to 40 outputs (whole and partial vectors) with ties, NaN on either side and
        // outputs that have no tap yet (index u32::MAX).
        for n in 1..=40 {
            let pick = |i: usize, k: usize| match (i * k) % 5 {
                0 => f32::NAN,
                r => r as f32 % 3.0,
            };
            let values: Vec<f32> = (0..n).map(|i| pick(i, 7)).collect();
            let best0: Vec<f32> = (0..n).map(|i| pick(i, 3)).collect();
            let at0: Vec<u32> = (0..n).map(|i| if i % 4 == 0 { u32::MAX } else { i as u32 }).collect();
            let (mut b1, mut a1, mut b2, mut a2) = (best0.clone(), at0.clone(), best0.clone(), at0.clone());
            take_window_maxima_scalar(&values, 100, &mut b1, &mut a1);
            // SAFETY: the CPU has AVX-512F (the test is ignored elsewhere); all runs hold n values.
            unsafe { take_window_maxima_avx512(&values, 100, &mut b2, &mut a2) };
            assert_eq!(a1, a2, "n = {n}");
            assert_eq!(
                b1.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                b2.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                "n = {n}"
            );
        }
    }

    #[test]
    fn ties_and_nan_follow_pytorchs_rule_on_every_path() {
        // Three values only (many ties in every window) and a NaN in one cell of seven, on every
        // geometry: the 2 × 2 pairs, the split-column stride-2 loop and the general tap loop.
        for s in shapes() {
            let x: Vec<f32> = (0..s.input_len())
                .map(|i| if i % 7 == 3 { f32::NAN } else { (i * 5 % 3) as f32 })
                .collect();
            let (y, idx) = max_pool2d(&s, &x).unwrap();
            for (o, (want_v, want_i)) in naive_argmax(&s, &x).into_iter().enumerate() {
                assert_eq!(idx[o], want_i, "{s:?}: index of output {o}");
                assert!(
                    y[o] == want_v || (y[o].is_nan() && want_v.is_nan()),
                    "{s:?}: output {o}"
                );
            }
        }
    }

    #[test]
    fn forward_matches_the_definition_and_indices_point_at_the_maxima() {
        for s in shapes() {
            let x = values(s.input_len(), 1);
            let (y, idx) = max_pool2d(&s, &x).unwrap();
            let want: Vec<f32> = naive_argmax(&s, &x).into_iter().map(|(v, _)| v).collect();
            assert_eq!(y, want, "{s:?}");
            let [ho, wo] = s.output_size().unwrap();
            let plane = s.height * s.width;
            for (o, (&v, &i)) in y.iter().zip(&idx).enumerate() {
                let p = o / (ho * wo);
                assert_eq!(x[p * plane + i as usize], v, "{s:?}: index of output {o}");
            }
        }
    }

    #[test]
    fn output_sizes_follow_pytorch() {
        let s = shapes()[0];
        // 7 × 6 with 2 × 2 / 2: floor gives 3 × 3; ceil gives 4 × 3.
        assert_eq!(s.output_size().unwrap(), [3, 3]);
        let ceil = Pool2dShape { ceil_mode: true, ..s };
        assert_eq!(ceil.output_size().unwrap(), [4, 3]);
        // BN-Inception's 112 → 56 with 3 × 3 / 2 ceil; floor would give 55.
        let inception = Pool2dShape {
            height: 112,
            width: 112,
            kernel: [3, 3],
            ceil_mode: true,
            ..s
        };
        assert_eq!(inception.output_size().unwrap(), [56, 56]);
        // A ceil-mode window starting in the trailing padding is dropped: 5 with k 2, s 2, pad 1 → 3.
        let dropped = Pool2dShape {
            height: 5,
            width: 5,
            padding: [(1, 1), (1, 1)],
            ceil_mode: true,
            ..s
        };
        assert_eq!(dropped.output_size().unwrap(), [3, 3]);
        let too_big = Pool2dShape { kernel: [9, 2], ..s };
        assert!(too_big.output_size().unwrap_err().contains("axis 0"));
    }

    #[test]
    fn backward_is_the_adjoint_of_the_forward() {
        // Max pooling is linear in x near a point without ties: <∂x, δ> = Σ g ⊙ (pool(x + δ) − pool(x))
        // for a perturbation small enough not to change any argmax.
        for s in shapes() {
            let x = values(s.input_len(), 2);
            let (y, idx) = max_pool2d(&s, &x).unwrap();
            let g = values(y.len(), 3);
            let dx = max_pool2d_backward(&s, &idx, &g).unwrap();
            let delta: Vec<f32> = values(x.len(), 4).iter().map(|v| v * 1e-4).collect();
            let moved: Vec<f32> = x.iter().zip(&delta).map(|(a, b)| a + b).collect();
            let (y2, idx2) = max_pool2d(&s, &moved).unwrap();
            assert_eq!(idx, idx2, "{s:?}: the perturbation keeps every maximum");
            let change: f64 = y2
                .iter()
                .zip(&y)
                .zip(&g)
                .map(|((a, b), gv)| (a - b) as f64 * *gv as f64)
                .sum();
            let predicted: f64 = dx.iter().zip(&delta).map(|(a, b)| *a as f64 * *b as f64).sum();
            assert!((change - predicted).abs() < 1e-6, "{s:?}: {change} vs {predicted}");
        }
    }

    #[test]
    fn ties_go_to_the_first_maximum_and_nan_propagates() {
        let s = Pool2dShape {
            batch: 1,
            channels: 1,
            height: 2,
            width: 4,
            kernel: [2, 2],
            stride: [2, 2],
            padding: [(0, 0), (0, 0)],
            dilation: [1, 1],
            ceil_mode: false,
        };
        let x = [1.0, 3.0, f32::NAN, 0.0, 3.0, 3.0, 5.0, 9.0];
        let (y, idx) = max_pool2d(&s, &x).unwrap();
        assert_eq!((y[0], idx[0]), (3.0, 1));
        assert!(y[1].is_nan() && idx[1] == 2);
        let dx = max_pool2d_backward(&s, &idx, &[1.0, 2.0]).unwrap();
        assert_eq!(dx, vec![0.0, 1.0, 2.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
    }

    #[test]
    fn the_general_windows_keep_the_tie_and_nan_rules() {
        // ResNet's stem pooling (3 × 3, stride 2, padding 1) on a 4 × 4 plane: windows clipped by
        // the padding, a tie, and a NaN shared by two windows.
        let s = Pool2dShape {
            batch: 1,
            channels: 1,
            height: 4,
            width: 4,
            kernel: [3, 3],
            stride: [2, 2],
            padding: [(1, 1), (1, 1)],
            dilation: [1, 1],
            ceil_mode: false,
        };
        #[rustfmt::skip]
        let x = [
            3.0, 3.0, 1.0, 0.0,
            1.0, 2.0, f32::NAN, 4.0,
            5.0, 6.0, 6.0, 7.0,
            0.0, 6.0, 7.0, 1.0,
        ];
        let (y, idx) = max_pool2d(&s, &x).unwrap();
        assert_eq!(
            idx,
            vec![0, 6, 9, 6],
            "first of the tied 3s, the NaN twice, first of the 6s"
        );
        assert!(y[0] == 3.0 && y[1].is_nan() && y[2] == 6.0 && y[3].is_nan());
        let dx = max_pool2d_backward(&s, &idx, &[1.0, 2.0, 3.0, 4.0]).unwrap();
        let mut want = vec![0.0; 16];
        (want[0], want[6], want[9]) = (1.0, 6.0, 3.0);
        assert_eq!(dx, want);
    }

    #[test]
    fn mismatched_buffers_are_errors() {
        let s = shapes()[0];
        assert!(max_pool2d(&s, &[0.0; 5]).unwrap_err().contains("5 input values"));
        assert!(max_pool2d_backward(&s, &[0; 3], &[0.0; 3]).is_err());
    }
}
