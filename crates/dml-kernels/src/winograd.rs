//! 3 × 3 convolutions of stride 1 by Winograd's minimal filtering F(2 × 2, 3 × 3) (Lavin &
//! Gray 2016, "Fast Algorithms for Convolutional Neural Networks", eq. 8 and its matrices).
//!
//! The output is cut into 2 × 2 tiles; tile `t` of image `b` reads the 4 × 4 input patch `d`
//! at `(2·ty − top, 2·tx − left)` (zero outside the input) and is, per channel pair,
//!
//! `Y = Aᵀ [(G g Gᵀ) ⊙ (Bᵀ d B)] A`,
//!
//! 16 products per tile where the direct convolution needs 36. Summed over the input channels,
//! every one of the 16 transformed positions `e = (ξ, ν)` is one matrix product:
//!
//! * forward: `M_e [O, T] = U_e [O, C] · V_e [C, T]` with `U = G g Gᵀ` (the transformed
//!   weight), `V = Bᵀ d B` (the transformed input) and `T = B·⌈Ho/2⌉·⌈Wo/2⌉` tiles, then
//!   `Y = Aᵀ M A` per tile;
//! * backward, as the exact adjoint of those steps (so the gradients are those of the computed
//!   forward, not an approximation): `∂M = A ∂Y Aᵀ` per tile, `∂U_e = ∂M_e · V_eᵀ` and
//!   `∂g = Gᵀ ∂U G`, `∂V_e = U_eᵀ · ∂M_e` and `∂d = B ∂V Bᵀ`, summed over the overlapping
//!   patches.
//!
//! The three products of a training step shrink from `36·C·O` to `16·C·O` multiply-adds per
//! 2 × 2 tile: 2.25 times fewer (less where tiles hang over an odd output edge). [`applies`]
//! takes the route only where that saving pays for the transforms, and [`SWITCH`] turns it
//! off. The transforms are additions only, vectorised along the tiles: each padded input row
//! is stored with its even columns first and its odd columns after, so that the stride-2 reads
//! of a row's tiles become contiguous runs, and every combination that does not move values
//! between rows runs over one image's tiles at once (`th·tw` values, where a tile row has 2 to
//! 14 in ResNet-18: loops that short are mostly overhead, and combining per image made the
//! conv-BN-ReLU layers of `benches/conv.rs` about 10 % faster).
//!
//! Layouts: `U` `[O, 16, C]` (and, for the input gradient, the transform of the transposed
//! kernels `[C, 16, O]`), `V` `[C, 16, T]`, `M` `[16, O, T]`, `∂M` `[O, 16, T]`, `∂U` `[16, O, C]`,
//! `∂V` `[16, C, T]`; the products read them through strided [`View`]s, and only the weight
//! gradient's `V_eᵀ` is packed transposed.

use rayon::prelude::*;

use crate::conv::{Conv2dShape, swap_leading_into, with_scratch};
use crate::parity::{deinterleave, interleave};
use crate::sgemm::{self, View};
use crate::shared::{SharedOut, filled_vec};

/// Transformed values per tile, `(ξ, ν)` with `ξ, ν ∈ 0..4`.
const TILE: usize = 16;

/// Whether a convolution goes through this module: a 3 × 3 kernel of stride 1 (any padding)
/// where the saving pays for the transforms.
///
/// Per output position and channel pair the products shrink from 9 to `9/r` multiply-adds,
/// `r = 2.25 · Ho·Wo / (4·⌈Ho/2⌉·⌈Wo/2⌉)` (tiles that hang over an odd edge compute positions
/// nobody reads), while the transforms cost a fixed number of additions per position and
/// channel. So the route is taken when `min(C, O) · (1 − 1/r) ≥ 32`, a threshold measured on
/// this project's backbones (training steps, 2 threads): every 3 × 3 stage of ResNet-18 at 112²
/// gains (64 channels at 28², 512 at 4²: the step went from 0.69 to 0.60 s), while the small
/// CNN's 64 → 128 at 7² (`r` = 1.72) and 128 → 256 at 3² (`r` = 1.27) lost, by 3 % of its step.
pub(crate) fn applies(s: &Conv2dShape) -> bool {
    if s.kernel != [3, 3] || s.stride != [1, 1] || !enabled() {
        return false;
    }
    let Ok([ho, wo]) = s.output_size() else {
        return false;
    };
    if ho == 0 || wo == 0 {
        return false;
    }
    let covered = 4 * ho.div_ceil(2) * wo.div_ceil(2);
    let reduction = 2.25 * (ho * wo) as f64 / covered as f64;
    s.channels.min(s.out_channels) as f64 * (1.0 - 1.0 / reduction) >= 32.0
}

/// The environment variable that switches the Winograd route off (`0`, `false`, `off`) for
/// results computed the direct way, e.g. to compare with another library bit for bit closer.
pub const SWITCH: &str = "DML_WINOGRAD";

/// Whether wide 3 × 3 stride-1 convolutions take the Winograd route: yes unless [`SWITCH`] says
/// otherwise when the first convolution runs. It is read once, so that a forward pass and its
/// backward pass always agree on the route (the kept transform means nothing to the other one).
/// A value that is none of `0`/`1`, `false`/`true`, `off`/`on` keeps the default and is
/// reported on standard error, naming the variable.
pub fn enabled() -> bool {
    static ENABLED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ENABLED.get_or_init(|| {
        let value = std::env::var(SWITCH).ok();
        parse_switch(value.as_deref()).unwrap_or_else(|message| {
            eprintln!("warning: {message}; the Winograd convolutions stay on");
            true
        })
    })
}

/// [`SWITCH`]'s value as a setting: unset is on.
fn parse_switch(value: Option<&str>) -> Result<bool, String> {
    match value.map(|v| v.trim().to_ascii_lowercase()).as_deref() {
        None | Some("1" | "true" | "on") => Ok(true),
        Some("0" | "false" | "off") => Ok(false),
        Some(other) => Err(format!("{SWITCH}={other:?} is not one of 0, 1, false, true, off, on")),
    }
}

/// How the output of a convolution is cut into 2 × 2 tiles.
#[derive(Clone, Copy, Debug)]
struct Tiling {
    /// `[Ho, Wo]`.
    out: [usize; 2],
    /// Tile rows and columns per image, `⌈Ho/2⌉` and `⌈Wo/2⌉`.
    th: usize,
    tw: usize,
    /// Tiles of the batch, `T = B·th·tw`.
    tiles: usize,
    /// The padded input plane every tile reads from: `2·th + 2` rows of `2·tw + 2` columns,
    /// stored as `tw + 1` even columns followed by `tw + 1` odd ones.
    rows: usize,
    half: usize,
}

impl Tiling {
    fn new(s: &Conv2dShape) -> Self {
        let out = s.output_size().expect("a checked convolution shape");
        let (th, tw) = (out[0].div_ceil(2), out[1].div_ceil(2));
        Self {
            out,
            th,
            tw,
            tiles: s.batch * th * tw,
            rows: 2 * th + 2,
            half: tw + 1,
        }
    }

    /// Length of one padded row (both halves).
    fn row_len(&self) -> usize {
        2 * self.half
    }
}

/// Length of the transformed input `V` `[C, 16, T]` that [`forward`] writes and [`backward`]
/// reads.
pub(crate) fn transformed_len(s: &Conv2dShape) -> usize {
    s.channels * TILE * Tiling::new(s).tiles
}

/// `out[i] = f(a[i], b[i])` over the common length, written so that it vectorises.
#[inline(always)]
fn zip_into(out: &mut [f32], a: &[f32], b: &[f32], f: impl Fn(f32, f32) -> f32) {
    for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
        *o = f(x, y);
    }
}

/// `out[i] = f(a[i], b[i], c[i])`.
#[inline(always)]
fn zip3_into(out: &mut [f32], a: &[f32], b: &[f32], c: &[f32], f: impl Fn(f32, f32, f32) -> f32) {
    for (((o, &x), &y), &z) in out.iter_mut().zip(a).zip(b).zip(c) {
        *o = f(x, y, z);
    }
}

/// `V = Bᵀ d B` for every tile and input channel, into `v` `[C, 16, T]` (every entry written).
///
/// With `Bᵀ = [[1, 0, −1, 0], [0, 1, 1, 0], [0, −1, 1, 0], [0, 1, 0, −1]]`, a 4-vector `d`
/// becomes `(d₀ − d₂, d₁ + d₂, d₂ − d₁, d₁ − d₃)`; applied to the patch's columns, then rows.
/// The columns are combined once per padded input row (a patch row is shared by two tile rows),
/// the rows over the image's whole run of tiles at once.
fn transform_input(s: &Conv2dShape, t: &Tiling, input: &[f32], v: &mut [f32]) {
    let plane = s.height * s.width;
    let (top, left) = (s.padding[0].0, s.padding[1].0);
    let (tw, half, len) = (t.tw, t.half, t.row_len());
    let per_image = t.th * tw;
    // The padded rows by parity: row `r` is pair `r / 2` of parity `r % 2`.
    let pairs = t.rows / 2;
    v.par_chunks_mut((TILE * t.tiles).max(1))
        .enumerate()
        .for_each(|(c, out)| {
            // One padded row, de-interleaved; its padding columns are never written, so stay 0.
            let mut padded = vec![0.0f32; len];
            // The column combinations ν of every padded row, `[ν][parity][pair][tile column]`:
            // so that the rows `2·ty + k` of all tile rows are one run for each `k`. The rows that
            // are padding are never written, so stay 0.
            let mut columns = vec![0.0f32; 4 * 2 * pairs * tw];
            let at = |nu: usize, row: usize| ((nu * 2 + row % 2) * pairs + row / 2) * tw;
            for b in 0..s.batch {
                let src = &input[(b * s.channels + c) * plane..][..plane];
                for iy in 0..s.height {
                    let (even, odd) = padded.split_at_mut(half);
                    deinterleave(&src[iy * s.width..][..s.width], left, even, odd);
                    // Column p of a patch is even[tx + p/2] or odd[tx + p/2].
                    let (e0, e1, o0, o1) = (&even[..tw], &even[1..], &odd[..tw], &odd[1..]);
                    let row = iy + top;
                    zip_into(&mut columns[at(0, row)..][..tw], e0, e1, |a, b| a - b);
                    zip_into(&mut columns[at(1, row)..][..tw], o0, e1, |a, b| a + b);
                    zip_into(&mut columns[at(2, row)..][..tw], e1, o0, |a, b| a - b);
                    zip_into(&mut columns[at(3, row)..][..tw], o0, o1, |a, b| a - b);
                }
                let first = b * per_image;
                for nu in 0..4 {
                    // Patch row k of every tile: padded row 2·ty + k, ty = 0..th.
                    let d = |k: usize| &columns[at(nu, k % 2) + (k / 2) * tw..][..per_image];
                    let to = |xi: usize| (xi * 4 + nu) * t.tiles + first;
                    zip_into(&mut out[to(0)..][..per_image], d(0), d(2), |a, b| a - b);
                    zip_into(&mut out[to(1)..][..per_image], d(1), d(2), |a, b| a + b);
                    zip_into(&mut out[to(2)..][..per_image], d(2), d(1), |a, b| a - b);
                    zip_into(&mut out[to(3)..][..per_image], d(1), d(3), |a, b| a - b);
                }
            }
        });
}

/// `U = G g Gᵀ` for every output and input channel, `[O, 16, C]`, with
/// `G = [[1, 0, 0], [½, ½, ½], [½, −½, ½], [0, 0, 1]]`: a 3-vector `g` becomes
/// `(g₀, (g₀ + g₁ + g₂)/2, (g₀ − g₁ + g₂)/2, g₂)`. Each output channel's kernels are first laid
/// out as 9 rows of `C`, so that the combinations run along the input channels.
fn transform_weight(s: &Conv2dShape, weight: &[f32], u: &mut [f32]) {
    let c = s.channels;
    u[..s.out_channels * TILE * c]
        .par_chunks_mut((TILE * c).max(1))
        .enumerate()
        .for_each(|(oi, out)| {
            let mut g = vec![0.0f32; 9 * c];
            for (ci, kernel) in weight[oi * c * 9..][..c * 9].chunks_exact(9).enumerate() {
                for (k, &value) in kernel.iter().enumerate() {
                    g[k * c + ci] = value;
                }
            }
            // G along the kernel's rows: h[ξ][j] for j the kernel column, rows of C.
            let mut h = vec![0.0f32; 12 * c];
            for j in 0..3 {
                let gk = |i: usize| &g[(3 * i + j) * c..][..c];
                let at = |xi: usize| (3 * xi + j) * c;
                h[at(0)..][..c].copy_from_slice(gk(0));
                zip3_into(&mut h[at(1)..][..c], gk(0), gk(1), gk(2), |a, b, d| 0.5 * (a + b + d));
                zip3_into(&mut h[at(2)..][..c], gk(0), gk(1), gk(2), |a, b, d| 0.5 * (a - b + d));
                h[at(3)..][..c].copy_from_slice(gk(2));
            }
            // Then along its columns.
            for xi in 0..4 {
                let hj = |j: usize| &h[(3 * xi + j) * c..][..c];
                let at = |nu: usize| (xi * 4 + nu) * c;
                out[at(0)..][..c].copy_from_slice(hj(0));
                zip3_into(&mut out[at(1)..][..c], hj(0), hj(1), hj(2), |a, b, d| 0.5 * (a + b + d));
                zip3_into(&mut out[at(2)..][..c], hj(0), hj(1), hj(2), |a, b, d| 0.5 * (a - b + d));
                out[at(3)..][..c].copy_from_slice(hj(2));
            }
        });
}

/// The 16 products `out_e [m, n] = a_e · b_e`, one per transformed position, each on one
/// thread and the positions spread over the threads: a single position's product is often too
/// small to split (64 × 64 × 6,272 in ResNet-18's first stage), 16 of them always balance.
fn products<'a, 'b>(
    out: &mut [f32],
    [m, n, k]: [usize; 3],
    a: impl Fn(usize) -> View<'a> + Sync,
    b: impl Fn(usize) -> View<'b> + Sync,
) {
    out[..TILE * m * n]
        .par_chunks_mut((m * n).max(1))
        .enumerate()
        .for_each(|(e, c)| sgemm::sgemm(c, [m, n, k], a(e), b(e), false, false));
}

/// `Aᵀ` applied to four runs `m₀..m₃` (one per position along the transformed axis), each run
/// along the tiles of a row: `(m₀ + m₁ + m₂, m₁ − m₂ − m₃)` into `y0` and `y1`.
#[inline(always)]
fn apply_at(y0: &mut [f32], y1: &mut [f32], m: [&[f32]; 4]) {
    zip3_into(y0, m[0], m[1], m[2], |a, b, c| a + b + c);
    zip3_into(y1, m[1], m[2], m[3], |a, b, c| a - b - c);
}

/// `A` applied to two runs `g₀, g₁` along the tiles of a row (the adjoint of [`apply_at`]):
/// `(g₀, g₀ + g₁, g₀ − g₁, −g₁)` into `dst` at the four offsets `at(0..4)`, `tw` values each.
#[inline(always)]
fn apply_a(dst: &mut [f32], at: impl Fn(usize) -> usize, tw: usize, [g0, g1]: [&[f32]; 2]) {
    dst[at(0)..][..tw].copy_from_slice(g0);
    zip_into(&mut dst[at(1)..][..tw], g0, g1, |p, q| p + q);
    zip_into(&mut dst[at(2)..][..tw], g0, g1, |p, q| p - q);
    dst[at(3)..][..tw].iter_mut().zip(g1).for_each(|(o, &q)| *o = -q);
}

/// `Y = Aᵀ M A` for every tile and output channel, written to `y` `[O, B·Ho·Wo]`, with
/// `Aᵀ = [[1, 1, 1, 0], [0, 1, −1, −1]]`: a 4-vector `m` becomes `(m₀ + m₁ + m₂, m₁ − m₂ − m₃)`.
/// Positions past the output's last row or column (odd `Ho` or `Wo`) are dropped.
fn transform_output(t: &Tiling, [batch, o]: [usize; 2], m: &[f32], y: &mut [f32]) {
    let [ho, wo] = t.out;
    let n = batch * ho * wo;
    // `M_e` is `[O, T]`; `y` holds `O` rows of `n`.
    let (tw, per_e) = (t.tw, o * t.tiles);
    let per_image = t.th * tw;
    y[..o * n].par_chunks_mut(n.max(1)).enumerate().for_each(|(oi, out)| {
        // Two rows (ξ combined) of four columns, [i][ν][tile], then the 2 × 2 results [i][j][tile].
        let mut q = vec![0.0f32; 8 * per_image];
        let mut r = vec![0.0f32; 4 * per_image];
        for b in 0..batch {
            let first = b * per_image;
            let me = |e: usize| &m[e * per_e + oi * t.tiles + first..][..per_image];
            for nu in 0..4 {
                let (q0, q1) = q.split_at_mut(4 * per_image);
                let column = [me(nu), me(4 + nu), me(8 + nu), me(12 + nu)];
                apply_at(
                    &mut q0[nu * per_image..][..per_image],
                    &mut q1[nu * per_image..][..per_image],
                    column,
                );
            }
            for i in 0..2 {
                let qi = &q[i * 4 * per_image..][..4 * per_image];
                let (r0, r1) = r[2 * i * per_image..][..2 * per_image].split_at_mut(per_image);
                apply_at(r0, r1, std::array::from_fn(|nu| &qi[nu * per_image..][..per_image]));
            }
            for ty in 0..t.th {
                for i in 0..2 {
                    let row = 2 * ty + i;
                    if row >= ho {
                        break;
                    }
                    let line = &mut out[b * ho * wo + row * wo..][..wo];
                    let rij = |j: usize| &r[(2 * i + j) * per_image + ty * tw..][..tw];
                    interleave(rij(0), rij(1), 0, line);
                }
            }
        }
    });
}

/// The convolution of `input` `[B, C, H, W]` with `weight` `[O, C, 3, 3]`, channel-major into
/// `y` `[O, B·Ho·Wo]` (every entry written); the transformed input is left in `v`
/// ([`transformed_len`] values) for [`backward`].
pub(crate) fn forward(s: &Conv2dShape, input: &[f32], weight: &[f32], y: &mut [f32], v: &mut [f32]) {
    let t = Tiling::new(s);
    let (o, c) = (s.out_channels, s.channels);
    transform_input(s, &t, input, v);
    let v: &[f32] = v;
    with_scratch(o * TILE * c, |u| {
        transform_weight(s, weight, u);
        let u: &[f32] = u;
        with_scratch(TILE * o * t.tiles, |m| {
            products(
                m,
                [o, t.tiles, c],
                |e| View {
                    data: &u[e * c..],
                    rs: TILE * c,
                    cs: 1,
                },
                |e| View {
                    data: &v[e * t.tiles..],
                    rs: TILE * t.tiles,
                    cs: 1,
                },
            );
            transform_output(&t, [s.batch, o], m, y);
        });
    });
}

/// `∂M = A ∂Y Aᵀ` for every tile and output channel, `[O, 16, T]`, from `dy` `[O, B·Ho·Wo]`
/// (the adjoint of [`transform_output`]: a 2-vector `g` becomes `(g₀, g₀ + g₁, g₀ − g₁, −g₁)`;
/// the positions past the output's edge contribute nothing).
fn transform_output_grad(t: &Tiling, batch: usize, dy: &[f32], dm: &mut [f32]) {
    let [ho, wo] = t.out;
    let n = batch * ho * wo;
    let tw = t.tw;
    let per_image = t.th * tw;
    dm.par_chunks_mut((TILE * t.tiles).max(1))
        .enumerate()
        .for_each(|(oi, out)| {
            let row = &dy[oi * n..][..n];
            // One image's gradient as [i][parity][tile] runs (row i of every tile, its even or
            // odd column), then combined along ξ.
            let mut g = vec![0.0f32; 4 * per_image];
            let mut r = vec![0.0f32; 8 * per_image];
            for b in 0..batch {
                for ty in 0..t.th {
                    for i in 0..2 {
                        let y = 2 * ty + i;
                        let (even, odd) = g[2 * i * per_image..][..2 * per_image].split_at_mut(per_image);
                        let (even, odd) = (&mut even[ty * tw..][..tw], &mut odd[ty * tw..][..tw]);
                        even.fill(0.0);
                        odd.fill(0.0);
                        if y < ho {
                            deinterleave(&row[b * ho * wo + y * wo..][..wo], 0, even, odd);
                        }
                    }
                }
                // r[ξ][parity] = Σ_i Aᵀ[i][ξ] g[i][parity].
                let gi = |i: usize, j: usize| &g[(2 * i + j) * per_image..][..per_image];
                for j in 0..2 {
                    apply_a(&mut r, |xi| (2 * xi + j) * per_image, per_image, [gi(0, j), gi(1, j)]);
                }
                let first = b * per_image;
                for xi in 0..4 {
                    let pair = [
                        &r[2 * xi * per_image..][..per_image],
                        &r[(2 * xi + 1) * per_image..][..per_image],
                    ];
                    apply_a(out, |nu| (xi * 4 + nu) * t.tiles + first, per_image, pair);
                }
            }
        });
}

/// `∂g = Gᵀ ∂U G` for every channel pair, from `du` `[16, O, C]` to `[O, C, 3, 3]` (the adjoint of
/// [`transform_weight`]: a 4-vector `u` becomes `(u₀ + (u₁ + u₂)/2, (u₁ − u₂)/2, (u₁ + u₂)/2 + u₃)`),
/// combined along the input channels and laid out as kernels at the end.
fn transform_weight_grad(s: &Conv2dShape, du: &[f32]) -> Vec<f32> {
    let (o, c) = (s.out_channels, s.channels);
    let mut dw = vec![0.0f32; o * c * 9];
    dw.par_chunks_mut((c * 9).max(1)).enumerate().for_each(|(oi, out)| {
        let at = |xi: usize, nu: usize| &du[((xi * 4 + nu) * o + oi) * c..][..c];
        let combine = |out: &mut [f32], u: [&[f32]; 4]| {
            let (first, rest) = out.split_at_mut(c);
            let (middle, last) = rest.split_at_mut(c);
            zip3_into(first, u[0], u[1], u[2], |a, b, d| a + 0.5 * (b + d));
            zip_into(middle, u[1], u[2], |b, d| 0.5 * (b - d));
            zip3_into(&mut last[..c], u[1], u[2], u[3], |b, d, e| 0.5 * (b + d) + e);
        };
        // Along ν first: h[ξ][j], rows of C.
        let mut h = vec![0.0f32; 12 * c];
        for (xi, rows) in h.chunks_exact_mut(3 * c).enumerate() {
            combine(rows, std::array::from_fn(|nu| at(xi, nu)));
        }
        // Then along ξ: g[i][j] at (3i + j), rows of C.
        let mut g = vec![0.0f32; 9 * c];
        let mut column = vec![0.0f32; 3 * c];
        for j in 0..3 {
            combine(&mut column, std::array::from_fn(|xi| &h[(3 * xi + j) * c..][..c]));
            for i in 0..3 {
                g[(3 * i + j) * c..][..c].copy_from_slice(&column[i * c..][..c]);
            }
        }
        for (ci, kernel) in out.chunks_exact_mut(9).enumerate() {
            for (k, value) in kernel.iter_mut().enumerate() {
                *value = g[k * c + ci];
            }
        }
    });
    dw
}

/// `∂x = Σ_tiles B ∂V Bᵀ` placed at every tile's patch, from `dv` `[16, C, T]` to `[B, C, H, W]`
/// (the adjoint of [`transform_input`]: a 4-vector `v` becomes
/// `(v₀, v₁ − v₂ + v₃, v₁ + v₂ − v₀, −v₃)`, and the overlapping patches add up).
fn transform_input_grad(s: &Conv2dShape, t: &Tiling, dv: &[f32]) -> Vec<f32> {
    let plane = s.height * s.width;
    let (top, left) = (s.padding[0].0, s.padding[1].0);
    let (tw, half, len) = (t.tw, t.half, t.row_len());
    let per_e = s.channels * t.tiles;
    let total = s.batch * s.channels * plane;
    let fill = |out: SharedOut| {
        (0..s.channels).into_par_iter().for_each(|c| {
            let mut padded = vec![0.0f32; t.rows * len];
            // The ξ-combinations of one image's tiles, [k][ν][tile].
            let per_image = t.th * tw;
            let mut e = vec![0.0f32; 4 * 4 * per_image];
            let mut line = vec![0.0f32; s.width];
            for b in 0..s.batch {
                let first = b * per_image;
                let dve = |xi: usize, nu: usize| &dv[(xi * 4 + nu) * per_e + c * t.tiles + first..][..per_image];
                // e[k][ν] = Σ_ξ Bᵀ[ξ][k] ∂V[ξ][ν].
                for nu in 0..4 {
                    let at = |k: usize| (k * 4 + nu) * per_image;
                    let (v0, v1, v2, v3) = (dve(0, nu), dve(1, nu), dve(2, nu), dve(3, nu));
                    e[at(0)..][..per_image].copy_from_slice(v0);
                    zip3_into(&mut e[at(1)..][..per_image], v1, v2, v3, |p, q, r| p - q + r);
                    zip3_into(&mut e[at(2)..][..per_image], v1, v2, v0, |p, q, r| p + q - r);
                    e[at(3)..][..per_image].iter_mut().zip(v3).for_each(|(o, &q)| *o = -q);
                }
                // p[k][l] = Σ_ν e[k][ν] B[l][ν], the patch's values, in place of e.
                for k in 0..4 {
                    let row = &mut e[k * 4 * per_image..][..4 * per_image];
                    let (e0, rest) = row.split_at_mut(per_image);
                    let (e1, rest) = rest.split_at_mut(per_image);
                    let (e2, e3) = rest.split_at_mut(per_image);
                    // (e₀, e₁ − e₂ + e₃, e₁ + e₂ − e₀, −e₃), e₀ last since p₂ reads it.
                    for (((&a, p1), p2), p3) in e0.iter().zip(e1.iter_mut()).zip(e2.iter_mut()).zip(e3.iter_mut()) {
                        let (b, c, d) = (*p1, *p2, *p3);
                        *p1 = b - c + d;
                        *p2 = b + c - a;
                        *p3 = -d;
                    }
                }
                // The patches overlap by two rows and columns: patch value (k, l) of tile
                // (ty, tx) lands on padded row 2·ty + k, column 2·tx + l, that is the even half's
                // entry tx + l/2 for even l, the odd half's for odd l.
                padded.fill(0.0);
                for ty in 0..t.th {
                    for k in 0..4 {
                        let pk = |l: usize| &e[(k * 4 + l) * per_image + ty * tw..][..tw];
                        let row = &mut padded[(2 * ty + k) * len..][..len];
                        for l in 0..4 {
                            let at = (l % 2) * half + l / 2;
                            for (d, &p) in row[at..][..tw].iter_mut().zip(pk(l)) {
                                *d += p;
                            }
                        }
                    }
                }
                for iy in 0..s.height {
                    let (even, odd) = padded[(iy + top) * len..][..len].split_at(half);
                    interleave(even, odd, left, &mut line);
                    // SAFETY: this task alone writes channel c's planes.
                    unsafe { out.write_run((b * s.channels + c) * plane + iy * s.width, line.iter().copied()) };
                }
            }
        });
    };
    // SAFETY: every task writes exactly the planes of its channel, each value once (the loop
    // over `iy` covers the whole plane).
    let (dx, ()) = unsafe { filled_vec(total, fill) };
    dx
}

/// The gradients of [`forward`] from `dy` `[O, B·Ho·Wo]`: `(∂input [B, C, H, W], ∂weight
/// [O, C, 3, 3])`, each when asked for. `v` is the transformed input [`forward`] left, when it
/// was kept (else the input is transformed again, if the weight gradient needs it).
pub(crate) fn backward(
    s: &Conv2dShape,
    input: &[f32],
    weight: &[f32],
    dy: &[f32],
    v: Option<&[f32]>,
    [want_input, want_weight]: [bool; 2],
) -> (Option<Vec<f32>>, Option<Vec<f32>>) {
    let t = Tiling::new(s);
    let (o, c, tiles) = (s.out_channels, s.channels, t.tiles);
    with_scratch(o * TILE * tiles, |dm| {
        transform_output_grad(&t, s.batch, dy, dm);
        let dm: &[f32] = dm;
        let dm_view = |e: usize| View {
            data: &dm[e * tiles..],
            rs: TILE * tiles,
            cs: 1,
        };
        let weight_grad = want_weight.then(|| {
            let from = |v: &[f32]| {
                // ∂U_e [O, C] = ∂M_e [O, T] · V_eᵀ [T, C].
                with_scratch(TILE * o * c, |du| {
                    products(du, [o, c, tiles], dm_view, |e| View {
                        data: &v[e * tiles..],
                        rs: 1,
                        cs: TILE * tiles,
                    });
                    transform_weight_grad(s, du)
                })
            };
            match v {
                Some(v) => from(v),
                None => with_scratch(transformed_len(s), |v| {
                    transform_input(s, &t, input, v);
                    from(v)
                }),
            }
        });
        let input_grad = want_input.then(|| {
            with_scratch(c * TILE * o, |ut| {
                // The transformed weight of the transposed kernels, `[C, 16, O]`: `U_eᵀ` row-major,
                // which the product reads in place (gathering it from `[O, 16, C]` column by
                // column made this product 1.6 times slower than the forward one at 512 channels).
                with_scratch(o * c * 9, |swapped| {
                    swap_leading_into(&weight[..o * c * 9], o, c, 9, swapped);
                    let flipped = Conv2dShape {
                        channels: o,
                        out_channels: c,
                        ..*s
                    };
                    transform_weight(&flipped, swapped, ut);
                });
                let ut: &[f32] = ut;
                with_scratch(TILE * c * tiles, |dv| {
                    // ∂V_e [C, T] = U_eᵀ [C, O] · ∂M_e [O, T].
                    products(
                        dv,
                        [c, tiles, o],
                        |e| View {
                            data: &ut[e * o..],
                            rs: TILE * o,
                            cs: 1,
                        },
                        dm_view,
                    );
                    transform_input_grad(s, &t, dv)
                })
            })
        });
        (input_grad, weight_grad)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conv::tests::naive;

    fn values(n: usize, seed: usize) -> Vec<f32> {
        crate::shared::test_values(n, seed, 500.0, 400.0)
    }

    /// Every 3 × 3 stride-1 geometry from 1 × 1 to 6 × 7 inputs (odd and even output sizes, so
    /// tiles that hang over the output's edge) with no, symmetric and one-sided padding.
    fn geometries() -> Vec<Conv2dShape> {
        let mut out = Vec::new();
        for (height, width) in [(1, 1), (2, 3), (3, 3), (4, 5), (6, 7), (7, 4)] {
            for padding in [[(0, 0), (0, 0)], [(1, 1), (1, 1)], [(2, 0), (0, 2)], [(2, 2), (1, 0)]] {
                let s = Conv2dShape {
                    batch: 2,
                    channels: 3,
                    height,
                    width,
                    out_channels: 5,
                    kernel: [3, 3],
                    stride: [1, 1],
                    padding,
                };
                if s.output_size().is_ok() {
                    out.push(s);
                }
            }
        }
        out
    }

    #[test]
    fn the_switch_reads_the_usual_spellings_and_names_itself_otherwise() {
        for (value, want) in [
            (None, true),
            (Some("1"), true),
            (Some(" On "), true),
            (Some("0"), false),
            (Some("false"), false),
            (Some("OFF"), false),
        ] {
            assert_eq!(parse_switch(value), Ok(want), "{value:?}");
        }
        let error = parse_switch(Some("no")).unwrap_err();
        assert!(error.contains("DML_WINOGRAD") && error.contains("\"no\""), "{error}");
    }

    #[test]
    fn wide_three_by_three_kernels_of_stride_one_take_this_route() {
        let layer = |channels, out_channels, side| Conv2dShape {
            batch: 32,
            channels,
            height: side,
            width: side,
            out_channels,
            kernel: [3, 3],
            stride: [1, 1],
            padding: [(1, 1), (1, 1)],
        };
        // ResNet-18's four stages at 112² (28², 14², 7², 4² maps) and ResNet-50's last at 224².
        for (c, side) in [(64, 28), (128, 14), (256, 7), (512, 4), (512, 7)] {
            assert!(applies(&layer(c, c, side)), "{c} channels at {side}²");
        }
        // The small CNN's layers (too few channels, or 7² and 3² maps whose edge tiles waste
        // most of the saving), strided and non-3 × 3 kernels.
        for (c, o, side) in [(3, 32, 28), (32, 64, 14), (64, 128, 7), (128, 256, 3)] {
            assert!(!applies(&layer(c, o, side)), "{c} → {o} at {side}²");
        }
        let wide = layer(256, 256, 14);
        assert!(!applies(&Conv2dShape { stride: [2, 2], ..wide }));
        assert!(!applies(&Conv2dShape { kernel: [3, 2], ..wide }));
        assert!(!applies(&Conv2dShape { kernel: [1, 1], ..wide }));
        // The transformed input is 16/36 of the unfolded one: each 2 × 2 tile keeps 16 values
        // per channel where im2col keeps 4 · 9.
        let stage = layer(64, 64, 28);
        assert_eq!(transformed_len(&stage), 64 * 16 * 32 * 14 * 14);
        assert_eq!(stage.unfolded_len(), transformed_len(&stage));
        assert_eq!(stage.depth() * 32 * 28 * 28 * 16, transformed_len(&stage) * 36);
    }

    #[test]
    #[cfg_attr(not(host_avx512), ignore = "needs AVX-512F, which this CPU lacks")]
    fn forward_matches_the_definition_of_the_convolution() {
        assert!(sgemm::available(), "built for AVX-512F but running without it");
        for s in geometries() {
            let x = values(s.batch * s.channels * s.height * s.width, 1);
            let w = values(s.out_channels * s.channels * 9, 2);
            let want = naive(&s, &x, &w, None);
            let (o, hw) = (s.out_channels, s.out_plane());
            // Stale values in both buffers: every entry must be written.
            let mut y = vec![f32::NAN; o * s.batch * hw];
            let mut v = vec![f32::NAN; transformed_len(&s)];
            forward(&s, &x, &w, &mut y, &mut v);
            for b in 0..s.batch {
                for oi in 0..o {
                    for p in 0..hw {
                        let (got, want) = (y[oi * s.batch * hw + b * hw + p], want[(b * o + oi) * hw + p]);
                        assert!(
                            (got as f64 - want).abs() < 1e-5 * (1.0 + want.abs()),
                            "{s:?}: y[b {b}, o {oi}, {p}] {got} vs {want}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    #[cfg_attr(not(host_avx512), ignore = "needs AVX-512F, which this CPU lacks")]
    fn backward_is_the_adjoint_of_the_forward_with_or_without_the_kept_transform() {
        // L = <g, conv(x, w)> is bilinear, so <∂L/∂x, δx> = L(x + δx) − L(x) exactly, and
        // likewise for w; the reference L is the direct definition in f64.
        for s in geometries() {
            let (nx, nw) = (
                s.batch * s.channels * s.height * s.width,
                s.out_channels * s.channels * 9,
            );
            let (x, w) = (values(nx, 3), values(nw, 4));
            let (o, hw) = (s.out_channels, s.out_plane());
            let g = values(s.batch * o * hw, 5);
            // g in the channel-major layout `backward` reads.
            let mut dy = vec![0.0f32; g.len()];
            for b in 0..s.batch {
                for oi in 0..o {
                    dy[oi * s.batch * hw + b * hw..][..hw].copy_from_slice(&g[(b * o + oi) * hw..][..hw]);
                }
            }
            let mut y = vec![0.0f32; g.len()];
            let mut v = vec![0.0f32; transformed_len(&s)];
            forward(&s, &x, &w, &mut y, &mut v);
            let (dx, dw) = backward(&s, &x, &w, &dy, Some(&v), [true, true]);
            let (dx, dw) = (dx.unwrap(), dw.unwrap());
            let (none_x, again) = backward(&s, &x, &w, &dy, None, [false, true]);
            assert!(none_x.is_none());
            assert_eq!(again.unwrap(), dw, "{s:?}: transformed again, the same weight gradient");
            let loss = |x: &[f32], w: &[f32]| -> f64 {
                naive(&s, x, w, None).iter().zip(&g).map(|(y, gg)| y * *gg as f64).sum()
            };
            let base = loss(&x, &w);
            let shifted = |v: &[f32], d: &[f32]| -> Vec<f32> { v.iter().zip(d).map(|(a, b)| a + b).collect() };
            let dot = |a: &[f32], b: &[f32]| -> f64 { a.iter().zip(b).map(|(p, q)| *p as f64 * *q as f64).sum() };
            let (ddx, ddw) = (values(nx, 6), values(nw, 7));
            for (what, change, predicted) in [
                ("input", loss(&shifted(&x, &ddx), &w) - base, dot(&dx, &ddx)),
                ("weight", loss(&x, &shifted(&w, &ddw)) - base, dot(&dw, &ddw)),
            ] {
                assert!(
                    (change - predicted).abs() < 1e-4 * (1.0 + change.abs()),
                    "{s:?} {what}: change {change} vs predicted {predicted}"
                );
            }
        }
    }
}
