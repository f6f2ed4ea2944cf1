//! An AVX-512 single-precision matrix product for the host-evaluated losses and convolutions.
//!
//! The `gemm` crate's AVX-512 micro-kernels, as compiled in this workspace, spill their
//! accumulators to the stack: on this machine they reach about 25 of the 100 GMAC/s one core
//! can do. This kernel keeps a 6 × 64 tile of `C` in 24 `zmm` registers, with `A` and `B` in
//! panels such that every step of the inner loop reads one broadcast per row and four
//! contiguous vectors, and reaches several times that. It is selected at run time when the
//! CPU has AVX-512F; `gemm` remains the portable path (and the `f64` one).
//!
//! Layout: `C [m, n] (+)= A [m, k] · B [k, n]` where each operand is a strided view
//! ([`View`]), so transposed operands need no copy beyond the packing. A row-major operand's
//! full panels are read where they lie (`A` always, `B` for products of few rows); the rest is
//! packed.

use crate::shared::SharedOut;

/// Rows of `C` per micro-tile.
const MR: usize = 6;
/// Columns of `C` per micro-tile: four 16-lane vectors.
const NR: usize = 64;

/// The columns of `C` one micro-tile computes: a product of `n` columns costs as much as one of
/// `⌈n / PANEL_COLUMNS⌉` whole panels.
pub const PANEL_COLUMNS: usize = NR;
/// Depth of one packed block: a `[KC, NR]` panel of `B` is 64 KiB (L2), a `[MR, KC]` panel of
/// `A` 6 KiB (L1).
const KC: usize = 192;

/// A strided read-only view: element `(i, j)` is `data[i * rs + j * cs]`.
#[derive(Clone, Copy)]
pub struct View<'a> {
    /// The values.
    pub data: &'a [f32],
    /// Row stride.
    pub rs: usize,
    /// Column stride.
    pub cs: usize,
}

impl View<'_> {
    #[inline(always)]
    fn at(&self, i: usize, j: usize) -> f32 {
        self.data[i * self.rs + j * self.cs]
    }

    /// Whether every element of a `[rows, cols]` view lies inside `data`.
    fn covers(&self, rows: usize, cols: usize) -> bool {
        rows == 0 || cols == 0 || (rows - 1) * self.rs + (cols - 1) * self.cs < self.data.len()
    }
}

/// Whether a `[m, k] × [k, n]` product is worth splitting over threads (the `parallel` argument
/// of [`sgemm`]): from 2²⁵ multiply-adds on. Below that, waking a sleeping worker costs more
/// than half the product (measured: `[180, 512] × [512, 100]` takes 0.22 ms on one thread and
/// 0.35 ms split in two).
pub fn worth_splitting([m, n, k]: [usize; 3]) -> bool {
    m.saturating_mul(n).saturating_mul(k) >= 1 << 25
}

/// Whether the running CPU can execute this kernel.
pub fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// `c = a · b` (or `c += a · b` with `accumulate`) for a row-major `c` `[m, n]` with row stride
/// `n`; `a` is `[m, k]` and `b` `[k, n]`. With `parallel` the product is split into one part per
/// rayon thread (by column panels when there are enough, else by row panels).
///
/// # Panics
/// When a view or `c` is too short for its shape, or when [`available`] is false.
pub fn sgemm(c: &mut [f32], [m, n, k]: [usize; 3], a: View, b: View, accumulate: bool, parallel: bool) {
    sgemm_rows(c, n, [m, n, k], a, b, accumulate, parallel);
}

/// [`sgemm`] into a `c` whose rows lie `ldc ≥ n` values apart (a block of columns of a wider
/// matrix, such as one image's columns of a convolution's `[O, B·Ho·Wo]` output); the values
/// between the rows are left alone.
///
/// # Panics
/// As [`sgemm`], and when `ldc < n`.
#[allow(clippy::too_many_arguments)]
pub fn sgemm_rows(
    c: &mut [f32],
    ldc: usize,
    [m, n, k]: [usize; 3],
    a: View,
    b: View,
    accumulate: bool,
    parallel: bool,
) {
    assert!(available(), "sgemm needs AVX-512F");
    assert!(
        ldc >= n && (m == 0 || c.len() >= (m - 1) * ldc + n) && a.covers(m, k) && b.covers(k, n),
        "sgemm: operands too short for [{m}, {k}] × [{k}, {n}] (row stride {ldc})"
    );
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if !accumulate {
            c.chunks_mut(ldc).take(m).for_each(|row| row[..n].fill(0.0));
        }
        return;
    }
    if splits_depth([m, n, k]) {
        if ldc == n {
            split_depth(c, [m, n, k], a, b, accumulate, parallel);
        } else {
            // The depth parts sum whole `[m, n]` buffers; a strided `c` takes their total.
            let mut dense = vec![0.0f32; m * n];
            split_depth(&mut dense, [m, n, k], a, b, false, parallel);
            for (row, sum) in c.chunks_mut(ldc).zip(dense.chunks_exact(n)) {
                for (d, &v) in row[..n].iter_mut().zip(sum) {
                    *d = if accumulate { *d + v } else { v };
                }
            }
        }
        return;
    }
    let out = SharedOut::new(c);
    let tile = |rows: (usize, usize), cols: (usize, usize)| {
        // SAFETY: the parts below write disjoint blocks of `c`, which holds m rows of n values at
        // stride ldc (asserted).
        unsafe { block(out, ldc, rows, cols, k, &a, &b, accumulate) }
    };
    let threads = if parallel { rayon::current_num_threads() } else { 1 };
    let (col_panels, row_panels) = (n.div_ceil(NR), m.div_ceil(MR));
    if threads <= 1 || (col_panels < 2 && row_panels < 2) {
        tile((0, m), (0, n));
    } else if col_panels >= 2 * threads || col_panels >= row_panels {
        // Whole panels per part, so that no part packs a partial panel it need not.
        let parts = threads.min(col_panels);
        let bound = |p: usize| (col_panels * p / parts * NR).min(n);
        use rayon::prelude::*;
        (0..parts)
            .into_par_iter()
            .for_each(|p| tile((0, m), (bound(p), bound(p + 1))));
    } else {
        let parts = threads.min(row_panels);
        let bound = |p: usize| (row_panels * p / parts * MR).min(m);
        use rayon::prelude::*;
        (0..parts)
            .into_par_iter()
            .for_each(|p| tile((bound(p), bound(p + 1)), (0, n)));
    }
}

/// Depth parts of a product split along `k` (a fixed number, not the thread count, so that the
/// sums, and so a training run, are the same on every machine).
const DEPTH_PARTS: usize = 4;

/// Whether `[m, k] × [k, n]` is split along its depth: a small result over a long sum, such as a
/// convolution's weight gradient (`[C·kh·kw, O]` summed over every output position of the
/// batch). Split by rows or columns, every part would pack the whole of the other operand; split
/// along `k`, each packs its share once. Decided by the shape alone, for the same reason as
/// [`DEPTH_PARTS`].
fn splits_depth([m, n, k]: [usize; 3]) -> bool {
    k >= 8 * m.max(n) && k >= 2 * KC * DEPTH_PARTS
}

/// [`sgemm`] as [`DEPTH_PARTS`] products over consecutive ranges of `k`: the first accumulates
/// into `c` (or overwrites it), the others into their own buffers, which are added to `c` in
/// order afterwards; the parts run in parallel when `parallel`.
fn split_depth(c: &mut [f32], [m, n, k]: [usize; 3], a: View, b: View, accumulate: bool, parallel: bool) {
    use rayon::prelude::*;
    let range = |p: usize| (k * p / DEPTH_PARTS, k * (p + 1) / DEPTH_PARTS);
    // Columns k0.. of A and rows k0.. of B, as views starting there.
    let part = |p: usize, out: &mut [f32], acc: bool| {
        let (k0, k1) = range(p);
        let a = View {
            data: &a.data[k0 * a.cs..],
            ..a
        };
        let b = View {
            data: &b.data[k0 * b.rs..],
            ..b
        };
        // SAFETY: `out` is `[m, n]` at row stride `n` and exclusively borrowed by this part.
        unsafe { block(SharedOut::new(out), n, (0, m), (0, n), k1 - k0, &a, &b, acc) }
    };
    let c = &mut c[..m * n];
    let run = |p: usize| -> Vec<f32> {
        let mut buf = vec![0.0f32; m * n];
        part(p, &mut buf, false);
        buf
    };
    let rest: Vec<Vec<f32>> = if parallel {
        rayon::join(
            || part(0, c, accumulate),
            || (1..DEPTH_PARTS).into_par_iter().map(run).collect(),
        )
        .1
    } else {
        part(0, c, accumulate);
        (1..DEPTH_PARTS).map(run).collect()
    };
    for buf in rest {
        c.iter_mut().zip(&buf).for_each(|(x, y)| *x += y);
    }
}

std::thread_local! {
    /// This thread's packed panels of `A` and `B`, kept from one product to the next: a
    /// convolution's packed `B` is tens of MB, and allocating it zeroed for every product cost a
    /// memset and fresh pages (3–5 % of a ResNet-18 training step). The packing functions write
    /// every value the kernel reads, so the buffers are never cleared.
    static PACKS: std::cell::RefCell<(Vec<f32>, Vec<f32>)> = const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
}

/// The block `rows.0..rows.1` × `cols.0..cols.1` of `C = A · B`, with `C` at row stride `ldc`.
///
/// # Safety
/// `out` must point to a `C` with at least `rows.1` rows of stride `ldc ≥ cols.1`, of which no
/// other thread writes this block; the CPU must support AVX-512F.
#[allow(clippy::too_many_arguments)]
unsafe fn block(
    out: SharedOut,
    ldc: usize,
    (r0, r1): (usize, usize),
    (c0, c1): (usize, usize),
    k: usize,
    a: &View,
    b: &View,
    accumulate: bool,
) {
    let (m, n) = (r1 - r0, c1 - c0);
    if m == 0 || n == 0 {
        return;
    }
    let row_panels = m.div_ceil(MR);
    let col_panels = n.div_ceil(NR);
    let depth = KC.min(k);
    PACKS.with_borrow_mut(|(a_pack, b_pack)| {
        grow(a_pack, row_panels * MR * depth);
        grow(b_pack, col_panels * NR * depth);
        for k0 in (0..k).step_by(KC) {
            let kc = KC.min(k - k0);
            let panels_a = Panels::of_a(a, (r0, r1), k0, kc, a_pack);
            let panels_b = Panels::of_b(b, (c0, c1), k0, kc, m, b_pack);
            let add = accumulate || k0 > 0;
            for jp in 0..col_panels {
                let (b_ptr, ldb) = panels_b.panel(jp);
                for ip in 0..row_panels {
                    let rows = MR.min(m - ip * MR);
                    let cols = NR.min(n - jp * NR);
                    let (a_ptr, lda) = panels_a.panel(ip);
                    // SAFETY: the A panel holds MR rows of kc values at row stride lda, the B
                    // panel kc rows of NR values at row stride ldb (both checked by `Panels`);
                    // the tile lies inside this block (rows and cols are clipped), as the
                    // caller guarantees the block lies inside `C`.
                    #[cfg(target_arch = "x86_64")]
                    unsafe {
                        kernel(
                            kc,
                            a_ptr,
                            lda,
                            b_ptr,
                            ldb,
                            out.at((r0 + ip * MR) * ldc + c0 + jp * NR),
                            ldc,
                            rows,
                            cols,
                            add,
                        );
                    }
                }
            }
        }
    });
}

/// Grows `buffer` to at least `len` values (new values are zero; old ones are kept, since the
/// packing overwrites what the kernel reads).
fn grow(buffer: &mut Vec<f32>, len: usize) {
    if buffer.len() < len {
        buffer.resize(len, 0.0);
    }
}

/// The most rows of `C` (of one part of the product) for which a row-major `B` is read in
/// place rather than packed: each packed value is read once per row panel of `A`, so the copy
/// pays back over many rows, while read in place the panel's rows lie a row stride apart, often
/// a multiple of 4 KiB (the Winograd products' `V_e`, at `α²·T` values), where they share cache
/// sets and pages (the A/B figures: `docs/performance-log.md`).
const DIRECT_B_ROWS: usize = 64;

/// One operand's panels for one depth block, as the kernel reads them: the first value of
/// panel `p` and its row stride. The full panels of a row-major operand (unit column stride)
/// are read where they lie; the others are copied into the thread's pack.
struct Panels<'a> {
    /// The operand's values from the block's first panel on, when its full panels are read in
    /// place.
    direct: Option<&'a [f32]>,
    /// Full panels (read in place when `direct`).
    full: usize,
    /// Values from one panel read in place to the next, and such a panel's row stride.
    direct_step: usize,
    direct_stride: usize,
    /// The packed panels, `packed_step` values apart, each at row stride `packed_stride`.
    pack: &'a [f32],
    packed_step: usize,
    packed_stride: usize,
}

impl<'a> Panels<'a> {
    /// The row panels of `A`: [`MR`] rows of `kc` values. A row-major `A` is read where it lies,
    /// one stream per row, so its full panels need no copy (for a convolution's weight gradient
    /// `A` is the whole unfolded input, whose copy cost 15 % of a ResNet-18 step); the last,
    /// partial panel and every panel of a transposed `A` are copied into `pack`, zero padded to
    /// [`MR`] rows: panel `p` at `p·MR·kc`, row `r` of it at `+ r·kc`.
    fn of_a(a: &View<'a>, (r0, r1): (usize, usize), k0: usize, kc: usize, pack: &'a mut [f32]) -> Self {
        let m = r1 - r0;
        let full = m / MR;
        let direct = (a.cs == 1).then(|| &a.data[r0 * a.rs + k0..]);
        let first_packed = if direct.is_some() { full } else { 0 };
        for p in first_packed..m.div_ceil(MR) {
            let panel = &mut pack[p * MR * kc..(p + 1) * MR * kc];
            let rows = MR.min(m - p * MR);
            for (r, dst) in panel.chunks_exact_mut(kc).enumerate() {
                if r >= rows {
                    dst.fill(0.0);
                    continue;
                }
                let row = r0 + p * MR + r;
                if a.cs == 1 {
                    dst.copy_from_slice(&a.data[row * a.rs + k0..][..kc]);
                } else {
                    for (kk, v) in dst.iter_mut().enumerate() {
                        *v = a.at(row, k0 + kk);
                    }
                }
            }
        }
        if let Some(values) = direct {
            // The kernel reads rows 0..full·MR, columns 0..kc of `values`.
            assert!(
                full == 0 || (full * MR - 1) * a.rs + kc <= values.len(),
                "sgemm: A too short for its panels"
            );
        }
        Self {
            direct,
            full,
            direct_step: MR * a.rs,
            direct_stride: a.rs,
            pack: &*pack,
            packed_step: MR * kc,
            packed_stride: kc,
        }
    }

    /// The column panels of `B`: `kc` rows of [`NR`] values. A row-major `B` is read where it
    /// lies, `NR` contiguous values per row, in products of up to [`DIRECT_B_ROWS`] rows
    /// (`rows`): its copy into panels was a twentieth of a ResNet-18 training step (the
    /// transformed input `V_e` of every Winograd product and the unfolded input of every im2col
    /// one), memory-bound. Its last, partial panel and every panel of a transposed or many-row
    /// `B` are packed ([`pack_b`]).
    fn of_b(b: &View<'a>, (c0, c1): (usize, usize), k0: usize, kc: usize, rows: usize, pack: &'a mut [f32]) -> Self {
        let n = c1 - c0;
        let full = n / NR;
        let direct = (b.cs == 1 && rows <= DIRECT_B_ROWS).then(|| &b.data[k0 * b.rs + c0..]);
        if let Some(values) = direct {
            // The kernel reads rows 0..kc, columns 0..full·NR of `values`; only the partial
            // panel is packed.
            assert!(
                full == 0 || (kc - 1) * b.rs + full * NR <= values.len(),
                "sgemm: B too short for its panels"
            );
            if full * NR < n {
                pack_b(b, (c0 + full * NR, c1), k0, kc, &mut pack[full * NR * kc..]);
            }
        } else {
            pack_b(b, (c0, c1), k0, kc, pack);
        }
        Self {
            direct,
            full,
            direct_step: NR,
            direct_stride: b.rs,
            pack: &*pack,
            packed_step: NR * kc,
            packed_stride: NR,
        }
    }

    /// Panel `p`'s first value and its row stride.
    fn panel(&self, p: usize) -> (*const f32, usize) {
        match self.direct {
            Some(values) if p < self.full => (values[p * self.direct_step..].as_ptr(), self.direct_stride),
            _ => (self.pack[p * self.packed_step..].as_ptr(), self.packed_stride),
        }
    }
}

/// Packs rows `k0..k0 + kc` and columns `c0..c1` of `b` into column panels of [`NR`]: panel
/// `p` holds `out[p·NR·kc + kk·NR + c] = b[k0 + kk, c0 + p·NR + c]`, zero padded past `c1`.
fn pack_b(b: &View, (c0, c1): (usize, usize), k0: usize, kc: usize, out: &mut [f32]) {
    let n = c1 - c0;
    for (p, panel) in out.chunks_exact_mut(NR * kc).take(n.div_ceil(NR)).enumerate() {
        let cols = NR.min(n - p * NR);
        let first = c0 + p * NR;
        if b.cs == 1 {
            for kk in 0..kc {
                let start = (k0 + kk) * b.rs + first;
                let dst = &mut panel[kk * NR..(kk + 1) * NR];
                dst[..cols].copy_from_slice(&b.data[start..start + cols]);
                dst[cols..].fill(0.0);
            }
        } else {
            // Columns of a transposed operand are contiguous along k.
            if cols < NR {
                panel.fill(0.0);
            }
            // Whole 16 × 16 blocks are transposed in registers when each column is contiguous:
            // one value at a time, every store went to another cache line of the panel, and
            // this packing cost 8 % of a ResNet-18 training step (the Winograd weight
            // gradient's `V_eᵀ`).
            let (block_cols, block_depth) = if b.rs == 1 {
                (cols / 16 * 16, kc / 16 * 16)
            } else {
                (0, 0)
            };
            if block_cols > 0 && block_depth > 0 {
                let last = (first + block_cols - 1) * b.cs + k0 + block_depth;
                assert!(last <= b.data.len(), "sgemm: B too short for its panels");
                for col in (0..block_cols).step_by(16) {
                    for kk in (0..block_depth).step_by(16) {
                        // SAFETY: the 16 columns read here, 16 values each, end at or before
                        // `last` (checked above); the panel has `kc · NR` values and the block
                        // writes rows kk..kk + 16 < kc at columns col..col + 16 ≤ NR. The CPU
                        // has AVX-512F (`sgemm` asserts it).
                        #[cfg(target_arch = "x86_64")]
                        unsafe {
                            transpose_16x16(
                                b.data.as_ptr().add((first + col) * b.cs + k0 + kk),
                                b.cs,
                                panel.as_mut_ptr().add(kk * NR + col),
                                NR,
                            );
                        }
                    }
                }
            }
            for col in 0..cols {
                let start = (first + col) * b.cs + k0 * b.rs;
                // The values the blocks above did not write: all of a column past the last
                // whole block of columns, else only the depth past the last whole block.
                let from = if col < block_cols { block_depth } else { 0 };
                for kk in from..kc {
                    panel[kk * NR + col] = b.data[start + kk * b.rs];
                }
            }
        }
    }
}

/// `dst[c·ldd + r] = src[r·ld + c]` for a 16 × 16 block: sixteen rows of sixteen values become
/// sixteen rows of the block's columns, through three rounds of in-register shuffles (32-bit
/// pairs, 64-bit pairs, then 128-bit lanes twice).
///
/// # Safety
/// The CPU must support AVX-512F; `src` must be valid for reads of 16 rows of 16 values at
/// stride `ld`, and `dst` for writes of 16 rows of 16 values at stride `ldd`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn transpose_16x16(src: *const f32, ld: usize, dst: *mut f32, ldd: usize) {
    use std::arch::x86_64::*;
    // SAFETY: the reads and writes stay inside the two blocks, as the caller guarantees.
    unsafe {
        let r: [__m512; 16] = std::array::from_fn(|i| _mm512_loadu_ps(src.add(i * ld)));
        // Within each 128-bit lane ℓ, t[2i] holds (r₂ᵢ, r₂ᵢ₊₁) at columns 4ℓ, 4ℓ + 1 and
        // t[2i + 1] at columns 4ℓ + 2, 4ℓ + 3.
        let t: [__m512; 16] = std::array::from_fn(|i| {
            let (x, y) = (r[i & !1], r[i | 1]);
            if i % 2 == 0 {
                _mm512_unpacklo_ps(x, y)
            } else {
                _mm512_unpackhi_ps(x, y)
            }
        });
        // u[4i + j], lane ℓ: column 4ℓ + j of rows 4i..4i + 4.
        let u: [__m512; 16] = std::array::from_fn(|q| {
            let (i, j) = (q / 4, q % 4);
            let (x, y) = (t[4 * i + j / 2], t[4 * i + j / 2 + 2]);
            if j % 2 == 0 {
                _mm512_shuffle_ps::<0x44>(x, y)
            } else {
                _mm512_shuffle_ps::<0xEE>(x, y)
            }
        });
        for j in 0..4 {
            // Lanes 0 and 2 (v) and 1 and 3 (w) of rows 0..8, then of rows 8..16.
            let v = _mm512_shuffle_f32x4::<0x88>(u[j], u[4 + j]);
            let w = _mm512_shuffle_f32x4::<0xDD>(u[j], u[4 + j]);
            let v2 = _mm512_shuffle_f32x4::<0x88>(u[8 + j], u[12 + j]);
            let w2 = _mm512_shuffle_f32x4::<0xDD>(u[8 + j], u[12 + j]);
            _mm512_storeu_ps(dst.add(j * ldd), _mm512_shuffle_f32x4::<0x88>(v, v2));
            _mm512_storeu_ps(dst.add((4 + j) * ldd), _mm512_shuffle_f32x4::<0x88>(w, w2));
            _mm512_storeu_ps(dst.add((8 + j) * ldd), _mm512_shuffle_f32x4::<0xDD>(v, v2));
            _mm512_storeu_ps(dst.add((12 + j) * ldd), _mm512_shuffle_f32x4::<0xDD>(w, w2));
        }
    }
}

/// One `[rows, cols]` tile (at most `MR × NR`) of `C` from panels of depth `kc`:
/// `C (+)= Aₚ Bₚ`, with `Aₚ` [`MR`] rows of `kc` values at row stride `lda`, `Bₚ` `kc` rows of
/// [`NR`] values at row stride `ldb` (`NR` when packed), and `C` row-major at row stride `ldc`.
///
/// # Safety
/// The CPU must support AVX-512F; `a` must be valid for `MR` rows of `kc` values at stride
/// `lda`, `b` for `kc` rows of `NR` values at stride `ldb`, and `c` for `rows` rows of `cols`
/// values at stride `ldc`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
unsafe fn kernel(
    kc: usize,
    a: *const f32,
    lda: usize,
    b: *const f32,
    ldb: usize,
    c: *mut f32,
    ldc: usize,
    rows: usize,
    cols: usize,
    add: bool,
) {
    use std::arch::x86_64::*;
    // Twenty-four named accumulators and four named B vectors: with arrays, the compiler keeps
    // bounds checks and spills part of the tile to the stack (measured: half the throughput).
    let z = _mm512_setzero_ps();
    let (mut c00, mut c01, mut c02, mut c03) = (z, z, z, z);
    let (mut c10, mut c11, mut c12, mut c13) = (z, z, z, z);
    let (mut c20, mut c21, mut c22, mut c23) = (z, z, z, z);
    let (mut c30, mut c31, mut c32, mut c33) = (z, z, z, z);
    let (mut c40, mut c41, mut c42, mut c43) = (z, z, z, z);
    let (mut c50, mut c51, mut c52, mut c53) = (z, z, z, z);
    // SAFETY (whole body): reads stay within the packed panels (kk < kc) and writes within the
    // masked `[rows, cols]` tile, as the caller guarantees.
    unsafe {
        // One stream per row of A, each read in order: the six broadcasts of a step come from
        // six rows, which the hardware prefetchers follow as six sequential streams.
        let rows_a: [*const f32; MR] = std::array::from_fn(|r| a.wrapping_add(r * lda));
        let mut bp = b;
        for kk in 0..kc {
            // `wrapping_add` and the load intrinsics carry no debug-build precondition checks;
            // with `add` and a plain dereference, those checks spill the B vectors.
            let b0 = _mm512_loadu_ps(bp);
            let b1 = _mm512_loadu_ps(bp.wrapping_add(16));
            let b2 = _mm512_loadu_ps(bp.wrapping_add(32));
            let b3 = _mm512_loadu_ps(bp.wrapping_add(48));
            macro_rules! row {
                ($r:expr, $x0:ident, $x1:ident, $x2:ident, $x3:ident) => {
                    let av = _mm512_broadcastss_ps(_mm_load_ss(rows_a[$r].wrapping_add(kk)));
                    $x0 = _mm512_fmadd_ps(av, b0, $x0);
                    $x1 = _mm512_fmadd_ps(av, b1, $x1);
                    $x2 = _mm512_fmadd_ps(av, b2, $x2);
                    $x3 = _mm512_fmadd_ps(av, b3, $x3);
                };
            }
            row!(0, c00, c01, c02, c03);
            row!(1, c10, c11, c12, c13);
            row!(2, c20, c21, c22, c23);
            row!(3, c30, c31, c32, c33);
            row!(4, c40, c41, c42, c43);
            row!(5, c50, c51, c52, c53);
            bp = bp.wrapping_add(ldb);
        }
        let acc = [
            [c00, c01, c02, c03],
            [c10, c11, c12, c13],
            [c20, c21, c22, c23],
            [c30, c31, c32, c33],
            [c40, c41, c42, c43],
            [c50, c51, c52, c53],
        ];
        let masks: [u16; 4] = std::array::from_fn(|v| {
            let lanes = cols.saturating_sub(16 * v).min(16);
            if lanes == 16 { u16::MAX } else { (1u16 << lanes) - 1 }
        });
        for (r, row) in acc.iter().enumerate().take(rows) {
            let cp = c.add(r * ldc);
            for (v, &value) in row.iter().enumerate() {
                let mask = masks[v];
                if mask == 0 {
                    break;
                }
                let dst = cp.add(16 * v);
                let value = if add {
                    _mm512_add_ps(_mm512_maskz_loadu_ps(mask, dst), value)
                } else {
                    value
                };
                _mm512_mask_storeu_ps(dst, mask, value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A row-major `[_, cols]` matrix as a view.
    fn row_major(data: &[f32], cols: usize) -> View<'_> {
        View { data, rs: cols, cs: 1 }
    }

    /// Whether an f32 result is the f64 reference `want` within the tolerance of these tests,
    /// 1e-4 relative to `1 + |want|`.
    fn close(got: f32, want: f64) -> bool {
        (f64::from(got) - want).abs() < 1e-4 * (1.0 + want.abs())
    }

    /// Asserts that every value of `c` is [`close`] to `want`'s, naming `what` when one is not.
    fn assert_matches(c: &[f32], want: &[f64], what: &str) {
        for (i, (&got, &want)) in c.iter().zip(want).enumerate() {
            assert!(close(got, want), "{what}: c[{i}] = {got} vs {want}");
        }
    }

    fn naive(m: usize, n: usize, k: usize, a: &View, b: &View) -> Vec<f64> {
        (0..m * n)
            .map(|idx| (0..k).map(|p| a.at(idx / n, p) as f64 * b.at(p, idx % n) as f64).sum())
            .collect()
    }

    #[test]
    #[cfg_attr(not(host_avx512), ignore = "needs AVX-512F, which this CPU lacks")]
    fn tiles_edges_depth_blocks_and_strides_match_the_naive_product() {
        assert!(
            available(),
            "dml-kernels was built on a CPU with AVX-512F but runs on one without: rebuild it"
        );
        // Edges in every dimension (m not a multiple of 6, n not of 64, k over two blocks of 256)
        // and all four storage orders; sequential and parallel. The last shape is split along its
        // depth (a convolution's weight gradient in miniature), into parts of unequal length.
        assert!(splits_depth([27, 32, 1601]) && !splits_depth([180, 130, 520]));
        for &(m, n, k) in &[(1, 1, 1), (7, 65, 3), (13, 100, 300), (180, 130, 520), (27, 32, 1601)] {
            let av: Vec<f32> = (0..m * k).map(|i| ((i * 37 % 101) as f32 - 50.0) / 50.0).collect();
            let bv: Vec<f32> = (0..k * n).map(|i| ((i * 53 % 97) as f32 - 48.0) / 48.0).collect();
            for (a_t, b_t) in [(false, false), (true, false), (false, true), (true, true)] {
                let a = View {
                    data: &av,
                    rs: if a_t { 1 } else { k },
                    cs: if a_t { m } else { 1 },
                };
                let b = View {
                    data: &bv,
                    rs: if b_t { 1 } else { n },
                    cs: if b_t { k } else { 1 },
                };
                let want = naive(m, n, k, &a, &b);
                for parallel in [false, true] {
                    let mut c = vec![f32::NAN; m * n];
                    sgemm(&mut c, [m, n, k], a, b, false, parallel);
                    let mut acc = vec![2.0f32; m * n];
                    sgemm(&mut acc, [m, n, k], a, b, true, parallel);
                    assert_matches(&c, &want, &format!("[{m},{n},{k}] a_t={a_t} b_t={b_t}"));
                    for i in 0..m * n {
                        // The tolerance of the product, not of the sum with 2.
                        let tol = 1e-4 * (1.0 + want[i].abs());
                        assert!((acc[i] as f64 - (want[i] + 2.0)).abs() < tol, "accumulate c[{i}]");
                    }
                }
            }
        }
    }

    #[test]
    #[cfg_attr(not(host_avx512), ignore = "needs AVX-512F, which this CPU lacks")]
    fn a_window_of_a_wider_matrix_is_read_in_place_and_repeated_products_reuse_the_packs() {
        assert!(
            available(),
            "dml-kernels was built on a CPU with AVX-512F but runs on one without: rebuild it"
        );
        // A is rows 3.. and columns 2.. of a [40, 300] matrix (row stride 300 > k, an offset
        // start): its full panels are read where they lie, the partial last one is copied. Two
        // products of different sizes run in turn on one thread, so the second reads packs the
        // first left behind: stale values must never reach the result.
        let (wide_rows, wide_cols) = (40, 300);
        let wide: Vec<f32> = (0..wide_rows * wide_cols)
            .map(|i| ((i * 29 % 83) as f32 - 41.0) / 41.0)
            .collect();
        for &(m, n, k) in &[(35, 130, 290), (8, 20, 17), (35, 130, 290)] {
            let a = View {
                data: &wide[3 * wide_cols + 2..],
                rs: wide_cols,
                cs: 1,
            };
            let bv: Vec<f32> = (0..k * n).map(|i| ((i * 53 % 97) as f32 - 48.0) / 48.0).collect();
            let b = row_major(&bv, n);
            let want = naive(m, n, k, &a, &b);
            let mut c = vec![f32::NAN; m * n];
            sgemm(&mut c, [m, n, k], a, b, false, false);
            assert_matches(&c, &want, &format!("[{m},{n},{k}]"));
        }
    }

    #[test]
    #[cfg_attr(not(host_avx512), ignore = "needs AVX-512F, which this CPU lacks")]
    fn a_window_of_a_wider_b_is_read_in_place_for_few_rows_and_packed_for_many() {
        assert!(available());
        // B is rows 2.. and columns 5.. of a [700, 300] matrix (row stride 300 > n): for up to
        // `DIRECT_B_ROWS` rows of C its full panels are read where they lie and the partial last
        // one is packed; for more rows every panel is packed. Depth over two blocks, so the
        // in-place panels start at a later row of B too; one thread then two.
        let (wide_rows, wide_cols) = (700, 300);
        let wide: Vec<f32> = (0..wide_rows * wide_cols)
            .map(|i| ((i * 31 % 89) as f32 - 44.0) / 44.0)
            .collect();
        for &(m, n, k) in &[(DIRECT_B_ROWS, 150, 400), (DIRECT_B_ROWS + 7, 150, 400), (5, 128, 250)] {
            let av: Vec<f32> = (0..m * k).map(|i| ((i * 37 % 101) as f32 - 50.0) / 50.0).collect();
            let a = row_major(&av, k);
            let b = View {
                data: &wide[2 * wide_cols + 5..],
                rs: wide_cols,
                cs: 1,
            };
            let want = naive(m, n, k, &a, &b);
            for parallel in [false, true] {
                let mut c = vec![f32::NAN; m * n];
                sgemm(&mut c, [m, n, k], a, b, false, parallel);
                assert_matches(&c, &want, &format!("[{m},{n},{k}] parallel={parallel}"));
            }
        }
    }

    #[test]
    #[cfg_attr(not(host_avx512), ignore = "needs AVX-512F, which this CPU lacks")]
    fn the_register_transpose_moves_every_value_of_a_block_and_nothing_else() {
        assert!(available());
        // A 16 × 16 block read from a [16, 20] source, written into a [16, 24] destination:
        // every value distinct, so any swapped pair shows; the columns outside stay untouched.
        let (ld, ldd) = (20, 24);
        let src: Vec<f32> = (0..16 * ld).map(|i| i as f32).collect();
        let mut dst = vec![-1.0f32; 16 * ldd];
        // SAFETY: both buffers hold 16 rows at their strides; the CPU has AVX-512F.
        unsafe { transpose_16x16(src.as_ptr().add(2), ld, dst.as_mut_ptr().add(3), ldd) };
        for c in 0..16 {
            for r in 0..16 {
                assert_eq!(dst[c * ldd + 3 + r], src[r * ld + 2 + c], "dst[{c}][{r}]");
            }
            assert!(
                dst[c * ldd..][..3]
                    .iter()
                    .chain(&dst[c * ldd + 19..][..5])
                    .all(|&v| v == -1.0)
            );
        }
    }

    #[test]
    #[cfg_attr(not(host_avx512), ignore = "needs AVX-512F, which this CPU lacks")]
    fn a_block_of_columns_of_a_wider_output_is_written_and_nothing_between_its_rows() {
        assert!(available());
        // Rows 7 apart for a [5, 4] result (3 columns between rows untouched), at a depth that
        // is and one that is not split into parts; overwritten and accumulated.
        for (m, n, k) in [(5, 4, 3), (5, 4, 1601)] {
            let av: Vec<f32> = (0..m * k).map(|i| ((i * 37 % 101) as f32 - 50.0) / 50.0).collect();
            let bv: Vec<f32> = (0..k * n).map(|i| ((i * 53 % 97) as f32 - 48.0) / 48.0).collect();
            let a = row_major(&av, k);
            let b = row_major(&bv, n);
            let want = naive(m, n, k, &a, &b);
            for accumulate in [false, true] {
                let ldc = 7;
                let mut c = vec![-3.0f32; (m - 1) * ldc + n + 2];
                sgemm_rows(&mut c, ldc, [m, n, k], a, b, accumulate, false);
                for (i, &v) in c.iter().enumerate() {
                    let (row, col) = (i / ldc, i % ldc);
                    if row < m && col < n {
                        let w = want[row * n + col] + if accumulate { -3.0 } else { 0.0 };
                        assert!(close(v, w), "k={k} c[{row}][{col}] = {v} vs {w}");
                    } else {
                        assert_eq!(v, -3.0, "k={k}: value {i} between the rows was written");
                    }
                }
            }
        }
    }

    #[test]
    #[cfg_attr(not(host_avx512), ignore = "needs AVX-512F, which this CPU lacks")]
    fn untouched_beyond_the_output() {
        assert!(
            available(),
            "dml-kernels was built on a CPU with AVX-512F but runs on one without: rebuild it"
        );
        // A 5 × 20 product written into a longer buffer leaves the tail alone (masked stores).
        let (m, n, k) = (5, 20, 4);
        let av = vec![1.0f32; m * k];
        let bv = vec![0.5f32; k * n];
        let mut c = vec![-7.0f32; m * n + 40];
        let a = row_major(&av, k);
        let b = row_major(&bv, n);
        sgemm(&mut c, [m, n, k], a, b, false, false);
        assert!(c[..m * n].iter().all(|&v| v == 2.0));
        assert!(c[m * n..].iter().all(|&v| v == -7.0));
    }
}
