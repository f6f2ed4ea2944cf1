//! Exact top-k selection of candidate neighbours, ordered by `(distance, reference index)`.
//!
//! Candidates are packed into `u64` keys whose high half is an order-preserving encoding of the `f32`
//! distance and whose low half is the reference index, so plain integer order is the required order with
//! ties broken by ascending index. Sorting thousands of candidates per query with a comparison sort would
//! dominate the evaluation, so [`top_k`] first distributes candidates into value buckets, discards every
//! bucket after the one holding the k-th key, and sorts only the (small) surviving buckets.

/// Maps an `f32` to a `u32` whose unsigned order is the float order (`-0.0` is treated as `+0.0`).
#[inline]
pub(crate) fn ord_key(d: f32) -> u32 {
    // Adding +0.0 turns -0.0 into +0.0 so that the two zeros tie instead of ordering by sign.
    let b = (d + 0.0).to_bits();
    if b & 0x8000_0000 != 0 { !b } else { b | 0x8000_0000 }
}

/// Inverse of [`ord_key`].
#[inline]
pub(crate) fn from_ord(k: u32) -> f32 {
    if k & 0x8000_0000 != 0 {
        f32::from_bits(k & 0x7fff_ffff)
    } else {
        f32::from_bits(!k)
    }
}

/// Packs a distance and a reference index into a sortable key.
#[inline]
pub(crate) fn pack(d: f32, j: u32) -> u64 {
    (u64::from(ord_key(d)) << 32) | u64::from(j)
}

/// The distance of a packed key.
#[inline]
pub(crate) fn key_dist(key: u64) -> f32 {
    from_ord((key >> 32) as u32)
}

/// The reference index of a packed key.
#[inline]
pub(crate) fn key_index(key: u64) -> u32 {
    key as u32
}

/// Reusable buffers for [`top_k`] and [`threshold_at_rank`].
#[derive(Default)]
pub(crate) struct SortScratch {
    counts: Vec<u32>,
    bucket: Vec<u32>,
}

/// Below this many candidates a plain sort beats bucketing.
const SMALL: usize = 128;

/// The smallest and largest value of a non-empty slice, via the integer order keys (which vectorise,
/// unlike NaN-aware float `min`/`max`).
#[inline(always)]
fn min_max(v: &[f32]) -> (f32, f32) {
    let (mut lo, mut hi) = (u32::MAX, 0u32);
    for &d in v {
        let k = ord_key(d);
        lo = lo.min(k);
        hi = hi.max(k);
    }
    (from_ord(lo), from_ord(hi))
}

/// Fills `bucket[i]` with the linear bucket of `v[i]` over `[lo, hi]` (`nb` buckets) and returns the count
/// per bucket in `counts` (length `nb + 1`, last entry zero). The map is monotone in the value, so every
/// value of bucket `b` is `<=` every value of bucket `b + 1`.
#[inline(always)]
fn bucketise(v: &[f32], lo: f32, hi: f32, nb: usize, counts: &mut Vec<u32>, bucket: &mut Vec<u32>) {
    // hi - lo is finite: values are bounded by the embedding magnitude check.
    let scale = nb as f32 / (hi - lo);
    let top = (nb - 1) as u32;
    bucket.clear();
    // (d - lo) * scale is in [0, nb] and nb fits i32, so the signed conversion is exact and vectorises.
    bucket.extend(v.iter().map(|&d| (((d - lo) * scale) as i32 as u32).min(top)));
    counts.clear();
    counts.resize(nb + 1, 0);
    for &b in bucket.iter() {
        counts[b as usize] += 1;
    }
}

/// Writes into `out` the `kk` smallest candidates by `(distance, index)`, ascending, as packed keys.
/// Returns the number of candidates; when that is below `kk`, `out` holds all of them sorted and the
/// caller must treat the result as incomplete.
///
/// `dist` and `idx` are parallel slices; distances must not be NaN (the inputs are validated upstream).
/// Candidates are scattered into about one value bucket each with branch-free passes; the buckets up to
/// the one holding the kk-th key are then nearly sorted, so one insertion-sort pass finishes them with few
/// mispredicted branches. This is several times faster than a comparison sort for the thousands of
/// candidates per query of a MAP@R evaluation.
pub(crate) fn top_k(dist: &[f32], idx: &[u32], kk: usize, scratch: &mut SortScratch, out: &mut Vec<u64>) -> usize {
    #[cfg(target_arch = "x86_64")]
    if wide_simd() {
        // SAFETY: the features `top_k_wide` is compiled for were detected at run time.
        return unsafe { top_k_wide(dist, idx, kk, scratch, out) };
    }
    top_k_body(dist, idx, kk, scratch, out)
}

/// [`top_k`] compiled for AVX-512 so that its passes vectorise (the crate itself targets baseline x86-64).
///
/// # Safety
/// The CPU must support the enabled features ([`wide_simd`]).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,bmi1,bmi2,avx512f,avx512bw,avx512vl,avx512dq")]
unsafe fn top_k_wide(dist: &[f32], idx: &[u32], kk: usize, scratch: &mut SortScratch, out: &mut Vec<u64>) -> usize {
    top_k_body(dist, idx, kk, scratch, out)
}

/// Whether the AVX-512 builds of the selection routines can run here.
#[cfg(target_arch = "x86_64")]
#[inline]
pub(crate) fn wide_simd() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512bw")
        && std::arch::is_x86_feature_detected!("avx512vl")
        && std::arch::is_x86_feature_detected!("avx512dq")
        && std::arch::is_x86_feature_detected!("avx2")
        && std::arch::is_x86_feature_detected!("fma")
        && std::arch::is_x86_feature_detected!("bmi1")
        && std::arch::is_x86_feature_detected!("bmi2")
}

/// The body of [`top_k`], inlined into each instruction-set build.
#[inline(always)]
fn top_k_body(dist: &[f32], idx: &[u32], kk: usize, scratch: &mut SortScratch, out: &mut Vec<u64>) -> usize {
    assert_eq!(
        dist.len(),
        idx.len(),
        "top_k: {} distances vs {} indices",
        dist.len(),
        idx.len()
    );
    out.clear();
    let n = dist.len();
    if n == 0 || kk == 0 {
        return n;
    }
    let (lo, hi) = min_max(dist);
    if lo == hi && kk <= n && idx.is_sorted() {
        // Every distance ties and the indices ascend (a full row of a collapsed embedding): the order is
        // the index order, so the first kk candidates are the answer.
        out.extend(dist[..kk].iter().zip(&idx[..kk]).map(|(&d, &j)| pack(d, j)));
        return n;
    }
    if n < kk || n <= SMALL || lo == hi {
        // Too few candidates to bucket, all values equal, or an incomplete set: sort everything.
        out.extend(dist.iter().zip(idx).map(|(&d, &j)| pack(d, j)));
        if kk < n {
            out.select_nth_unstable(kk);
            out.truncate(kk);
        }
        out.sort_unstable();
        return n;
    }
    let nb = n;
    let SortScratch { counts, bucket } = scratch;
    bucketise(dist, lo, hi, nb, counts, bucket);
    // Turn counts into start offsets and find the bucket holding the kk-th key (it exists as n >= kk).
    let mut sum = 0u32;
    let mut end = n;
    for c in counts.iter_mut().take(nb) {
        let here = *c;
        *c = sum;
        sum += here;
        if sum as usize >= kk && end == n {
            end = sum as usize;
        }
    }
    out.resize(n, 0);
    for ((&d, &j), &b) in dist.iter().zip(idx).zip(bucket.iter()) {
        let at = &mut counts[b as usize];
        out[*at as usize] = pack(d, j);
        *at += 1;
    }
    // Keys only need to move within their bucket, so this pass is close to linear.
    insertion_sort(&mut out[..end]);
    out.truncate(kk);
    n
}

/// A value `t` of `v` such that at least `rank + 1` values are `<= t`; the excess is at most the population
/// of one of 512 linear value buckets (about `v.len() / 512` for smooth data). A bucketed quantile is exact
/// enough for a search threshold and much cheaper than a selection. Requires `rank < v.len()`.
pub(crate) fn threshold_at_rank(v: &[f32], rank: usize, scratch: &mut SortScratch) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if wide_simd() {
        // SAFETY: the features `threshold_wide` is compiled for were detected at run time.
        return unsafe { threshold_wide(v, rank, scratch) };
    }
    threshold_body(v, rank, scratch)
}

/// [`threshold_at_rank`] compiled for AVX-512.
///
/// # Safety
/// The CPU must support the enabled features ([`wide_simd`]).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,bmi1,bmi2,avx512f,avx512bw,avx512vl,avx512dq")]
unsafe fn threshold_wide(v: &[f32], rank: usize, scratch: &mut SortScratch) -> f32 {
    threshold_body(v, rank, scratch)
}

/// The body of [`threshold_at_rank`], inlined into each instruction-set build.
#[inline(always)]
fn threshold_body(v: &[f32], rank: usize, scratch: &mut SortScratch) -> f32 {
    assert!(rank < v.len(), "threshold_at_rank: rank {rank} of {} values", v.len());
    let (lo, hi) = min_max(v);
    if lo == hi {
        return hi;
    }
    let nb = 512.min(v.len());
    let SortScratch { counts, bucket } = scratch;
    bucketise(v, lo, hi, nb, counts, bucket);
    let mut sum = 0usize;
    let mut last = (nb - 1) as u32;
    for (b, &c) in counts.iter().enumerate().take(nb) {
        sum += c as usize;
        if sum > rank {
            last = b as u32;
            break;
        }
    }
    // The largest value in buckets 0..=last: every value <= it lies in those buckets or ties with it.
    let mut t = ord_key(lo);
    for (&d, &b) in v.iter().zip(bucket.iter()) {
        let k = if b <= last { ord_key(d) } else { 0 };
        t = t.max(k);
    }
    from_ord(t)
}

/// Insertion sort; fast on the nearly sorted output of the bucket scatter.
#[inline(always)]
fn insertion_sort(s: &mut [u64]) {
    for i in 1..s.len() {
        let x = s[i];
        if s[i - 1] <= x {
            continue;
        }
        let mut j = i;
        while j > 0 && s[j - 1] > x {
            s[j] = s[j - 1];
            j -= 1;
        }
        s[j] = x;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn naive(dist: &[f32], idx: &[u32], kk: usize) -> Vec<(f32, u32)> {
        let mut v: Vec<(f32, u32)> = dist.iter().copied().zip(idx.iter().copied()).collect();
        v.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        v.truncate(kk);
        v
    }

    #[test]
    fn ord_key_preserves_float_order_and_round_trips() {
        let vals = [
            f32::NEG_INFINITY,
            -3.5,
            -1e-30,
            -0.0,
            0.0,
            1e-30,
            2.0,
            7.25e20,
            f32::MAX,
            f32::INFINITY,
        ];
        for w in vals.windows(2) {
            assert!(ord_key(w[0]) <= ord_key(w[1]), "{} vs {}", w[0], w[1]);
        }
        assert_eq!(ord_key(-0.0), ord_key(0.0));
        for &v in &vals {
            assert_eq!(from_ord(ord_key(v)), v + 0.0);
        }
        assert_eq!(key_dist(pack(-2.5, 17)), -2.5);
        assert_eq!(key_index(pack(-2.5, 17)), 17);
    }

    #[test]
    fn top_k_matches_full_sort_on_random_and_tied_data() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut scratch = SortScratch::default();
        let mut out = Vec::new();
        for case in 0..200 {
            let n = rng.random_range(0..3000usize);
            // Draw from a handful of values in some cases so that ties are frequent.
            let levels = if case % 3 == 0 { 5 } else { 1_000_000 };
            let dist: Vec<f32> = (0..n)
                .map(|_| (rng.random_range(0..levels) as f32) * 0.37 - 100.0)
                .collect();
            let mut idx: Vec<u32> = (0..n as u32).collect();
            // Shuffle the index order: candidates arrive in arbitrary order from the kernels.
            for i in (1..n).rev() {
                idx.swap(i, rng.random_range(0..=i));
            }
            let kk = rng.random_range(0..=n + 2);
            let valid = top_k(&dist, &idx, kk, &mut scratch, &mut out);
            let want = naive(&dist, &idx, kk);
            assert_eq!(valid, n, "case {case}");
            let got: Vec<(f32, u32)> = out.iter().map(|&k| (key_dist(k), key_index(k))).collect();
            assert_eq!(got, want, "case {case}: n {n} kk {kk}");
        }
    }

    #[test]
    fn all_ties_take_the_lowest_indices_whether_or_not_indices_ascend() {
        let mut scratch = SortScratch::default();
        let mut out = Vec::new();
        let dist = vec![2.5f32; 1000];
        let ascending: Vec<u32> = (0..1000).map(|i| i * 3).collect();
        top_k(&dist, &ascending, 4, &mut scratch, &mut out);
        assert_eq!(out.iter().map(|&k| key_index(k)).collect::<Vec<_>>(), vec![0, 3, 6, 9]);
        let descending: Vec<u32> = ascending.iter().rev().copied().collect();
        top_k(&dist, &descending, 4, &mut scratch, &mut out);
        assert_eq!(out.iter().map(|&k| key_index(k)).collect::<Vec<_>>(), vec![0, 3, 6, 9]);
    }

    #[test]
    fn top_k_reports_incomplete_sets() {
        let mut scratch = SortScratch::default();
        let mut out = Vec::new();
        let valid = top_k(&[3.0, 1.0, 2.0], &[0, 1, 2], 5, &mut scratch, &mut out);
        assert_eq!(valid, 3);
        assert_eq!(out.iter().map(|&k| key_index(k)).collect::<Vec<_>>(), vec![1, 2, 0]);
    }

    #[test]
    fn threshold_at_rank_brackets_the_requested_rank() {
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let mut scratch = SortScratch::default();
        for case in 0..100 {
            let n = rng.random_range(1..5000usize);
            let levels = if case % 4 == 0 { 3 } else { 1 << 30 };
            let v: Vec<f32> = (0..n)
                .map(|_| rng.random_range(0..levels) as f32 * 1e-3 - 7.0)
                .collect();
            let rank = rng.random_range(0..n);
            let t = threshold_at_rank(&v, rank, &mut scratch);
            assert!(v.contains(&t), "case {case}: threshold must be one of the values");
            let below = v.iter().filter(|&&x| x <= t).count();
            let ties = v.iter().filter(|&&x| x == t).count();
            assert!(below > rank, "case {case}: {below} values <= t for rank {rank}");
            assert!(
                below <= rank + 1 + 3 * (n / 512) + 12 + ties,
                "case {case}: {below} values <= t for rank {rank} of {n}"
            );
        }
    }
}
