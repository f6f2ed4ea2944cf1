//! Dot-product kernels that turn a block of queries and a range of references into ranking distances.
//!
//! Every kernel computes `value[i][j] = bias[j] + alpha * dot(query_i, reference_j)` in `f32`, the
//! ranking distance of [`crate::Distance`] up to a per-query constant. Two implementations exist:
//!
//! * a portable one built on the `gemm` crate (the workspace's build with its `x86-v4` kernels, which reach
//!   about a quarter of this machine's AVX-512 peak), and
//! * an AVX-512 micro-kernel written with `std::arch` intrinsics (stable since Rust 1.89), selected at run
//!   time. Its "filter" variant compares each distance with a per-query threshold inside the kernel and
//!   appends survivors to candidate buffers, so the block × reference distance matrix is never stored.
//!
//! Both compute each `(query, reference)` value with the same sequence of operations regardless of the
//! reference's position, so identical references receive bit-identical distances and ties are exact.

/// Query rows per AVX-512 micro-tile.
pub(crate) const MR: usize = 6;
/// 16-lane vectors per AVX-512 micro-tile row.
pub(crate) const NV: usize = 4;
/// References per packed panel (`NV` vectors of 16 lanes).
pub(crate) const NR: usize = NV * 16;

/// One cache line of `f32`s; the unit of [`AlignedF32`].
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([f32; 16]);

/// A zero-initialised `f32` buffer aligned to 64 bytes, so that every 16-lane load of a packed panel
/// stays within one cache line (misaligned panels cost 5-10% of kernel throughput).
pub(crate) struct AlignedF32 {
    lines: Vec<Line>,
    len: usize,
}

impl AlignedF32 {
    /// `len` zeros.
    pub(crate) fn zeroed(len: usize) -> Self {
        Self {
            lines: vec![Line([0.0; 16]); len.div_ceil(16)],
            len,
        }
    }

    /// The buffer as a slice of `len` values.
    pub(crate) fn as_slice(&self) -> &[f32] {
        // SAFETY: `Line` is `repr(C)` around `[f32; 16]` with size 64 and no padding, so the lines are
        // `lines.len() * 16 >= len` contiguous, initialised `f32`s.
        unsafe { std::slice::from_raw_parts(self.lines.as_ptr().cast::<f32>(), self.len) }
    }

    /// The buffer as a mutable slice of `len` values.
    pub(crate) fn as_mut_slice(&mut self) -> &mut [f32] {
        // SAFETY: as in `as_slice`, and the exclusive borrow of `self` makes the slice unique.
        unsafe { std::slice::from_raw_parts_mut(self.lines.as_mut_ptr().cast::<f32>(), self.len) }
    }
}

/// References packed for the AVX-512 kernel: panels of [`NR`] references stored depth-major, so the kernel
/// reads `NV` contiguous, cache-line-aligned vectors per depth step.
pub(crate) struct PackedPanels {
    /// `panels × dim × NR` values; element `(p, k, c)` is column `k` of reference `p * NR + c`, zero padded.
    pub data: AlignedF32,
    /// Bias per padded reference (`panels × NR`); padding carries `+inf` so it never passes a filter.
    pub bias: Vec<f32>,
    /// Number of panels.
    pub panels: usize,
    /// Columns per reference.
    pub dim: usize,
}

impl PackedPanels {
    /// Packs `n` row-major references (`rows.len() == n * dim`, `bias.len() == n`).
    pub(crate) fn new(rows: &[f32], n: usize, dim: usize, bias: &[f32]) -> Self {
        assert_eq!(
            rows.len(),
            n * dim,
            "pack: rows has {} values for {n} × {dim}",
            rows.len()
        );
        assert_eq!(bias.len(), n, "pack: bias has {} values for {n} references", bias.len());
        let panels = n.div_ceil(NR);
        let mut buf = AlignedF32::zeroed(panels * dim * NR);
        let data = buf.as_mut_slice();
        for (j, row) in rows.chunks_exact(dim).enumerate() {
            let (p, c) = (j / NR, j % NR);
            let base = p * dim * NR + c;
            for (k, &v) in row.iter().enumerate() {
                data[base + k * NR] = v;
            }
        }
        let mut padded_bias = vec![f32::INFINITY; panels * NR];
        padded_bias[..n].copy_from_slice(bias);
        Self {
            data: buf,
            bias: padded_bias,
            panels,
            dim,
        }
    }
}

/// Packs `rows` query rows (given by `row(i)`, each `dim` long) into groups of [`MR`] rows stored
/// depth-major (`out[g][k][r]`), zero padding the last group. Returns the number of groups.
pub(crate) fn pack_queries<'r>(
    count: usize,
    dim: usize,
    row: impl Fn(usize) -> &'r [f32],
    out: &mut Vec<f32>,
) -> usize {
    let groups = count.div_ceil(MR);
    out.clear();
    out.resize(groups * dim * MR, 0.0);
    for i in 0..count {
        let (g, r) = (i / MR, i % MR);
        let base = g * dim * MR + r;
        for (k, &v) in row(i).iter().enumerate() {
            out[base + k * MR] = v;
        }
    }
    groups
}

/// Candidate buffers of one block: per query row, distances and reference indices of every reference whose
/// ranking distance was `<=` the row's threshold.
pub(crate) struct Candidates {
    /// Guaranteed capacity per row; rows hold `cap + 16` slots because the kernel stores whole vectors.
    pub cap: usize,
    /// `rows × (cap + 16)` distances.
    pub dist: Vec<f32>,
    /// `rows × (cap + 16)` reference indices.
    pub idx: Vec<u32>,
    /// Valid entries per row.
    pub count: Vec<usize>,
    /// Whether a row had more candidates than `cap`; its buffer is then incomplete.
    pub overflow: Vec<bool>,
}

impl Candidates {
    /// Empty buffers; [`Candidates::reset`] sizes them.
    pub(crate) fn new() -> Self {
        Self {
            cap: 0,
            dist: Vec::new(),
            idx: Vec::new(),
            count: Vec::new(),
            overflow: Vec::new(),
        }
    }

    /// Sizes the buffers for `rows` rows of capacity `cap` and clears them.
    pub(crate) fn reset(&mut self, rows: usize, cap: usize) {
        self.cap = cap;
        let len = rows * (cap + 16);
        if self.dist.len() < len {
            self.dist.resize(len, 0.0);
            self.idx.resize(len, 0);
        }
        self.count.clear();
        self.count.resize(rows, 0);
        self.overflow.clear();
        self.overflow.resize(rows, false);
    }

    /// Row stride of `dist` and `idx`.
    pub(crate) fn stride(&self) -> usize {
        self.cap + 16
    }

    /// The candidates of `row` as `(distances, indices)`.
    pub(crate) fn row(&self, row: usize) -> (&[f32], &[u32]) {
        let start = row * self.stride();
        let n = self.count[row];
        (&self.dist[start..start + n], &self.idx[start..start + n])
    }

    /// Appends one candidate to `row` (scalar path), flagging overflow instead of growing.
    #[inline]
    pub(crate) fn push(&mut self, row: usize, d: f32, j: u32) {
        let c = self.count[row];
        if c < self.cap {
            let at = row * self.stride() + c;
            self.dist[at] = d;
            self.idx[at] = j;
            self.count[row] = c + 1;
        } else {
            self.overflow[row] = true;
        }
    }
}

/// Portable kernel: `out[i][c] = bias[r0 + c] + alpha * dot(q_i, ref_{r0 + c})` for the `nq` contiguous
/// query rows in `queries` and references `r0..r1` of the row-major `refs`; `out` has row stride `ldo`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm_dists(
    queries: &[f32],
    nq: usize,
    refs: &[f32],
    bias: &[f32],
    dim: usize,
    (r0, r1): (usize, usize),
    alpha: f32,
    out: &mut [f32],
    ldo: usize,
) {
    let w = r1 - r0;
    assert!(
        queries.len() >= nq * dim,
        "gemm_dists: {} query values for {nq} × {dim}",
        queries.len()
    );
    assert!(
        refs.len() >= r1 * dim && bias.len() >= r1,
        "gemm_dists: references shorter than {r1} rows"
    );
    assert!(
        ldo >= w && out.len() >= nq.saturating_sub(1) * ldo + w,
        "gemm_dists: out too small for {nq} × {w}"
    );
    if nq == 0 || w == 0 {
        return;
    }
    for i in 0..nq {
        out[i * ldo..i * ldo + w].copy_from_slice(&bias[r0..r1]);
    }
    // SAFETY: the asserts above guarantee that every element addressed through these strides exists:
    // dst is nq × w with row stride ldo, lhs is nq × dim row-major, rhs is the transpose of references
    // r0..r1 (column stride dim, row stride 1).
    unsafe {
        gemm::gemm(
            nq,
            w,
            dim,
            out.as_mut_ptr(),
            1,
            ldo as isize,
            true,
            queries.as_ptr(),
            1,
            dim as isize,
            refs.as_ptr().add(r0 * dim),
            dim as isize,
            1,
            1.0,
            alpha,
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
    }
}

/// Whether the running CPU can execute the AVX-512 kernels.
pub(crate) fn avx512_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod avx512 {
    //! AVX-512 micro-kernels over packed queries ([`super::pack_queries`]) and panels
    //! ([`super::PackedPanels`]).

    use super::{Candidates, MR, NR, NV, PackedPanels};
    use std::arch::x86_64::*;

    /// Computes the `MR × NR` tile of dot products of one packed query group and one packed panel.
    ///
    /// # Safety
    /// The CPU must support AVX-512F; `ap` must point at `dim * MR` and `bp` at `dim * NR` readable values.
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn tile(ap: *const f32, bp: *const f32, dim: usize) -> [[__m512; NV]; MR] {
        let mut acc = [[_mm512_setzero_ps(); NV]; MR];
        for k in 0..dim {
            // SAFETY: k < dim keeps every read inside the ranges the caller guarantees.
            unsafe {
                let mut b = [_mm512_setzero_ps(); NV];
                for (v, bv) in b.iter_mut().enumerate() {
                    *bv = _mm512_loadu_ps(bp.add(k * NR + v * 16));
                }
                for (r, row) in acc.iter_mut().enumerate() {
                    let a = _mm512_set1_ps(*ap.add(k * MR + r));
                    for v in 0..NV {
                        row[v] = _mm512_fmadd_ps(a, b[v], row[v]);
                    }
                }
            }
        }
        acc
    }

    /// Writes `bias[j] + alpha * dot` for every packed query row (`groups * MR` rows, padding included) and
    /// every reference of panels `p0..p1` into `out` (row stride `ldo >= (p1 - p0) * NR`).
    ///
    /// # Safety
    /// The CPU must support AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(crate) unsafe fn dists(
        apack: &[f32],
        groups: usize,
        refs: &PackedPanels,
        (p0, p1): (usize, usize),
        alpha: f32,
        out: &mut [f32],
        ldo: usize,
    ) {
        let dim = refs.dim;
        assert!(
            apack.len() >= groups * dim * MR,
            "avx512::dists: packed queries too short for {groups} groups"
        );
        assert!(
            p0 <= p1 && p1 <= refs.panels,
            "avx512::dists: panels {p0}..{p1} of {}",
            refs.panels
        );
        assert!(
            ldo >= (p1 - p0) * NR,
            "avx512::dists: ldo {ldo} < {} columns",
            (p1 - p0) * NR
        );
        assert!(
            out.len() >= groups * MR * ldo,
            "avx512::dists: out too small for {} rows",
            groups * MR
        );
        let alpha_v = _mm512_set1_ps(alpha);
        for p in p0..p1 {
            let bp = refs.data.as_slice()[p * dim * NR..(p + 1) * dim * NR].as_ptr();
            // SAFETY: bias holds panels * NR values and p < panels.
            let bias: [__m512; NV] =
                std::array::from_fn(|v| unsafe { _mm512_loadu_ps(refs.bias.as_ptr().add(p * NR + v * 16)) });
            for g in 0..groups {
                // SAFETY: the asserts above bound the packed reads and the tile writes.
                unsafe {
                    let acc = tile(apack.as_ptr().add(g * dim * MR), bp, dim);
                    for (r, row) in acc.iter().enumerate() {
                        let o = out.as_mut_ptr().add((g * MR + r) * ldo + (p - p0) * NR);
                        for v in 0..NV {
                            _mm512_storeu_ps(o.add(v * 16), _mm512_fmadd_ps(row[v], alpha_v, bias[v]));
                        }
                    }
                }
            }
        }
    }

    /// Appends to `cands` every reference of panels `p0..p1` whose distance to packed query row `i` is
    /// `<= thr[i]`, except reference `skip[i]` (the query itself under self-exclusion, `u32::MAX` for
    /// none). Groups whose rows all have threshold `-inf` are skipped without computing their tile.
    ///
    /// # Safety
    /// The CPU must support AVX-512F.
    #[allow(clippy::too_many_arguments)]
    #[target_feature(enable = "avx512f")]
    pub(crate) unsafe fn filter(
        apack: &[f32],
        groups: usize,
        refs: &PackedPanels,
        (p0, p1): (usize, usize),
        alpha: f32,
        thr: &[f32],
        skip: &[u32],
        cands: &mut Candidates,
    ) {
        let dim = refs.dim;
        let rows = groups * MR;
        assert!(
            apack.len() >= groups * dim * MR,
            "avx512::filter: packed queries too short for {groups} groups"
        );
        assert!(
            p0 <= p1 && p1 <= refs.panels,
            "avx512::filter: panels {p0}..{p1} of {}",
            refs.panels
        );
        assert!(
            thr.len() >= rows && skip.len() >= rows && cands.count.len() >= rows,
            "avx512::filter: thresholds/skips/candidates < {rows} rows"
        );
        assert!(
            cands.dist.len() >= rows * cands.stride(),
            "avx512::filter: candidate buffers < {rows} rows"
        );
        let stride = cands.stride();
        let cap = cands.cap;
        let alpha_v = _mm512_set1_ps(alpha);
        let lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        for p in p0..p1 {
            let bp = refs.data.as_slice()[p * dim * NR..(p + 1) * dim * NR].as_ptr();
            // SAFETY: bias holds panels * NR values and p < panels.
            let bias: [__m512; NV] =
                std::array::from_fn(|v| unsafe { _mm512_loadu_ps(refs.bias.as_ptr().add(p * NR + v * 16)) });
            let base = (p * NR) as i32;
            for g in 0..groups {
                // A group whose rows are all inactive contributes nothing, so its tile is not computed.
                if thr[g * MR..g * MR + MR].iter().all(|&t| t == f32::NEG_INFINITY) {
                    continue;
                }
                // SAFETY: the asserts above bound the packed reads; candidate writes stay below
                // row * stride + cap + 16 because a row only receives a vector while its count is <= cap.
                unsafe {
                    let acc = tile(apack.as_ptr().add(g * dim * MR), bp, dim);
                    for (r, row) in acc.iter().enumerate() {
                        let i = g * MR + r;
                        let t = _mm512_set1_ps(thr[i]);
                        let self_j = _mm512_set1_epi32(skip[i] as i32);
                        for v in 0..NV {
                            let d = _mm512_fmadd_ps(row[v], alpha_v, bias[v]);
                            let m = _mm512_cmp_ps_mask::<_CMP_LE_OQ>(d, t);
                            if m == 0 {
                                continue;
                            }
                            let j = _mm512_add_epi32(_mm512_set1_epi32(base + (v * 16) as i32), lanes);
                            let m = m & !_mm512_cmpeq_epi32_mask(j, self_j);
                            if m == 0 {
                                continue;
                            }
                            let c = cands.count[i];
                            if c > cap {
                                cands.overflow[i] = true;
                                continue;
                            }
                            let at = i * stride + c;
                            _mm512_storeu_ps(cands.dist.as_mut_ptr().add(at), _mm512_maskz_compress_ps(m, d));
                            _mm512_storeu_si512(
                                cands.idx.as_mut_ptr().add(at) as *mut __m512i,
                                _mm512_maskz_compress_epi32(m, j),
                            );
                            cands.count[i] = c + m.count_ones() as usize;
                        }
                    }
                }
            }
        }
    }
}
