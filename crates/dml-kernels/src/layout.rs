//! Layout changes of contiguous buffers and the per-thread work buffers that the convolution
//! routes share.

use rayon::prelude::*;

/// `[p, q, r] → [q, p, r]` for a contiguous `[p, q, r]` buffer, as a new vector.
pub(crate) fn swap_leading(values: &[f32], p: usize, q: usize, r: usize) -> Vec<f32> {
    let mut out = Vec::with_capacity(values.len());
    // The new vector is written straight into its spare capacity: zeroing it first would be a
    // full extra pass over every activation.
    write_swapped(values, [p, q, r], &mut out.spare_capacity_mut()[..values.len()]);
    // SAFETY: `write_swapped` wrote all `q · p · r = values.len()` slots.
    unsafe { out.set_len(values.len()) };
    out
}

/// [`swap_leading`] into `out` (`values.len()` values, every one written): for a work buffer
/// kept between calls, where a fresh vector would cost its page faults (5 ms of the input
/// gradient of a 512-channel Winograd layer, whose transposed kernels are 9 MB).
pub(crate) fn swap_leading_into(values: &[f32], p: usize, q: usize, r: usize, out: &mut [f32]) {
    let out = &mut out[..values.len()];
    // SAFETY: `MaybeUninit<f32>` has the layout of `f32`, and only initialised values are written
    // through the reborrow, so `out` holds valid `f32`s afterwards.
    let slots = unsafe { &mut *(out as *mut [f32] as *mut [std::mem::MaybeUninit<f32>]) };
    write_swapped(values, [p, q, r], slots);
}

/// Writes `[p, q, r] → [q, p, r]` into every slot of `out`, in parallel over blocks of `q`.
///
/// Each task writes a block of up to 16 consecutive `q` and reads, for every `p`, their runs
/// as one contiguous stretch. One `q` per task read a run of `r` values every `q·r` values: for
/// the weights (`r` = 1 or 9) every read touched another cache line, and the swaps of a
/// ResNet-18 step's weights and their gradients took 3 % of it.
fn write_swapped(values: &[f32], [p, q, r]: [usize; 3], out: &mut [std::mem::MaybeUninit<f32>]) {
    debug_assert_eq!(out.len(), p * q * r);
    if p * r == 0 {
        return;
    }
    // Enough blocks for every thread twice over, when `q` allows.
    let block = q.div_ceil(2 * rayon::current_num_threads()).clamp(1, 16);
    out.par_chunks_mut(block * p * r).enumerate().for_each(|(bi, dst)| {
        let (q0, rows) = (bi * block, dst.len() / (p * r));
        for pi in 0..p {
            let src = &values[(pi * q + q0) * r..][..rows * r];
            // An element loop rather than `write_copy_of_slice`: the runs are short (one
            // feature map, 1 to a few thousand values) and a `memcpy` call per run cost
            // about a tenth of a small-CNN training step.
            for (qq, run) in src.chunks_exact(r).enumerate() {
                for (d, &v) in dst[(qq * p + pi) * r..][..r].iter_mut().zip(run) {
                    d.write(v);
                }
            }
        }
    });
}

thread_local! {
    /// Work buffers of the calling thread, kept between calls so that the unfolded input (the
    /// largest buffer of a training step) is neither re-allocated nor re-zeroed every time.
    static SCRATCH: std::cell::RefCell<Vec<Vec<f32>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Runs `f` on a work buffer of `len` values with arbitrary contents.
pub(crate) fn with_scratch<R>(len: usize, f: impl FnOnce(&mut [f32]) -> R) -> R {
    let mut buf = SCRATCH.with(|s| {
        let mut pool = s.borrow_mut();
        // The smallest buffer that holds `len` values, else the largest (grown below): once a
        // step has asked for each of its sizes, no buffer grows, and so is re-zeroed, again.
        let fits = (0..pool.len())
            .filter(|&i| pool[i].len() >= len)
            .min_by_key(|&i| pool[i].len());
        let pick = fits.or_else(|| (0..pool.len()).max_by_key(|&i| pool[i].len()));
        pick.map(|i| pool.swap_remove(i)).unwrap_or_default()
    });
    if buf.len() < len {
        buf.resize(len, 0.0);
    }
    let out = f(&mut buf[..len]);
    SCRATCH.with(|s| s.borrow_mut().push(buf));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swapping_the_leading_axes_moves_every_run() {
        // Runs of 1 (a weight transpose), 9 (kernels) and 5; block counts that do and do not
        // divide q; a single p and a single q.
        for [p, q, r] in [[3, 37, 1], [40, 33, 9], [5, 2, 5], [1, 20, 3], [7, 1, 4], [16, 64, 1]] {
            let values: Vec<f32> = (0..p * q * r).map(|i| i as f32).collect();
            let swapped = swap_leading(&values, p, q, r);
            let mut into = vec![f32::NAN; p * q * r + 3];
            swap_leading_into(&values, p, q, r, &mut into);
            for (qi, pi, k) in (0..q).flat_map(|qi| (0..p).flat_map(move |pi| (0..r).map(move |k| (qi, pi, k)))) {
                let want = values[(pi * q + qi) * r + k];
                assert_eq!(
                    swapped[(qi * p + pi) * r + k],
                    want,
                    "[{p}, {q}, {r}] at ({qi}, {pi}, {k})"
                );
                assert_eq!(into[(qi * p + pi) * r + k], want);
            }
            assert!(into[p * q * r..].iter().all(|v| v.is_nan()), "past the end untouched");
        }
    }
}
