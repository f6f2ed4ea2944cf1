//! 3 × 3 convolutions of stride 1 by Winograd's minimal filtering F(m × m, 3 × 3) (Lavin &
//! Gray 2016, "Fast Algorithms for Convolutional Neural Networks", eq. 8 and section 4.2),
//! with `m` = 2 ([`f2`]) or 4 ([`f4`]).
//!
//! The output is cut into m × m tiles; tile `t` of image `b` reads the α × α input patch `d`
//! (α = m + 2) at `(m·ty − top, m·tx − left)` (zero outside the input) and is, per channel pair,
//!
//! `Y = Aᵀ [(G g Gᵀ) ⊙ (Bᵀ d B)] A`,
//!
//! α² products per tile where the direct convolution needs 9·m². Summed over the input
//! channels, every one of the α² transformed positions `e = (ξ, ν)` is one matrix product:
//!
//! * forward: `M_e [O, T] = U_e [O, C] · V_e [C, T]` with `U = G g Gᵀ` (the transformed
//!   weight), `V = Bᵀ d B` (the transformed input) and `T = B·⌈Ho/m⌉·⌈Wo/m⌉` tiles, then
//!   `Y = Aᵀ M A` per tile;
//! * backward, as the exact adjoint of those steps (so the gradients are those of the computed
//!   forward, not an approximation): `∂M = A ∂Y Aᵀ` per tile, `∂U_e = ∂M_e · V_eᵀ` and
//!   `∂g = Gᵀ ∂U G`, `∂V_e = U_eᵀ · ∂M_e` and `∂d = B ∂V Bᵀ`, summed over the overlapping
//!   patches.
//!
//! The three products of a training step shrink 2.25 times with F(2 × 2) and 4 times with
//! F(4 × 4) (less where tiles hang over the output's edge). [`route`] picks the one that
//! saves more, where the saving pays for the transforms, and [`SWITCH`] turns the route off or
//! pins it to one tile size. An algorithm is its 1-D transforms ([`Minimal`]); this module
//! applies them to the image. The transforms are vectorised along the tiles: each padded input
//! row is stored split by column phase (the column modulo m), so that the stride-m reads of a
//! row's tiles become contiguous runs, and every combination that does not move values between
//! rows runs over several whole images' tiles at once ([`RUN_TILES`]; a tile row has 1 to 14
//! tiles in ResNet-18, and loops that short are mostly overhead).
//!
//! Where few channels are summed over, a product is bound by writing its result, not by its
//! multiply-adds: there the forward products and the input gradient's run in blocks of tiles,
//! each block's transform following at once while its products are in cache ([`block_units`]).
//!
//! Layouts, with `P = α²` positions: `U` `[O, P, C]` (and, for the input gradient, the transform
//! of the transposed kernels `[C, P, O]`), `V` `[C, P, T]`, `M` `[P, O, T]` (or `[P, O, n]` for
//! a block of `n` tiles), `∂M` `[O, P, T]`, `∂U` `[P, O, C]`, `∂V` `[P, C, T]` (or `[P, C, n]`);
//! the products read them through strided [`View`]s, and only the weight gradient's `V_eᵀ` is
//! packed transposed.

mod f2;
mod f4;

use rayon::prelude::*;

use crate::layout::{swap_leading_into, with_scratch};
use crate::parity::{join_phases, split_phases};
use crate::sgemm::{self, View};
use crate::shape::Conv2dShape;
use crate::shared::{SharedOut, filled_vec};
use f2::F2;
use f4::F4;

/// The largest patch side α of the algorithms here (F(4 × 4, 3 × 3)'s), the size of the arrays
/// of runs the transforms are handed.
const MAX_ALPHA: usize = 6;

/// The values at one place of up to [`MAX_ALPHA`] runs, the unit the 1-D transforms map (the
/// entries past a transform's inputs are ignored, those past its outputs are 0): one `f32`
/// each, or a vector of 8 or 4 consecutive places.
type Point<V> = [V; MAX_ALPHA];

/// What the transforms compute with: `f32`, or `wide`'s vectors of them.
trait Lane:
    Copy
    + Default
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Neg<Output = Self>
    + std::ops::Mul<f32, Output = Self>
    + std::ops::Div<f32, Output = Self>
{
}

impl<V> Lane for V where
    V: Copy
        + Default
        + std::ops::Add<Output = V>
        + std::ops::Sub<Output = V>
        + std::ops::Neg<Output = V>
        + std::ops::Mul<f32, Output = V>
        + std::ops::Div<f32, Output = V>
{
}

/// One of Winograd's minimal filtering algorithms F(m × m, 3 × 3), given by its 1-D transforms
/// `Bᵀ` (α × α), `G` (α × 3) and `Aᵀ` (m × α), α = m + 2, each applied to one [`Point`].
///
/// [`along`] applies them place by place along runs of tiles (or channels), reading each input
/// run and writing each output run once.
trait Minimal {
    /// The output tile's side `m`.
    const M: usize;
    /// The input patch's side `α = m + 2`.
    const ALPHA: usize = Self::M + 2;
    /// `Bᵀ`, α × α row-major, in f64 (the tests check the functions against it).
    #[cfg(test)]
    const BT: &'static [f64];
    /// `G`, α × 3 row-major.
    #[cfg(test)]
    const G: &'static [f64];
    /// `Aᵀ`, m × α row-major.
    #[cfg(test)]
    const AT: &'static [f64];
    /// `Bᵀ d`, `d` α values of a patch's row (or column).
    fn input<V: Lane>(d: Point<V>) -> Point<V>;
    /// `B v` (the adjoint of [`Self::input`]), α values.
    fn input_adjoint<V: Lane>(v: Point<V>) -> Point<V>;
    /// `G g`, `g` the 3 values of a kernel's row (or column).
    fn weight<V: Lane>(g: Point<V>) -> Point<V>;
    /// `Gᵀ u` (the adjoint of [`Self::weight`]): α values to 3.
    fn weight_adjoint<V: Lane>(u: Point<V>) -> Point<V>;
    /// `Aᵀ m`: α values to m.
    fn output<V: Lane>(m: Point<V>) -> Point<V>;
    /// `A g` (the adjoint of [`Self::output`]): m values to α.
    fn output_adjoint<V: Lane>(g: Point<V>) -> Point<V>;
}

/// Which of an algorithm's six 1-D transforms [`along`] applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    Input,
    InputAdjoint,
    Weight,
    WeightAdjoint,
    Output,
    OutputAdjoint,
}

impl Step {
    /// The step of `W` on one point.
    #[inline(always)]
    fn apply<W: Minimal, V: Lane>(self, p: Point<V>) -> Point<V> {
        match self {
            Self::Input => W::input(p),
            Self::InputAdjoint => W::input_adjoint(p),
            Self::Weight => W::weight(p),
            Self::WeightAdjoint => W::weight_adjoint(p),
            Self::Output => W::output(p),
            Self::OutputAdjoint => W::output_adjoint(p),
        }
    }

    /// How many values the step reads and writes for `W`.
    #[inline(always)]
    fn arity<W: Minimal>(self) -> (usize, usize) {
        let (m, alpha) = (W::M, W::ALPHA);
        match self {
            Self::Input | Self::InputAdjoint => (alpha, alpha),
            Self::Weight => (3, alpha),
            Self::WeightAdjoint => (alpha, 3),
            Self::Output => (alpha, m),
            Self::OutputAdjoint => (m, alpha),
        }
    }
}

/// Consecutive places of a run as one value the transforms compute with: `wide`'s vectors of
/// 8 or 4, or one `f32`.
trait Block: Lane {
    /// Places per value.
    const WIDTH: usize;
    /// The first [`Self::WIDTH`] values of `run`.
    fn load(run: &[f32]) -> Self;
    /// Writes the value to the first [`Self::WIDTH`] places of `run`.
    fn store(self, run: &mut [f32]);
}

impl Block for wide::f32x8 {
    const WIDTH: usize = 8;
    #[inline(always)]
    fn load(run: &[f32]) -> Self {
        Self::new(run[..8].try_into().expect("8 values"))
    }
    #[inline(always)]
    fn store(self, run: &mut [f32]) {
        run[..8].copy_from_slice(&self.to_array());
    }
}

impl Block for wide::f32x4 {
    const WIDTH: usize = 4;
    #[inline(always)]
    fn load(run: &[f32]) -> Self {
        Self::new(run[..4].try_into().expect("4 values"))
    }
    #[inline(always)]
    fn store(self, run: &mut [f32]) {
        run[..4].copy_from_slice(&self.to_array());
    }
}

impl Block for f32 {
    const WIDTH: usize = 1;
    #[inline(always)]
    fn load(run: &[f32]) -> Self {
        run[0]
    }
    #[inline(always)]
    fn store(self, run: &mut [f32]) {
        run[0] = self;
    }
}

/// Applies `step` of `W` place by place along the runs: `outs[i][x] = step(ins[·][x])[i]`, over
/// the output runs' common length.
///
/// The places go 8 at a time, then 4, in `wide`'s vectors, and the rest one by one: explicit
/// vectors need no proof that the runs do not overlap, which the compiler could not find for
/// up to 6 inputs and 6 outputs (written as a plain loop, this did not vectorise), and the
/// short runs of ResNet-18's small maps (2 to 14 tiles) still get a vector step.
#[inline(always)]
fn along<W: Minimal>(step: Step, ins: [&[f32]; MAX_ALPHA], mut outs: [&mut [f32]; MAX_ALPHA]) {
    let (n_in, n_out) = step.arity::<W>();
    let n = outs[0].len();
    let ins: [&[f32]; MAX_ALPHA] = std::array::from_fn(|k| if k < n_in { &ins[k][..n] } else { &[][..] });
    for (i, out) in outs.iter_mut().enumerate() {
        let run = std::mem::take(out);
        *out = if i < n_out { &mut run[..n] } else { &mut run[..0] };
    }
    let (wide8, wide4) = (<wide::f32x8 as Block>::WIDTH, <wide::f32x4 as Block>::WIDTH);
    let mut x = 0;
    while x + wide8 <= n {
        along_at::<W, wide::f32x8>(step, &ins, &mut outs, x);
        x += wide8;
    }
    if x + wide4 <= n {
        along_at::<W, wide::f32x4>(step, &ins, &mut outs, x);
        x += wide4;
    }
    for x in x..n {
        along_at::<W, f32>(step, &ins, &mut outs, x);
    }
}

/// [`along`] at the places `x..x + V::WIDTH`.
#[inline(always)]
fn along_at<W: Minimal, V: Block>(step: Step, ins: &[&[f32]; MAX_ALPHA], outs: &mut [&mut [f32]; MAX_ALPHA], x: usize) {
    let (n_in, n_out) = step.arity::<W>();
    let point: Point<V> = std::array::from_fn(|k| if k < n_in { V::load(&ins[k][x..]) } else { V::default() });
    let result = step.apply::<W, V>(point);
    for (out, r) in outs.iter_mut().zip(result).take(n_out) {
        r.store(&mut out[x..]);
    }
}

/// `count` runs (`count ≤ MAX_ALPHA`), run `k` being `run(k)`, as [`along`] takes them.
#[inline(always)]
fn runs<'a>(count: usize, run: impl Fn(usize) -> &'a [f32]) -> [&'a [f32]; MAX_ALPHA] {
    std::array::from_fn(|k| if k < count { run(k) } else { &[][..] })
}

/// `count` disjoint runs of `len` values of `buf` (`count ≤ MAX_ALPHA`), run `i` starting at
/// `first + i·stride` (`stride ≥ len`), as [`along`] writes them.
#[inline(always)]
fn runs_mut(buf: &mut [f32], first: usize, stride: usize, count: usize, len: usize) -> [&mut [f32]; MAX_ALPHA] {
    let mut out: [&mut [f32]; MAX_ALPHA] = Default::default();
    let mut rest = &mut buf[first..];
    for (i, slot) in out.iter_mut().take(count).enumerate() {
        let step = if i + 1 < count { stride } else { len };
        let (run, tail) = std::mem::take(&mut rest).split_at_mut(step);
        *slot = &mut run[..len];
        rest = tail;
    }
    out
}

/// Which algorithm a 3 × 3 stride-1 convolution takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Route {
    /// F(2 × 2, 3 × 3).
    F2,
    /// F(4 × 4, 3 × 3).
    F4,
}

impl Route {
    /// The output tile's side.
    fn m(self) -> usize {
        match self {
            Self::F2 => F2::M,
            Self::F4 => F4::M,
        }
    }

    /// The input patch's side, `m + 2`.
    fn alpha(self) -> usize {
        self.m() + 2
    }

    /// How many times fewer multiply-adds the products need than the direct convolution's 9
    /// per output position and channel pair: `9·Ho·Wo / (α²·⌈Ho/m⌉·⌈Wo/m⌉)` (tiles that hang
    /// over the output's edge compute positions nobody reads).
    fn reduction(self, [ho, wo]: [usize; 2]) -> f64 {
        let (m, alpha) = (self.m(), self.alpha());
        let tiles = ho.div_ceil(m) * wo.div_ceil(m);
        9.0 * (ho * wo) as f64 / (alpha * alpha * tiles) as f64
    }
}

/// The output positions of a batch (`B·Ho·Wo`) from which F(4 × 4) is a candidate: its
/// transformed weight, 36 values per channel pair against F(2 × 2)'s 16, is a cost per channel
/// pair that the products' saving (per channel pair, times the positions) repays only over
/// enough positions (the figures on ResNet-18's layers: `docs/performance-log.md`).
///
/// F(4 × 4) only replaces F(2 × 2), never the direct route: where the direct product beat
/// F(2 × 2) it beat F(4 × 4) too.
const F4_MIN_POSITIONS: usize = 1_024;

/// The route a convolution takes, if any: a 3 × 3 kernel of stride 1 (any padding) where the
/// saving pays for the transforms.
///
/// With the products shrunk `r` times ([`Route::reduction`]) and the transforms costing a
/// fixed number of operations per position and channel, F(2 × 2) is worth it when
/// `min(C, O) · (1 − 1/r) ≥ 32`, a threshold measured on this project's backbones, where every
/// 3 × 3 stage of ResNet-18 gains and the small CNN's narrow layers lose (the figures:
/// `docs/performance-log.md`). Where F(2 × 2) pays, F(4 × 4) takes
/// over from [`F4_MIN_POSITIONS`] output positions on, if its tiles save more. [`SWITCH`] can
/// pin either algorithm (where the threshold, with its own `r`, lets it pay).
pub(crate) fn route(s: &Conv2dShape) -> Option<Route> {
    if s.kernel != [3, 3] || s.stride != [1, 1] {
        return None;
    }
    let out = s.output_size().ok().filter(|&[ho, wo]| ho > 0 && wo > 0)?;
    let narrow = s.channels.min(s.out_channels) as f64;
    let pays = |route: Route| narrow * (1.0 - 1.0 / route.reduction(out)) >= 32.0;
    match setting() {
        Setting::Off => None,
        Setting::Only(route) => pays(route).then_some(route),
        Setting::Auto => pays(Route::F2).then(|| {
            let many = s.batch * out[0] * out[1] >= F4_MIN_POSITIONS;
            if many && Route::F4.reduction(out) > Route::F2.reduction(out) {
                Route::F4
            } else {
                Route::F2
            }
        }),
    }
}

/// Whether a convolution goes through this module ([`route`] finds one).
pub(crate) fn applies(s: &Conv2dShape) -> bool {
    route(s).is_some()
}

/// The environment variable that switches the Winograd route off (`0`, `false`, `off`) for
/// results computed the direct way, e.g. to compare with another library bit for bit closer,
/// or pins it to one algorithm (`f2`, `f4`) to compare them.
pub const SWITCH: &str = "DML_WINOGRAD";

/// What [`SWITCH`] asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Setting {
    /// The direct convolution everywhere.
    Off,
    /// The algorithm that saves more, where one pays.
    Auto,
    /// This algorithm where it pays.
    Only(Route),
}

/// [`SWITCH`]'s setting, read once when the first convolution runs, so that a forward pass and
/// its backward pass always agree on the route (the kept transform means nothing to another
/// one). A value that is none of `0`/`1`, `false`/`true`, `off`/`on`, `f2`/`f4` keeps the
/// default; [`switch_warning`] says so, for a program to report.
fn setting() -> Setting {
    static SETTING: std::sync::OnceLock<Setting> = std::sync::OnceLock::new();
    *SETTING.get_or_init(|| parse_switch(std::env::var(SWITCH).ok().as_deref()).unwrap_or(Setting::Auto))
}

/// Why [`SWITCH`]'s value is ignored, naming the variable and the accepted values (`None` when it
/// is unset or valid). A program calls it once at start and shows the warning to its user.
pub fn switch_warning() -> Option<String> {
    parse_switch(std::env::var(SWITCH).ok().as_deref())
        .err()
        .map(|message| format!("{message}; the Winograd convolutions stay on"))
}

/// Whether wide 3 × 3 stride-1 convolutions take the Winograd route: yes unless [`SWITCH`] says
/// otherwise.
pub fn enabled() -> bool {
    setting() != Setting::Off
}

/// [`SWITCH`]'s value as a setting: unset is on.
fn parse_switch(value: Option<&str>) -> Result<Setting, String> {
    match value.map(|v| v.trim().to_ascii_lowercase()).as_deref() {
        None | Some("1" | "true" | "on") => Ok(Setting::Auto),
        Some("0" | "false" | "off") => Ok(Setting::Off),
        Some("f2") => Ok(Setting::Only(Route::F2)),
        Some("f4") => Ok(Setting::Only(Route::F4)),
        Some(other) => Err(format!(
            "{SWITCH}={other:?} is not one of 0, 1, false, true, off, on, f2, f4"
        )),
    }
}

/// How the output of a convolution is cut into m × m tiles.
#[derive(Clone, Copy, Debug)]
struct Tiling {
    /// `[Ho, Wo]`.
    out: [usize; 2],
    /// Tile rows and columns per image, `⌈Ho/m⌉` and `⌈Wo/m⌉`.
    th: usize,
    tw: usize,
    /// Tiles of the batch, `T = B·th·tw`.
    tiles: usize,
    /// The padded input plane every tile reads from: `m·th + 2` rows of `m·tw + 2` columns,
    /// each stored as m phases (columns `≡ 0, 1, … mod m`) of `len = tw + 1` values.
    rows: usize,
    len: usize,
}

impl Tiling {
    fn new(s: &Conv2dShape, m: usize) -> Self {
        let out = s.output_size().expect("a checked convolution shape");
        let (th, tw) = (out[0].div_ceil(m), out[1].div_ceil(m));
        Self {
            out,
            th,
            tw,
            tiles: s.batch * th * tw,
            rows: m * th + 2,
            len: tw + 1,
        }
    }
}

/// Length of the transformed input `V` `[C, α², T]` that [`forward`] writes and [`backward`]
/// reads (0 where no route applies).
pub(crate) fn transformed_len(s: &Conv2dShape) -> usize {
    match route(s) {
        None => 0,
        Some(route) => s.channels * route.alpha() * route.alpha() * Tiling::new(s, route.m()).tiles,
    }
}

/// The tiles the transforms combine at once, at least: whole images, as many as make up this
/// many tiles, so that ResNet-18's small maps (4 tiles per image at 7² and 4²) get long vector
/// loops while a large map's run (49 tiles per image at 28²) stays in L1 (the measurements:
/// `docs/performance-log.md`).
const RUN_TILES: usize = 128;

/// Whole images per run of the transforms ([`RUN_TILES`]).
fn images_per_run(t: &Tiling) -> usize {
    (RUN_TILES / (t.th * t.tw).max(1)).max(1)
}

/// `V = Bᵀ d B` for every tile and input channel, into `v` `[C, α², T]` (every entry written).
/// The columns are combined once per padded input row (a patch row is shared by the tile rows
/// whose patches overlap there, and copied to each), the rows over runs of whole images
/// ([`images_per_run`]).
fn transform_input<W: Minimal>(s: &Conv2dShape, t: &Tiling, input: &[f32], v: &mut [f32]) {
    let (m, alpha) = (W::M, W::ALPHA);
    let plane = s.height * s.width;
    let (top, left) = (s.padding[0].0, s.padding[1].0);
    let (tw, len, tiles) = (t.tw, t.len, t.tiles);
    let per_image = t.th * tw;
    let group = images_per_run(t);
    v.par_chunks_mut((alpha * alpha * tiles).max(1))
        .enumerate()
        .for_each(|(c, out)| {
            // One padded row split by column phase; its padding columns are never written, so
            // stay 0.
            let mut padded = vec![0.0f32; m * len];
            // One padded row's column combinations, [ν][tile column].
            let mut row = vec![0.0f32; alpha * tw];
            // The column combinations ν of patch row k of the run's tiles, `[ν][k][tile]`, so
            // that each (ν, k) is one run. The patch rows that are padding are never written,
            // so stay 0 (zeroed again for a shorter last run, whose layout differs).
            let mut columns = vec![0.0f32; alpha * alpha * group * per_image];
            for images in spans(s.batch, group) {
                let (b0, n) = (images.start, images.len() * per_image);
                if images.len() < group {
                    columns.fill(0.0);
                }
                for b in images {
                    let src = &input[(b * s.channels + c) * plane..][..plane];
                    for iy in 0..s.height {
                        split_phases(&src[iy * s.width..][..s.width], left, m, len, &mut padded);
                        // Column l of tile tx's patch is entry tx + l/m of phase l % m.
                        let d = runs(alpha, |l| &padded[(l % m) * len + l / m..][..tw]);
                        along::<W>(Step::Input, d, runs_mut(&mut row, 0, tw, alpha, tw));
                        // Padded row r is patch row r − m·ty of the tile rows ty it reaches.
                        let r = iy + top;
                        let lowest = (r + 1).saturating_sub(alpha).div_ceil(m);
                        for ty in lowest..=(r / m).min(t.th - 1) {
                            let k = r - m * ty;
                            let at = (b - b0) * per_image + ty * tw;
                            for nu in 0..alpha {
                                columns[(nu * alpha + k) * n + at..][..tw].copy_from_slice(&row[nu * tw..][..tw]);
                            }
                        }
                    }
                }
                let first = b0 * per_image;
                for nu in 0..alpha {
                    let d = runs(alpha, |k| &columns[(nu * alpha + k) * n..][..n]);
                    along::<W>(
                        Step::Input,
                        d,
                        runs_mut(out, nu * tiles + first, alpha * tiles, alpha, n),
                    );
                }
            }
        });
}

/// `U = G g Gᵀ` for every output and input channel, `[O, α², C]`. Each output channel's
/// kernels are first laid out as 9 rows of `C`, so that the combinations run along the input
/// channels.
fn transform_weight<W: Minimal>(s: &Conv2dShape, weight: &[f32], u: &mut [f32]) {
    let (c, alpha) = (s.channels, W::ALPHA);
    let positions = alpha * alpha;
    u[..s.out_channels * positions * c]
        .par_chunks_mut((positions * c).max(1))
        .enumerate()
        // The work buffers are every value written before read, so they are allocated (and
        // zeroed) once per task, not per output channel: zeroing them per channel, with the
        // weight gradient's, was about 1 % of a ResNet-18 step (memset in its profile).
        .for_each_init(
            || (vec![0.0f32; 9 * c], vec![0.0f32; alpha * 3 * c]),
            |(g, h), (oi, out)| {
                for (ci, kernel) in weight[oi * c * 9..][..c * 9].chunks_exact(9).enumerate() {
                    for (k, &value) in kernel.iter().enumerate() {
                        g[k * c + ci] = value;
                    }
                }
                // G along the kernel's rows: h[ξ][j] for j the kernel column, rows of C.
                for j in 0..3 {
                    let gk = runs(3, |i| &g[(3 * i + j) * c..][..c]);
                    along::<W>(Step::Weight, gk, runs_mut(h, j * c, 3 * c, alpha, c));
                }
                // Then along its columns.
                for xi in 0..alpha {
                    let hj = runs(3, |j| &h[(3 * xi + j) * c..][..c]);
                    along::<W>(Step::Weight, hj, runs_mut(out, xi * alpha * c, c, alpha, c));
                }
            },
        );
}

/// The α² products `out_e [m, n] = a_e · b_e` into `out` `[α², m, n]`, each on one thread:
/// with `parallel`, the positions spread over the threads (a single position's product is often
/// too small to split, 64 × 64 × 6,272 in ResNet-18's first stage, while 16 or 36 of them
/// balance); without, all on the calling thread (one block of [`product_output_blocks`] or
/// [`input_grad_blocks`], the blocks being what runs in parallel).
fn products<'a, 'b>(
    out: &mut [f32],
    positions: usize,
    [m, n, k]: [usize; 3],
    a: impl Fn(usize) -> View<'a> + Sync,
    b: impl Fn(usize) -> View<'b> + Sync,
    parallel: bool,
) {
    let out = &mut out[..positions * m * n];
    let product = |(e, c): (usize, &mut [f32])| sgemm::sgemm(c, [m, n, k], a(e), b(e), false, false);
    if parallel {
        out.par_chunks_mut((m * n).max(1)).enumerate().for_each(product);
    } else {
        out.chunks_mut((m * n).max(1)).enumerate().for_each(product);
    }
}

/// Position `e`'s rows of a `[rows, α², T]` buffer (`V`, `∂M`), from tile `first` on, as a
/// row-major view: the rows lie `α²·T` values apart.
fn at_position(x: &[f32], [positions, tiles]: [usize; 2], e: usize, first: usize) -> View<'_> {
    View {
        data: &x[e * tiles + first..],
        rs: positions * tiles,
        cs: 1,
    }
}

/// `0..count` cut into consecutive ranges of `size` (the last one shorter): the runs of whole
/// images the transforms combine at once, and the blocks of the blocked products.
fn spans(count: usize, size: usize) -> impl Iterator<Item = std::ops::Range<usize>> {
    assert!(size > 0, "spans of no size");
    (0..count)
        .step_by(size)
        .map(move |first| first..(first + size).min(count))
}

/// `Y = Aᵀ M A` for every tile and output channel, from `m` `[α², O, T]` into `y`
/// `[O, B·Ho·Wo]`, the channels in parallel ([`transform_output_rows`] over all tile rows).
fn transform_output<W: Minimal>(t: &Tiling, [batch, o]: [usize; 2], m: &[f32], y: &mut [f32]) {
    let [ho, wo] = t.out;
    assert!(y.len() >= o * batch * ho * wo, "transform_output: output too short");
    let out = SharedOut::new(y);
    let group = images_per_run(t);
    (0..o).into_par_iter().for_each_init(
        || OutputScratch::new::<W>(group * t.th * t.tw),
        |scratch, oi| {
            for images in spans(batch, group) {
                let rows = images.start * t.th..images.end * t.th;
                let first = rows.start * t.tw;
                // SAFETY: each task writes the rows of its own channel, which `y` holds
                // (asserted).
                unsafe {
                    transform_output_rows::<W>(t, [batch, o], rows, oi..oi + 1, (&m[first..], t.tiles), scratch, out)
                };
            }
        },
    );
}

/// The convolution of `input` `[B, C, H, W]` with `weight` `[O, C, 3, 3]`, channel-major into
/// `y` `[O, B·Ho·Wo]` (every entry written), by the shape's [`route`]; the transformed input is
/// left in `v` ([`transformed_len`] values) for [`backward`].
pub(crate) fn forward(s: &Conv2dShape, input: &[f32], weight: &[f32], y: &mut [f32], v: &mut [f32]) {
    match route(s).expect("a convolution the Winograd route applies to") {
        Route::F2 => forward_by::<F2>(s, input, weight, y, v),
        Route::F4 => forward_by::<F4>(s, input, weight, y, v),
    }
}

/// [`forward`] by the algorithm `W`, in blocks of tile rows where [`block_units`] finds some.
fn forward_by<W: Minimal>(s: &Conv2dShape, input: &[f32], weight: &[f32], y: &mut [f32], v: &mut [f32]) {
    let t = Tiling::new(s, W::M);
    let tile_bytes = W::ALPHA * W::ALPHA * s.out_channels * std::mem::size_of::<f32>();
    let rows = block_units(t.tw, s.batch * t.th, tile_bytes);
    forward_with::<W>(s, input, weight, y, v, rows);
}

/// [`forward_by`] with the products either one position at a time over every tile (`None`) or
/// in blocks of this many tile rows, each block's products followed by its output transform
/// ([`product_output_blocks`]).
fn forward_with<W: Minimal>(
    s: &Conv2dShape,
    input: &[f32],
    weight: &[f32],
    y: &mut [f32],
    v: &mut [f32],
    blocks: Option<usize>,
) {
    let t = Tiling::new(s, W::M);
    let (o, c, positions) = (s.out_channels, s.channels, W::ALPHA * W::ALPHA);
    transform_input::<W>(s, &t, input, v);
    let v: &[f32] = v;
    with_scratch(o * positions * c, |u| {
        transform_weight::<W>(s, weight, u);
        let u: &[f32] = u;
        let u_view = |e: usize| View {
            data: &u[e * c..],
            rs: positions * c,
            cs: 1,
        };
        if let Some(rows) = blocks {
            product_output_blocks::<W>(&t, [s.batch, o, c], rows, u_view, v, y);
            return;
        }
        with_scratch(positions * o * t.tiles, |m| {
            let v_view = |e: usize| at_position(v, [positions, t.tiles], e, 0);
            products(m, positions, [o, t.tiles, c], u_view, v_view, true);
            transform_output::<W>(&t, [s.batch, o], m, y);
        });
    });
}

/// The most bytes of one block's products that [`product_output_blocks`] and
/// [`input_grad_blocks`] keep in a work buffer: with the operands, about what a core's L2 holds
/// (2 MiB here), and no more, since larger blocks measured slower (the sizes tried:
/// `docs/performance-log.md`).
const BLOCK_BYTES: usize = 5 << 18;

/// How many units (tile rows, or images) of `unit_tiles` tiles each, of `units`, one block of
/// [`product_output_blocks`] or [`input_grad_blocks`] takes, or `None` where the products go one
/// position at a time over every tile; `tile_bytes` is what a block's work buffer holds per tile
/// (α² positions of the product's rows).
///
/// One position's product over every tile writes `[rows, T]` to memory, and the transform
/// after it reads that back: for few channels to sum over (as many multiply-adds per value
/// written) the traffic, not the multiply-adds, bounds the product (the rates with and without
/// blocks, from `benches/sgemm.rs`: `docs/cpu.md`). A block must span at least one
/// panel of the product ([`sgemm::PANEL_COLUMNS`] tiles) within [`BLOCK_BYTES`], else blocking
/// does not pay; of the sizes that fit (from half the largest on), the one whose last panel is
/// fullest is taken, the kernel computing whole panels.
fn block_units(unit_tiles: usize, units: usize, tile_bytes: usize) -> Option<usize> {
    let panel = sgemm::PANEL_COLUMNS;
    let most = (BLOCK_BYTES / (unit_tiles * tile_bytes).max(1)).min(units);
    if most * unit_tiles < panel || most == units {
        return None;
    }
    // The fill of the block's panels, in per mille, ties going to the larger block.
    let fill = |k: usize| k * unit_tiles * 1000 / ((k * unit_tiles).div_ceil(panel) * panel);
    (most.div_ceil(2)..=most)
        .filter(|&k| k * unit_tiles >= panel)
        .max_by_key(|&k| (fill(k), k))
}

/// `Y = Aᵀ (U_e · V_e) A` in blocks of `rows` tile rows (of the batch's `B·th`): each block's α²
/// products `M_e [O, n]` (n its tiles) go into a work buffer of the thread that runs the block
/// and its output transform reads them there, so `M` never travels to memory and back. Blocks
/// run in parallel, each product on one thread; `y` `[O, B·Ho·Wo]` is written whole.
fn product_output_blocks<'a, W: Minimal>(
    t: &Tiling,
    [batch, o, c]: [usize; 3],
    rows: usize,
    u: impl Fn(usize) -> View<'a> + Sync,
    v: &[f32],
    y: &mut [f32],
) {
    let positions = W::ALPHA * W::ALPHA;
    let tile_rows = batch * t.th;
    let [ho, wo] = t.out;
    assert!(
        y.len() >= o * batch * ho * wo,
        "product_output_blocks: output too short"
    );
    let out = SharedOut::new(y);
    let blocks: Vec<_> = spans(tile_rows, rows).collect();
    blocks.into_par_iter().for_each(|block| {
        let (first, n) = (block.start * t.tw, block.len() * t.tw);
        with_scratch(positions * o * n, |m| {
            let v_view = |e: usize| at_position(v, [positions, t.tiles], e, first);
            products(m, positions, [o, n, c], &u, v_view, false);
            let mut scratch = OutputScratch::new::<W>(n);
            // SAFETY: this block alone writes the output rows of its tile rows (in every
            // channel), and `y` holds them all (asserted).
            unsafe { transform_output_rows::<W>(t, [batch, o], block, 0..o, (m, n), &mut scratch, out) };
        });
    });
}

/// The work buffers of [`transform_output_rows`] for up to `n` tiles.
struct OutputScratch {
    /// m rows (ξ combined) of α columns, `[i][ν][tile]`.
    q: Vec<f32>,
    /// The m × m results, `[i][j][tile]`.
    r: Vec<f32>,
}

impl OutputScratch {
    fn new<W: Minimal>(n: usize) -> Self {
        Self {
            q: vec![0.0; W::M * W::ALPHA * n],
            r: vec![0.0; W::M * W::M * n],
        }
    }
}

/// `Y = Aᵀ M A` for the tile rows `rows` of the batch's `B·th` and the output channels
/// `channels` (of `O`), from `m` `[α², O, stride]` (the rows' `n` tiles first in each run of
/// `stride`) into `y` `[O, B·Ho·Wo]`; positions past the output's last row or column are
/// dropped. The combinations run over the rows' whole run of tiles at once.
///
/// # Safety
/// `y` must hold `O·B·Ho·Wo` values, of which no other thread writes the rows of these tiles in
/// these channels.
unsafe fn transform_output_rows<W: Minimal>(
    t: &Tiling,
    [batch, o]: [usize; 2],
    rows: std::ops::Range<usize>,
    channels: std::ops::Range<usize>,
    (m, stride): (&[f32], usize),
    scratch: &mut OutputScratch,
    y: SharedOut,
) {
    let (side, alpha) = (W::M, W::ALPHA);
    let [ho, wo] = t.out;
    let tw = t.tw;
    let n = rows.len() * tw;
    let OutputScratch { q, r } = scratch;
    let (q, r) = (&mut q[..side * alpha * n], &mut r[..side * side * n]);
    for oi in channels {
        let me = |e: usize| &m[(e * o + oi) * stride..][..n];
        for nu in 0..alpha {
            let column = runs(alpha, |xi| me(xi * alpha + nu));
            along::<W>(Step::Output, column, runs_mut(q, nu * n, alpha * n, side, n));
        }
        for i in 0..side {
            let qi = runs(alpha, |nu| &q[(i * alpha + nu) * n..][..n]);
            along::<W>(Step::Output, qi, runs_mut(r, i * side * n, n, side, n));
        }
        for tile_row in rows.clone() {
            let (b, ty) = (tile_row / t.th, tile_row % t.th);
            let at = (tile_row - rows.start) * tw;
            for i in 0..side {
                let row = side * ty + i;
                if row >= ho {
                    break;
                }
                // SAFETY: output row `row` of image `b` in channel `oi` lies inside `y` and
                // belongs to this tile row, which the caller leaves to this thread alone.
                let line = unsafe { std::slice::from_raw_parts_mut(y.at((oi * batch + b) * ho * wo + row * wo), wo) };
                // Column m·tx + j of the row is r[i][j][at + tx]: phase j of the row.
                join_phases(&r[i * side * n + at..], side, n, 0, line);
            }
        }
    }
}

/// `∂M = A ∂Y Aᵀ` for every tile and output channel, `[O, α², T]`, from `dy` `[O, B·Ho·Wo]`
/// (the adjoint of [`transform_output`]: the positions past the output's edge contribute
/// nothing). The combinations run over runs of whole images ([`images_per_run`]).
fn transform_output_grad<W: Minimal>(t: &Tiling, batch: usize, dy: &[f32], dm: &mut [f32]) {
    let (side, alpha) = (W::M, W::ALPHA);
    let [ho, wo] = t.out;
    let n_all = batch * ho * wo;
    let (tw, tiles) = (t.tw, t.tiles);
    let per_image = t.th * tw;
    let group = images_per_run(t);
    dm.par_chunks_mut((alpha * alpha * tiles).max(1))
        .enumerate()
        .for_each(|(oi, out)| {
            let row = &dy[oi * n_all..][..n_all];
            // The run's gradient as [i][j][tile] runs (row i of every tile, its column phase j),
            // then combined along ξ into [ξ][j][tile].
            let mut g = vec![0.0f32; side * side * group * per_image];
            let mut r = vec![0.0f32; alpha * side * group * per_image];
            for images in spans(batch, group) {
                let (b0, n) = (images.start, images.len() * per_image);
                for b in images {
                    for ty in 0..t.th {
                        for i in 0..side {
                            let y = side * ty + i;
                            let at = i * side * n + (b - b0) * per_image + ty * tw;
                            for j in 0..side {
                                g[at + j * n..][..tw].fill(0.0);
                            }
                            if y < ho {
                                split_phases(&row[b * ho * wo + y * wo..][..wo], 0, side, n, &mut g[at..]);
                            }
                        }
                    }
                }
                for j in 0..side {
                    let gi = runs(side, |i| &g[(i * side + j) * n..][..n]);
                    along::<W>(Step::OutputAdjoint, gi, runs_mut(&mut r, j * n, side * n, alpha, n));
                }
                let first = b0 * per_image;
                for xi in 0..alpha {
                    let rj = runs(side, |j| &r[(xi * side + j) * n..][..n]);
                    along::<W>(
                        Step::OutputAdjoint,
                        rj,
                        runs_mut(out, xi * alpha * tiles + first, tiles, alpha, n),
                    );
                }
            }
        });
}

/// `∂g = Gᵀ ∂U G` for every channel pair, from `du` `[α², O, C]` to `[O, C, 3, 3]` (the adjoint
/// of [`transform_weight`]), combined along the input channels and laid out as kernels at the
/// end.
fn transform_weight_grad<W: Minimal>(s: &Conv2dShape, du: &[f32]) -> Vec<f32> {
    let (o, c, alpha) = (s.out_channels, s.channels, W::ALPHA);
    let fill = |out: SharedOut| {
        // The work buffers are every value written before read: allocated once per task.
        (0..o).into_par_iter().for_each_init(
            || (vec![0.0f32; alpha * 3 * c], vec![0.0f32; 9 * c]),
            |(h, g), oi| {
                let at = |xi: usize, nu: usize| &du[((xi * alpha + nu) * o + oi) * c..][..c];
                // Along ν first: h[ξ][j], rows of C.
                for xi in 0..alpha {
                    let u = runs(alpha, |nu| at(xi, nu));
                    along::<W>(Step::WeightAdjoint, u, runs_mut(h, 3 * xi * c, c, 3, c));
                }
                // Then along ξ: g[i][j] at (3i + j), rows of C.
                for j in 0..3 {
                    let hx = runs(alpha, |xi| &h[(3 * xi + j) * c..][..c]);
                    along::<W>(Step::WeightAdjoint, hx, runs_mut(g, j * c, 3 * c, 3, c));
                }
                let kernels = (0..c * 9).map(|at| g[(at % 9) * c + at / 9]);
                // SAFETY: this task alone writes output channel oi's kernels.
                unsafe { out.write_run(oi * c * 9, kernels) };
            },
        );
    };
    // SAFETY: every task writes its output channel's C·9 values, and the tasks cover 0..O.
    let (dw, ()) = unsafe { filled_vec(o * c * 9, fill) };
    dw
}

/// `∂x = Σ_tiles B ∂V Bᵀ` placed at every tile's patch, from `dv` `[α², C, T]` to
/// `[B, C, H, W]` (the adjoint of [`transform_input`]: the overlapping patches add up).
fn transform_input_grad<W: Minimal>(s: &Conv2dShape, t: &Tiling, dv: &[f32]) -> Vec<f32> {
    let alpha = W::ALPHA;
    let per_e = s.channels * t.tiles;
    let per_image = t.th * t.tw;
    let group = images_per_run(t);
    let fill = |out: SharedOut| {
        (0..s.channels).into_par_iter().for_each(|c| {
            let mut scratch = InputGradScratch::new::<W>(s, t, group * per_image);
            for images in spans(s.batch, group) {
                let (b0, n) = (images.start, images.len() * per_image);
                let first = c * t.tiles + b0 * per_image;
                let dve = |xi: usize, nu: usize| &dv[(xi * alpha + nu) * per_e + first..][..n];
                input_grad_patches::<W>(n, dve, &mut scratch);
                for b in images {
                    // SAFETY: this task alone writes channel c's planes.
                    unsafe {
                        input_grad_plane::<W>(
                            s,
                            t,
                            &mut scratch,
                            (b - b0) * per_image,
                            out,
                            (b * s.channels + c) * s.height * s.width,
                        )
                    };
                }
            }
        });
    };
    // SAFETY: every task writes exactly the planes of its channel, whole.
    let (dx, ()) = unsafe { filled_vec(s.batch * s.channels * s.height * s.width, fill) };
    dx
}

/// The work buffers of [`input_grad_patches`] and [`input_grad_plane`] for runs of up to a
/// given number of tiles, allocated once per task.
struct InputGradScratch {
    /// The length of the run whose patches the buffers hold.
    n: usize,
    /// The ξ-combinations of the run's tiles, `[k][ν][tile]`.
    e: Vec<f32>,
    /// The patches' values, `[k][l][tile]`.
    p: Vec<f32>,
    /// One image's padded plane, each row split by column phase.
    padded: Vec<f32>,
    /// One row of the plane.
    line: Vec<f32>,
}

impl InputGradScratch {
    fn new<W: Minimal>(s: &Conv2dShape, t: &Tiling, most: usize) -> Self {
        let (alpha, n) = (W::ALPHA, most);
        Self {
            n: 0,
            e: vec![0.0; alpha * alpha * n],
            p: vec![0.0; alpha * alpha * n],
            padded: vec![0.0; t.rows * W::M * t.len],
            line: vec![0.0; s.width],
        }
    }
}

/// The patches' values `B ∂V Bᵀ` of one input channel for a run of `n` tiles (whole images),
/// into `scratch`'s `[k][l][tile]` (which then holds a run of `n`): `dve(ξ, ν)` is `∂V` at
/// position (ξ, ν) for the run's tiles. The combinations run over the whole run at once.
fn input_grad_patches<'a, W: Minimal>(
    n: usize,
    dve: impl Fn(usize, usize) -> &'a [f32],
    scratch: &mut InputGradScratch,
) {
    let alpha = W::ALPHA;
    let len = alpha * alpha * n;
    assert!(
        len <= scratch.e.len(),
        "input_grad_patches: a run of {n} tiles, longer than the scratch"
    );
    scratch.n = n;
    let (e, p) = (&mut scratch.e[..len], &mut scratch.p[..len]);
    // e[k][ν] = Σ_ξ Bᵀ[ξ][k] ∂V[ξ][ν].
    for nu in 0..alpha {
        let v = runs(alpha, |xi| dve(xi, nu));
        along::<W>(Step::InputAdjoint, v, runs_mut(e, nu * n, alpha * n, alpha, n));
    }
    // p[k][l] = Σ_ν e[k][ν] Bᵀ[ν][l].
    for k in 0..alpha {
        let ek = runs(alpha, |nu| &e[(k * alpha + nu) * n..][..n]);
        along::<W>(Step::InputAdjoint, ek, runs_mut(p, k * alpha * n, n, alpha, n));
    }
}

/// One image's plane of one input channel from the patches [`input_grad_patches`] left in
/// `scratch` (the image's tiles from `first` on in the run): the overlapping patches added up
/// and the plane's `H·W` values written from `plane` on.
///
/// # Safety
/// `out` must hold the plane, which no other thread touches meanwhile.
unsafe fn input_grad_plane<W: Minimal>(
    s: &Conv2dShape,
    t: &Tiling,
    scratch: &mut InputGradScratch,
    first: usize,
    out: SharedOut,
    plane: usize,
) {
    let (side, alpha) = (W::M, W::ALPHA);
    let (top, left) = (s.padding[0].0, s.padding[1].0);
    let (tw, len, n) = (t.tw, t.len, scratch.n);
    let row_len = side * len;
    let InputGradScratch { p, padded, line, .. } = scratch;
    // The patches overlap by two rows and columns: patch value (k, l) of tile (ty, tx) lands on
    // padded row m·ty + k, column m·tx + l, that is entry tx + l/m of the row's phase l % m.
    padded.fill(0.0);
    for ty in 0..t.th {
        for k in 0..alpha {
            let row = &mut padded[(side * ty + k) * row_len..][..row_len];
            for l in 0..alpha {
                let at = (l % side) * len + l / side;
                let values = &p[(k * alpha + l) * n + first + ty * tw..][..tw];
                for (d, &x) in row[at..][..tw].iter_mut().zip(values) {
                    *d += x;
                }
            }
        }
    }
    for iy in 0..s.height {
        join_phases(&padded[(iy + top) * row_len..][..row_len], side, len, left, line);
        // SAFETY: the plane is this caller's alone (the function's contract).
        unsafe { out.write_run(plane + iy * s.width, line.iter().copied()) };
    }
}

/// `∂x` of [`transform_input_grad`] from `∂V_e = U_eᵀ · ∂M_e` in blocks of `images` images:
/// each block's α² products `[C, n]` (n its tiles) go into a work buffer of the thread that runs
/// the block and its transform reads them there (the patches of different images never
/// overlap, so blocks of whole images write disjoint planes). `ut(e)` is `U_eᵀ` `[C, O]`, `dm`
/// is `∂M` `[O, α², T]`.
fn input_grad_blocks<'a, W: Minimal>(
    s: &Conv2dShape,
    t: &Tiling,
    images: usize,
    ut: impl Fn(usize) -> View<'a> + Sync,
    dm: &[f32],
) -> Vec<f32> {
    let (alpha, positions) = (W::ALPHA, W::ALPHA * W::ALPHA);
    let (c, o) = (s.channels, s.out_channels);
    let per_image = t.th * t.tw;
    let fill = |out: SharedOut| {
        let blocks: Vec<_> = spans(s.batch, images).collect();
        blocks.into_par_iter().for_each(|block| {
            let (b0, n) = (block.start, block.len() * per_image);
            let first = b0 * per_image;
            with_scratch(positions * c * n, |dv| {
                let dm_view = |e: usize| at_position(dm, [positions, t.tiles], e, first);
                products(dv, positions, [c, n, o], &ut, dm_view, false);
                let mut scratch = InputGradScratch::new::<W>(s, t, n);
                for ci in 0..c {
                    let dve = |xi: usize, nu: usize| &dv[((xi * alpha + nu) * c + ci) * n..][..n];
                    input_grad_patches::<W>(n, dve, &mut scratch);
                    for b in block.clone() {
                        // SAFETY: this block alone writes the planes of its images.
                        unsafe {
                            input_grad_plane::<W>(
                                s,
                                t,
                                &mut scratch,
                                (b - b0) * per_image,
                                out,
                                (b * c + ci) * s.height * s.width,
                            )
                        };
                    }
                }
            });
        });
    };
    // SAFETY: the blocks cover every image, and each writes every plane of its images whole.
    let (dx, ()) = unsafe { filled_vec(s.batch * c * s.height * s.width, fill) };
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
    wanted: [bool; 2],
) -> (Option<Vec<f32>>, Option<Vec<f32>>) {
    match route(s).expect("a convolution the Winograd route applies to") {
        Route::F2 => backward_by::<F2>(s, input, weight, dy, v, wanted),
        Route::F4 => backward_by::<F4>(s, input, weight, dy, v, wanted),
    }
}

/// [`backward`] by the algorithm `W`, the input gradient in blocks of images where
/// [`block_units`] finds some.
fn backward_by<W: Minimal>(
    s: &Conv2dShape,
    input: &[f32],
    weight: &[f32],
    dy: &[f32],
    v: Option<&[f32]>,
    wanted: [bool; 2],
) -> (Option<Vec<f32>>, Option<Vec<f32>>) {
    let t = Tiling::new(s, W::M);
    let tile_bytes = W::ALPHA * W::ALPHA * s.channels * std::mem::size_of::<f32>();
    let images = block_units(t.th * t.tw, s.batch, tile_bytes);
    backward_with::<W>(s, input, weight, dy, v, wanted, images)
}

/// [`backward_by`] with the input gradient's products either one position at a time over
/// every tile (`None`) or in blocks of this many images, each block's products followed by its
/// transform ([`input_grad_blocks`]).
fn backward_with<W: Minimal>(
    s: &Conv2dShape,
    input: &[f32],
    weight: &[f32],
    dy: &[f32],
    v: Option<&[f32]>,
    [want_input, want_weight]: [bool; 2],
    blocks: Option<usize>,
) -> (Option<Vec<f32>>, Option<Vec<f32>>) {
    let t = Tiling::new(s, W::M);
    let (o, c, tiles, positions) = (s.out_channels, s.channels, t.tiles, W::ALPHA * W::ALPHA);
    with_scratch(o * positions * tiles, |dm| {
        transform_output_grad::<W>(&t, s.batch, dy, dm);
        let dm: &[f32] = dm;
        let dm_view = |e: usize| at_position(dm, [positions, tiles], e, 0);
        let weight_grad = want_weight.then(|| {
            let from = |v: &[f32]| {
                // ∂U_e [O, C] = ∂M_e [O, T] · V_eᵀ [T, C].
                with_scratch(positions * o * c, |du| {
                    let vt_view = |e: usize| View {
                        data: &v[e * tiles..],
                        rs: 1,
                        cs: positions * tiles,
                    };
                    products(du, positions, [o, c, tiles], dm_view, vt_view, true);
                    transform_weight_grad::<W>(s, du)
                })
            };
            match v {
                Some(v) => from(v),
                None => with_scratch(c * positions * tiles, |v| {
                    transform_input::<W>(s, &t, input, v);
                    from(v)
                }),
            }
        });
        let input_grad = want_input.then(|| {
            with_scratch(c * positions * o, |ut| {
                // The transformed weight of the transposed kernels, `[C, α², O]`: `U_eᵀ`
                // row-major, which the product reads in place (gathering it from `[O, α², C]`
                // column by column made this product 1.6 times slower than the forward one at
                // 512 channels).
                with_scratch(o * c * 9, |swapped| {
                    swap_leading_into(&weight[..o * c * 9], o, c, 9, swapped);
                    let flipped = Conv2dShape {
                        channels: o,
                        out_channels: c,
                        ..*s
                    };
                    transform_weight::<W>(&flipped, swapped, ut);
                });
                let ut: &[f32] = ut;
                let ut_view = |e: usize| View {
                    data: &ut[e * o..],
                    rs: positions * o,
                    cs: 1,
                };
                if let Some(images) = blocks {
                    return input_grad_blocks::<W>(s, &t, images, ut_view, dm);
                }
                with_scratch(positions * c * tiles, |dv| {
                    // ∂V_e [C, T] = U_eᵀ [C, O] · ∂M_e [O, T].
                    products(dv, positions, [c, tiles, o], ut_view, dm_view, true);
                    transform_input_grad::<W>(s, &t, dv)
                })
            })
        });
        (input_grad, weight_grad)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shape::naive;

    fn values(n: usize, seed: usize) -> Vec<f32> {
        crate::shared::test_values(n, seed, 500.0, 400.0)
    }

    /// Every 3 × 3 stride-1 geometry from 1 × 1 to 6 × 7 inputs (odd and even output sizes, so
    /// tiles that hang over the output's edge) with no, symmetric and one-sided padding, and two
    /// larger maps.
    fn geometries() -> Vec<Conv2dShape> {
        let mut out = Vec::new();
        for (height, width) in [(1, 1), (2, 3), (3, 3), (4, 5), (6, 7), (7, 4)] {
            for padding in [[(0, 0), (0, 0)], [(1, 1), (1, 1)], [(2, 0), (0, 2)], [(2, 2), (1, 0)]] {
                let s = Conv2dShape {
                    batch: 3,
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
        // Maps large enough that a run of the transforms ([`RUN_TILES`]) holds fewer images
        // than the batch (F(2 × 2): 196 or 182 tiles per image, F(4 × 4): 49), so the
        // transforms go over several runs, the last one shorter.
        for (height, width) in [(28, 27), (26, 28)] {
            out.push(Conv2dShape {
                batch: 3,
                channels: 3,
                height,
                width,
                out_channels: 5,
                kernel: [3, 3],
                stride: [1, 1],
                padding: [(1, 1), (1, 1)],
            });
        }
        out
    }

    #[test]
    fn the_switch_reads_the_usual_spellings_and_names_itself_otherwise() {
        for (value, want) in [
            (None, Setting::Auto),
            (Some("1"), Setting::Auto),
            (Some(" On "), Setting::Auto),
            (Some("0"), Setting::Off),
            (Some("false"), Setting::Off),
            (Some("OFF"), Setting::Off),
            (Some("f2"), Setting::Only(Route::F2)),
            (Some("F4"), Setting::Only(Route::F4)),
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
        // ResNet-18's four stages at 112² (28², 14², 7², 4² maps) and ResNet-50's last at 224²:
        // F(4 × 4) saves 4 times at 28², 3.06 times at 14² and 7² (where its tiles hang over the
        // edge), F(2 × 2) 2.25 and 1.72 times; the last stage has too few output positions for
        // F(4 × 4) to repay its larger transformed weight.
        for (c, side) in [(64, 28), (128, 14), (256, 7)] {
            assert_eq!(route(&layer(c, c, side)), Some(Route::F4), "{c} channels at {side}²");
        }
        assert_eq!(route(&layer(512, 512, 4)), Some(Route::F2));
        assert_eq!(Route::F4.reduction([28, 28]), 4.0);
        assert_eq!(Route::F2.reduction([28, 28]), 2.25);
        assert!((Route::F4.reduction([7, 7]) - 9.0 * 49.0 / (36.0 * 4.0)).abs() < 1e-12);
        assert!((Route::F2.reduction([7, 7]) - 9.0 * 49.0 / (16.0 * 16.0)).abs() < 1e-12);
        // The small CNN's layers (too few channels, or 7² and 3² maps whose edge tiles waste
        // most of F(2 × 2)'s saving and too few positions for F(4 × 4)), strided and non-3 × 3
        // kernels.
        for (c, o, side) in [(3, 32, 28), (32, 64, 14), (64, 128, 7), (128, 256, 3)] {
            assert!(!applies(&layer(c, o, side)), "{c} → {o} at {side}²");
        }
        let wide = layer(256, 256, 14);
        assert!(!applies(&Conv2dShape { stride: [2, 2], ..wide }));
        assert!(!applies(&Conv2dShape { kernel: [3, 2], ..wide }));
        assert!(!applies(&Conv2dShape { kernel: [1, 1], ..wide }));
        // The transformed input is 36/144 of the unfolded one: each 4 × 4 tile keeps 36 values
        // per channel where im2col keeps 16 · 9.
        let stage = layer(64, 64, 28);
        assert_eq!(transformed_len(&stage), 64 * 36 * 32 * 7 * 7);
        assert_eq!(stage.unfolded_len(), transformed_len(&stage));
        assert_eq!(stage.depth() * 32 * 28 * 28 * 36, transformed_len(&stage) * 144);
    }

    /// The transformed input's length for the algorithm `W`, whichever route the shape takes.
    fn len<W: Minimal>(s: &Conv2dShape) -> usize {
        s.channels * W::ALPHA * W::ALPHA * Tiling::new(s, W::M).tiles
    }

    /// `T x` for the row-major `rows × cols` matrix `t`, in f64.
    fn times(t: &[f64], cols: usize, x: &[f64]) -> Vec<f64> {
        t.chunks_exact(cols)
            .map(|row| row.iter().zip(x).map(|(a, b)| a * b).sum())
            .collect()
    }

    /// `Tᵀ x`.
    fn times_transposed(t: &[f64], cols: usize, x: &[f64]) -> Vec<f64> {
        (0..cols)
            .map(|j| t.chunks_exact(cols).zip(x).map(|(row, b)| row[j] * b).sum())
            .collect()
    }

    /// Every function of `W` is the matrix it says: applied to points of distinct values, each
    /// output equals the matrix-vector product in f64, and the entries past the outputs are 0.
    fn functions_are_the_matrices<W: Minimal>() {
        let (m, alpha) = (W::M, W::ALPHA);
        assert_eq!(
            (W::BT.len(), W::G.len(), W::AT.len()),
            (alpha * alpha, alpha * 3, m * alpha)
        );
        let check = |what: &str, step: Step, want: &dyn Fn(&[f64]) -> Vec<f64>| {
            let (n_in, _) = step.arity::<W>();
            for seed in 0..4 {
                let values = values(n_in, 11 + seed);
                let mut point = [0.0f32; MAX_ALPHA];
                point[..n_in].copy_from_slice(&values);
                let got = step.apply::<W, f32>(point);
                let expected = want(&values.iter().map(|&v| v as f64).collect::<Vec<_>>());
                for (i, &g) in got.iter().enumerate() {
                    let e = expected.get(i).copied().unwrap_or(0.0);
                    assert!(
                        (g as f64 - e).abs() < 1e-5 * (1.0 + e.abs()),
                        "F({m}×{m}) {what} row {i}: {g} vs {e}"
                    );
                }
            }
        };
        check("Bᵀ", Step::Input, &|d| times(W::BT, alpha, d));
        check("B", Step::InputAdjoint, &|v| times_transposed(W::BT, alpha, v));
        check("G", Step::Weight, &|g| times(W::G, 3, g));
        check("Gᵀ", Step::WeightAdjoint, &|u| times_transposed(W::G, 3, u));
        check("Aᵀ", Step::Output, &|v| times(W::AT, alpha, v));
        check("A", Step::OutputAdjoint, &|g| times_transposed(W::AT, alpha, g));
    }

    /// The matrices compute the 1-D correlation of α inputs with a 3-tap filter, the identity
    /// behind the algorithm (Lavin & Gray eq. 5): `Aᵀ [(G g) ⊙ (Bᵀ d)] = (Σ_k d[i + k] g[k])_i`.
    fn matrices_filter<W: Minimal>() {
        let (m, alpha) = (W::M, W::ALPHA);
        let d: Vec<f64> = (0..alpha).map(|i| (i as f64 * 0.37).sin() + 0.2).collect();
        let g = [0.7, -1.3, 0.45];
        let product: Vec<f64> = times(W::G, 3, &g)
            .iter()
            .zip(times(W::BT, alpha, &d))
            .map(|(a, b)| a * b)
            .collect();
        let y = times(W::AT, alpha, &product);
        for (i, &got) in y.iter().enumerate() {
            let want: f64 = (0..3).map(|k| d[i + k] * g[k]).sum();
            assert!((got - want).abs() < 1e-12, "F({m}×{m}) output {i}: {got} vs {want}");
        }
    }

    #[test]
    fn the_algorithms_are_their_matrices_and_filter() {
        functions_are_the_matrices::<F2>();
        functions_are_the_matrices::<F4>();
        matrices_filter::<F2>();
        matrices_filter::<F4>();
    }

    #[test]
    #[cfg_attr(not(host_avx512), ignore = "needs AVX-512F, which this CPU lacks")]
    fn forward_matches_the_definition_of_the_convolution() {
        assert!(sgemm::available(), "built for AVX-512F but running without it");
        forward_matches::<F2>(1e-5);
        // F(4 × 4)'s transforms scale values by up to 8 and by G's fractions: a few times the
        // rounding error of F(2 × 2).
        forward_matches::<F4>(4e-5);
    }

    fn forward_matches<W: Minimal>(tolerance: f64) {
        for s in geometries() {
            let x = values(s.batch * s.channels * s.height * s.width, 1);
            let w = values(s.out_channels * s.channels * 9, 2);
            let want = naive(&s, &x, &w, None);
            let (o, hw) = (s.out_channels, s.out_plane());
            // Stale values in both buffers: every entry must be written.
            let run = |blocks: Option<usize>| {
                let mut y = vec![f32::NAN; o * s.batch * hw];
                let mut v = vec![f32::NAN; len::<W>(&s)];
                forward_with::<W>(&s, &x, &w, &mut y, &mut v, blocks);
                y
            };
            let y = run(None);
            for b in 0..s.batch {
                for oi in 0..o {
                    for p in 0..hw {
                        let (got, want) = (y[oi * s.batch * hw + b * hw + p], want[(b * o + oi) * hw + p]);
                        assert!(
                            (got as f64 - want).abs() < tolerance * (1.0 + want.abs()),
                            "F({m}×{m}) {s:?}: y[b {b}, o {oi}, {p}] {got} vs {want}",
                            m = W::M
                        );
                    }
                }
            }
            // In blocks of 1, 2 and 3 tile rows (a shorter last block where 2 or 3 does not
            // divide the batch's tile rows, blocks that span images) and of all of them, the
            // products sum in the same order: the same values to the bit.
            let tile_rows = s.batch * Tiling::new(&s, W::M).th;
            for rows in [1, 2, 3, tile_rows] {
                let blocked = run(Some(rows));
                let same = blocked.iter().zip(&y).all(|(p, q)| p.to_bits() == q.to_bits());
                assert!(same, "F({m}×{m}) {s:?}: blocks of {rows} tile rows", m = W::M);
            }
        }
    }

    #[test]
    #[cfg_attr(not(host_avx512), ignore = "needs AVX-512F, which this CPU lacks")]
    fn backward_is_the_adjoint_of_the_forward_with_or_without_the_kept_transform() {
        backward_is_the_adjoint::<F2>(1e-4);
        backward_is_the_adjoint::<F4>(1e-4);
    }

    fn backward_is_the_adjoint<W: Minimal>(tolerance: f64) {
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
            let mut v = vec![0.0f32; len::<W>(&s)];
            forward_by::<W>(&s, &x, &w, &mut y, &mut v);
            let (dx, dw) = backward_with::<W>(&s, &x, &w, &dy, Some(&v), [true, true], None);
            let (dx, dw) = (dx.unwrap(), dw.unwrap());
            // In blocks of 1, 2 and 4 images (2 leaves a shorter last block, 4 is one block of
            // all), the products sum in the same order: the same values to the bit.
            for images in [1, 2, 4] {
                let (blocked, _) = backward_with::<W>(&s, &x, &w, &dy, Some(&v), [true, false], Some(images));
                assert_eq!(
                    blocked.unwrap(),
                    dx,
                    "F({m}×{m}) {s:?}: blocks of {images} images",
                    m = W::M
                );
            }
            let (none_x, again) = backward_by::<W>(&s, &x, &w, &dy, None, [false, true]);
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
                    (change - predicted).abs() < tolerance * (1.0 + change.abs()),
                    "F({m}×{m}) {s:?} {what}: change {change} vs predicted {predicted}",
                    m = W::M
                );
            }
        }
    }
}
