//! 2-D convolution on the host (NCHW, `f32`) as one matrix product per pass.
//!
//! With `K = C·kh·kw` and `N = B·Ho·Wo`, the input is unfolded into columns `X̃ [K, N]` (im2col,
//! the whole batch at once, so that even the 3 × 3 maps of the last stage give wide products)
//! and
//!
//! * forward: `Y [O, N] = W [O, K] · X̃`,
//! * weight gradient: `∂W = ∂Y [O, N] · X̃ᵀ`,
//! * input gradient: `∂X̃ = Wᵀ · ∂Y`, folded back onto the input (col2im, a sum over the
//!   positions each input pixel was copied to),
//! * bias gradient: `∂b_o = Σ_n ∂Y[o, n]`.
//!
//! Every product goes through [`crate::sgemm`]; the unfolding, folding and layout changes are
//! parallel over channels. 3 × 3 convolutions of stride 1 with enough channels for it to pay
//! take another route with the same interface: Winograd's F(2 × 2, 3 × 3) or, over enough output
//! positions, F(4 × 4, 3 × 3), with up to 2.25 or 4 times fewer multiply-adds (the private
//! `winograd` module); there the "unfolded input" kept for the backward pass is the transformed
//! input, `[C, α², B·⌈Ho/m⌉·⌈Wo/m⌉]` for m × m tiles, α = m + 2. The environment variable
//! `DML_WINOGRAD=0` switches that route off ([`winograd_enabled`]), `f2` or `f4` pins it to one
//! algorithm. 1 × 1 convolutions of stride 1 without padding (most of a
//! ResNet-50's) need no unfolding in their forward pass, which multiplies each image's block of
//! the input where it lies and keeps nothing; their backward pass is the im2col one, unfolding
//! (a channel-major copy) into a work buffer.

use rayon::prelude::*;

use crate::layout::{swap_leading, swap_leading_into, with_scratch};
use crate::sgemm::{self, View};
pub use crate::shape::Conv2dShape;
use crate::shared::{SharedOut, filled_vec};
use crate::winograd;
pub use crate::winograd::{
    SWITCH as WINOGRAD_SWITCH, enabled as winograd_enabled, switch_warning as winograd_switch_warning,
};

// What a forward pass keeps for its backward pass depends on the route it takes, so that length
// is decided here, where the routes are chosen (the shape itself is the leaf module `shape`,
// which the Winograd route imports too).
impl Conv2dShape {
    /// Length of the input as the products read it, which the forward pass can keep for the
    /// backward one: `K·N` unfolded values, or the Winograd transform's `C·16·T` for a 3 × 3
    /// convolution of stride 1 (about `4·C·H·W` per image instead of `9·C·H·W`).
    pub(crate) fn unfolded_len(&self) -> usize {
        if winograd::applies(self) {
            winograd::transformed_len(self)
        } else if self.pointwise() {
            // Nothing is unfolded: the products read the input where it lies.
            0
        } else {
            self.depth() * self.batch * self.out_plane()
        }
    }
}

/// Writes the input unfolded to `[K, N]` into `cols`: row `(c, i, j)`, column `(b, y, x)` holds
/// `input[b, c, y·sh + i − top, x·sw + j − left]`, or 0 in the padding. Every entry is written,
/// so `cols` may hold anything before.
fn im2col(s: &Conv2dShape, input: &[f32], cols: &mut [f32]) {
    let [ho, wo] = s.output_size().expect("a checked convolution shape");
    let [kh, kw] = s.kernel;
    let n = s.batch * ho * wo;
    let plane = s.height * s.width;
    cols.par_chunks_mut(n).enumerate().for_each(|(row, out)| {
        let (c, i, j) = (row / (kh * kw), row / kw % kh, row % kw);
        // The output rows and columns that read inside the input depend only on (i, j): every
        // image of the batch shares them, and the inner loops run without bounds tests.
        let (y_offset, x_offset) = (
            i as isize - s.padding[0].0 as isize,
            j as isize - s.padding[1].0 as isize,
        );
        let (y0, y1) = valid_range(ho, s.stride[0], y_offset, s.height);
        let (x0, x1) = valid_range(wo, s.stride[1], x_offset, s.width);
        let first_x = (x0 as isize * s.stride[1] as isize + x_offset) as usize;
        // Stride 1 with as many output as input columns (a "same" convolution): output position
        // d of the block reads input position d + shift, so the valid rows are one contiguous
        // copy, after which only the padding columns are zeroed. Copying row by row instead
        // costs a `memcpy` call per row of a few dozen values.
        let same = s.stride == [1, 1] && wo == s.width;
        let shift = y_offset * s.width as isize + x_offset;
        for b in 0..s.batch {
            let src = &input[(b * s.channels + c) * plane..][..plane];
            let dst = &mut out[b * ho * wo..][..ho * wo];
            dst[..y0 * wo].fill(0.0);
            dst[y1 * wo..].fill(0.0);
            if same {
                // The block's positions whose source lies inside the plane; the others are
                // padding columns at the block's two ends, zeroed below with the rest.
                let (start, end) = ((y0 * wo) as isize, (y1 * wo) as isize);
                let lo = start.max(-shift).min(end);
                let hi = end.min(plane as isize - shift).max(lo);
                if hi > lo {
                    let from = (lo + shift) as usize;
                    let (lo, hi) = (lo as usize, hi as usize);
                    dst[lo..hi].copy_from_slice(&src[from..from + (hi - lo)]);
                }
                for y in y0..y1 {
                    let line = &mut dst[y * wo..][..wo];
                    for v in &mut line[..x0] {
                        *v = 0.0;
                    }
                    for v in &mut line[x1..] {
                        *v = 0.0;
                    }
                }
                continue;
            }
            for y in y0..y1 {
                let iy = (y as isize * s.stride[0] as isize + y_offset) as usize;
                let src_row = &src[iy * s.width..][..s.width];
                let line = &mut dst[y * wo..][..wo];
                line[..x0].fill(0.0);
                line[x1..].fill(0.0);
                if s.stride[1] == 1 {
                    line[x0..x1].copy_from_slice(&src_row[first_x..first_x + (x1 - x0)]);
                } else {
                    let picked = src_row[first_x..].iter().step_by(s.stride[1]);
                    for (v, &e) in line[x0..x1].iter_mut().zip(picked) {
                        *v = e;
                    }
                }
            }
        }
    });
}

/// The adjoint of [`im2col`]: `∂input[b, c, y, x] = Σ` of the unfolded gradient over every
/// `(i, j)` position the pixel was copied to.
fn col2im(s: &Conv2dShape, cols: &[f32]) -> Vec<f32> {
    let [ho, wo] = s.output_size().expect("a checked convolution shape");
    let [kh, kw] = s.kernel;
    let n = s.batch * ho * wo;
    let plane = s.height * s.width;
    if s.pointwise() {
        // Every pixel was copied to one column only: folding back is reordering `[C, B, H·W]`
        // to NCHW (the sums below, with their zeroed plane per image, cost about 2 % more of a
        // ResNet-50 backward pass).
        return swap_leading(&cols[..s.channels * n], s.channels, s.batch, plane);
    }
    // Per kernel position (i, j): as in `im2col`, the in-bounds output rows and columns depend
    // only on (i, j), so they are found once.
    let taps: Vec<_> = (0..kh * kw)
        .map(|ij| {
            let y_offset = (ij / kw) as isize - s.padding[0].0 as isize;
            let x_offset = (ij % kw) as isize - s.padding[1].0 as isize;
            let (y0, y1) = valid_range(ho, s.stride[0], y_offset, s.height);
            let (x0, x1) = valid_range(wo, s.stride[1], x_offset, s.width);
            let first_x = (x0 as isize * s.stride[1] as isize + x_offset) as usize;
            (ij, y_offset, (y0, y1), (x0, x1), first_x)
        })
        .collect();
    // One task per channel, each summing one image's plane at a time in a buffer of its own and
    // writing it where it lies in NCHW: channel-major planes reordered afterwards cost one more
    // pass over the input gradient (a twentieth of a ResNet-18 step, with the other reorders).
    let fill = |out: SharedOut| {
        (0..s.channels).into_par_iter().for_each(|c| {
            let mut dst = vec![0.0f32; plane];
            for b in 0..s.batch {
                dst.fill(0.0);
                for &(ij, y_offset, (y0, y1), (x0, x1), first_x) in &taps {
                    let row = &cols[(c * kh * kw + ij) * n..][..n];
                    let src = &row[b * ho * wo..][..ho * wo];
                    for y in y0..y1 {
                        let iy = (y as isize * s.stride[0] as isize + y_offset) as usize;
                        let dst_row = &mut dst[iy * s.width..][..s.width];
                        let line = &src[y * wo + x0..y * wo + x1];
                        if s.stride[1] == 1 {
                            for (d, &g) in dst_row[first_x..first_x + (x1 - x0)].iter_mut().zip(line) {
                                *d += g;
                            }
                        } else {
                            let picked = dst_row[first_x..].iter_mut().step_by(s.stride[1]);
                            for (d, &g) in picked.zip(line) {
                                *d += g;
                            }
                        }
                    }
                }
                // SAFETY: plane (b, c) is written by channel c's task alone.
                unsafe { out.write_run((b * s.channels + c) * plane, dst.iter().copied()) };
            }
        });
    };
    // SAFETY: every task writes all `batch` planes of its channel, each whole, and the channels
    // cover the buffer.
    let (dx, ()) = unsafe { filled_vec(s.batch * s.channels * plane, fill) };
    dx
}

/// The output positions `x0..x1` (of `out_len`) whose input position `x·stride + offset` lies
/// inside `0..in_len`; the others read padding.
pub(crate) fn valid_range(out_len: usize, stride: usize, offset: isize, in_len: usize) -> (usize, usize) {
    let stride = stride as isize;
    // First x with x·stride + offset ≥ 0, and one past the last with x·stride + offset < in_len.
    let x0 = if offset >= 0 {
        0
    } else {
        (-offset + stride - 1) / stride
    };
    let last = in_len as isize - 1 - offset;
    let x1 = if last < 0 { 0 } else { last / stride + 1 };
    let x1 = (x1.max(0) as usize).min(out_len);
    ((x0 as usize).min(x1), x1)
}

/// `c [m, n] = a · b` through [`sgemm`], parallel when large.
fn product(c: &mut [f32], mnk: [usize; 3], a: View, b: View) {
    sgemm::sgemm(c, mnk, a, b, false, sgemm::worth_splitting(mnk));
}

/// Whether the host convolution can run on this CPU (it needs [`sgemm::available`]).
pub fn available() -> bool {
    sgemm::available()
}

/// The convolution of `input` `[B, C, H, W]` with `weight` `[O, C, kh, kw]` plus `bias` `[O]`:
/// the output `[B, O, Ho, Wo]`, row-major.
///
/// # Errors
/// When the geometry is invalid or a buffer does not match it.
///
/// # Panics
/// When [`available`] is false.
pub fn conv2d(s: &Conv2dShape, input: &[f32], weight: &[f32], bias: Option<&[f32]>) -> Result<Vec<f32>, String> {
    s.check(input.len(), weight.len(), None)?;
    if bias.is_some_and(|b| b.len() != s.out_channels) {
        return Err(format!(
            "convolution bias has {} values for {} output channels",
            bias.map_or(0, <[f32]>::len),
            s.out_channels
        ));
    }
    let (hw, o) = (s.out_plane(), s.out_channels);
    let mut out = with_scratch(o * s.batch * hw, |y| {
        conv2d_channel_major(s, input, weight, y, None);
        swap_leading(y, o, s.batch, hw)
    });
    // [O, B, HW] was reordered to [B, O, HW] above; the bias is added per plane.
    if let Some(bias) = bias {
        out.par_chunks_mut(hw).enumerate().for_each(|(row, plane)| {
            let b = bias[row % o];
            plane.iter_mut().for_each(|v| *v += b);
        });
    }
    Ok(out)
}

/// The convolution without bias, written channel-major: `y` `[O, B·Ho·Wo]` (every entry is
/// written). This is the layout the product yields; the fused convolution + batch norm reads it
/// as is, one contiguous row per channel. The input as the products read it
/// ([`Conv2dShape::unfolded_len`] values: unfolded, or Winograd-transformed) is written into
/// `cols` when given (for a caller that keeps it for the weight gradient), else into a work
/// buffer.
pub(crate) fn conv2d_channel_major(
    s: &Conv2dShape,
    input: &[f32],
    weight: &[f32],
    y: &mut [f32],
    cols: Option<&mut [f32]>,
) {
    let (k, o) = (s.depth(), s.out_channels);
    let n = s.batch * s.out_plane();
    let mut multiply = |cols: &mut [f32]| {
        if winograd::applies(s) {
            winograd::forward(s, input, weight, &mut y[..o * n], cols);
            return;
        }
        if s.pointwise() {
            // Image b's columns of Y, from its [C, H·W] block of the input: im2col would only
            // have copied the input to [C, B·H·W], and kept the copy through the step. The
            // backward pass takes the im2col route and makes that copy itself, for the weight
            // gradient, in a work buffer (its products image by image, without the copy, were
            // measured slower). ResNet-50's figures: `docs/performance-log.md`.
            let hw = s.out_plane();
            for b in 0..s.batch {
                let x = View {
                    data: &input[b * s.channels * hw..],
                    rs: hw,
                    cs: 1,
                };
                let w = View {
                    data: weight,
                    rs: k,
                    cs: 1,
                };
                let mnk = [o, hw, k];
                sgemm::sgemm_rows(&mut y[b * hw..], n, mnk, w, x, false, sgemm::worth_splitting(mnk));
            }
            return;
        }
        im2col(s, input, cols);
        product(
            &mut y[..o * n],
            [o, n, k],
            View {
                data: weight,
                rs: k,
                cs: 1,
            },
            View {
                data: cols,
                rs: n,
                cs: 1,
            },
        );
    };
    let len = s.unfolded_len();
    match cols {
        Some(cols) => multiply(&mut cols[..len]),
        None => with_scratch(len, multiply),
    }
}

/// The gradients of [`conv2d`] from the output gradient `grad` `[B, O, Ho, Wo]`:
/// `(∂input, ∂weight, ∂bias)`, each computed only when asked for.
pub struct Conv2dGrads {
    /// `[B, C, H, W]`.
    pub input: Option<Vec<f32>>,
    /// `[O, C, kh, kw]`.
    pub weight: Option<Vec<f32>>,
    /// `[O]`.
    pub bias: Option<Vec<f32>>,
}

/// Which gradients [`conv2d_backward`] computes.
#[derive(Clone, Copy, Debug)]
pub struct Wanted {
    /// `∂input`.
    pub input: bool,
    /// `∂weight`.
    pub weight: bool,
    /// `∂bias`.
    pub bias: bool,
}

/// The backward pass of [`conv2d`] (see the module documentation for the products).
///
/// # Errors
/// When the geometry is invalid or a buffer does not match it.
///
/// # Panics
/// When [`available`] is false.
pub fn conv2d_backward(
    s: &Conv2dShape,
    input: &[f32],
    weight: &[f32],
    grad: &[f32],
    wanted: Wanted,
) -> Result<Conv2dGrads, String> {
    s.check(input.len(), weight.len(), Some(grad.len()))?;
    // [B, O, HW] → [O, B, HW] = ∂Y as [O, N].
    let dy = swap_leading(grad, s.batch, s.out_channels, s.out_plane());
    Ok(backward_channel_major(s, input, weight, &dy, None, wanted))
}

/// [`conv2d_backward`] from the output gradient laid out channel-major, `dy` `[O, B·Ho·Wo]`,
/// and the forward pass's unfolded input ([`Conv2dShape::unfolded_len`] values) when it was
/// kept (else the input is unfolded again); the shapes must have been checked.
pub(crate) fn backward_channel_major(
    s: &Conv2dShape,
    input: &[f32],
    weight: &[f32],
    dy: &[f32],
    unfolded: Option<&[f32]>,
    wanted: Wanted,
) -> Conv2dGrads {
    let (k, o) = (s.depth(), s.out_channels);
    let n = s.batch * s.out_plane();
    let bias_grad = wanted.bias.then(|| {
        dy.par_chunks(n.max(1))
            .map(|row| row.iter().map(|&v| v as f64).sum::<f64>() as f32)
            .collect()
    });
    if winograd::applies(s) {
        let (input_grad, weight_grad) =
            winograd::backward(s, input, weight, &dy[..o * n], unfolded, [wanted.input, wanted.weight]);
        return Conv2dGrads {
            input: input_grad,
            weight: weight_grad,
            bias: bias_grad,
        };
    }
    let dy_view = View { data: dy, rs: n, cs: 1 };
    let weight_grad = wanted.weight.then(|| {
        let from_unfolded = |cols: &[f32]| {
            // ∂Wᵀ [K, O] = X̃ ∂Yᵀ rather than ∂W = ∂Y X̃ᵀ: both operands run along N, so one of
            // them must be packed transposed, and ∂Y has fewer rows (O) than X̃ (K = C·kh·kw).
            // The small [K, O] result is transposed afterwards.
            let mut dwt = vec![0.0f32; k * o];
            let cols = View {
                data: cols,
                rs: n,
                cs: 1,
            };
            product(&mut dwt, [k, o, n], cols, View { data: dy, rs: 1, cs: n });
            swap_leading(&dwt, k, o, 1)
        };
        // A pointwise convolution's forward pass keeps nothing (it reads the input in place);
        // its unfolding is the channel-major copy of the input, made here.
        match unfolded.filter(|_| !s.pointwise()) {
            Some(cols) => from_unfolded(&cols[..k * n]),
            None => with_scratch(k * n, |cols| {
                im2col(s, input, cols);
                from_unfolded(cols)
            }),
        }
    });
    let input_grad = wanted.input.then(|| {
        // Wᵀ [K, O] is laid out row-major first, so that the product reads it in place: read
        // as a transposed view it is gathered one value at a time, which made this product up to
        // 1.6 times slower than the forward one.
        with_scratch(o * k, |weight_t| {
            swap_leading_into(&weight[..o * k], o, k, 1, weight_t);
            let weight_t: &[f32] = weight_t;
            with_scratch(k * n, |dcols| {
                product(
                    dcols,
                    [k, n, o],
                    View {
                        data: weight_t,
                        rs: o,
                        cs: 1,
                    },
                    dy_view,
                );
                col2im(s, dcols)
            })
        })
    });
    Conv2dGrads {
        input: input_grad,
        weight: weight_grad,
        bias: bias_grad,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::shape::naive;

    fn values(n: usize, seed: usize) -> Vec<f32> {
        crate::shared::test_values(n, seed, 500.0, 400.0)
    }

    /// Geometries that cover every path of the unfolding: padding on either side, strides,
    /// maps smaller than the kernel, a 7 × 7 stem and a 1 × 1 projection.
    pub(crate) fn shapes() -> Vec<Conv2dShape> {
        let base = Conv2dShape {
            batch: 3,
            channels: 4,
            height: 9,
            width: 7,
            out_channels: 5,
            kernel: [3, 3],
            stride: [1, 1],
            padding: [(1, 1), (1, 1)],
        };
        vec![
            base,
            // Stride 1 without padding (fewer output than input columns: the row-by-row path).
            Conv2dShape {
                padding: [(0, 0), (0, 0)],
                ..base
            },
            // Stride 1, as many output as input columns, but padded on one side only (the block
            // copy reads from up to two columns to the left).
            Conv2dShape {
                padding: [(2, 0), (2, 0)],
                ..base
            },
            // Maps smaller than the kernel: 1 × 1 and 2 × 2 inputs of a padded 3 × 3 convolution,
            // where whole kernel rows fall into the padding.
            Conv2dShape {
                height: 1,
                width: 1,
                ..base
            },
            Conv2dShape {
                height: 2,
                width: 2,
                ..base
            },
            // Strided with asymmetric padding and a rectangular kernel.
            Conv2dShape {
                kernel: [3, 2],
                stride: [2, 3],
                padding: [(0, 2), (1, 0)],
                ..base
            },
            // A 7 × 7 stem, stride 2, padding 3, and a 1 × 1 projection.
            Conv2dShape {
                height: 16,
                width: 15,
                kernel: [7, 7],
                stride: [2, 2],
                padding: [(3, 3), (3, 3)],
                out_channels: 70,
                ..base
            },
            Conv2dShape {
                kernel: [1, 1],
                stride: [2, 2],
                padding: [(0, 0), (0, 0)],
                ..base
            },
            // Wide enough for the Winograd route (asserted), with an odd output width.
            Conv2dShape {
                batch: 2,
                channels: 96,
                height: 6,
                width: 5,
                out_channels: 96,
                ..base
            },
            // 1 × 1 of stride 1 (the pointwise route), once narrow and once wide and deep
            // enough that its products split over threads and along their depth.
            Conv2dShape {
                kernel: [1, 1],
                stride: [1, 1],
                padding: [(0, 0), (0, 0)],
                ..base
            },
            Conv2dShape {
                batch: 3,
                channels: 70,
                height: 40,
                width: 45,
                out_channels: 66,
                kernel: [1, 1],
                stride: [1, 1],
                padding: [(0, 0), (0, 0)],
            },
        ]
    }

    #[test]
    fn the_shapes_cover_every_route() {
        let routes: Vec<(bool, bool)> = shapes().iter().map(|s| (winograd::applies(s), s.pointwise())).collect();
        for route in [(true, false), (false, true), (false, false)] {
            assert!(
                routes.contains(&route),
                "no shape takes the route {route:?}: {routes:?}"
            );
        }
    }

    #[test]
    #[cfg_attr(not(host_avx512), ignore = "needs AVX-512F, which this CPU lacks")]
    fn forward_matches_the_definition() {
        assert!(
            available(),
            "dml-kernels was built on a CPU with AVX-512F but runs on one without: rebuild it"
        );
        for s in shapes() {
            let x = values(s.batch * s.channels * s.height * s.width, 1);
            let w = values(s.out_channels * s.channels * s.kernel[0] * s.kernel[1], 2);
            let bias = values(s.out_channels, 3);
            let got = conv2d(&s, &x, &w, Some(&bias)).unwrap();
            let want = naive(&s, &x, &w, Some(&bias));
            assert_eq!(got.len(), want.len());
            for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (*a as f64 - b).abs() < 1e-4 * (1.0 + b.abs()),
                    "{s:?}: y[{i}] {a} vs {b}"
                );
            }
        }
    }

    #[test]
    #[cfg_attr(not(host_avx512), ignore = "needs AVX-512F, which this CPU lacks")]
    fn backward_is_the_adjoint_of_the_forward() {
        // For L = Σ g ⊙ conv(x, w, b): ∂L/∂x, ∂L/∂w, ∂L/∂b must satisfy
        // <∂L/∂x, δx> = L(x + δx) − L(x) (linear in x), and likewise for w and b.
        assert!(
            available(),
            "dml-kernels was built on a CPU with AVX-512F but runs on one without: rebuild it"
        );
        for s in shapes() {
            let (nx, nw) = (
                s.batch * s.channels * s.height * s.width,
                s.out_channels * s.channels * s.kernel[0] * s.kernel[1],
            );
            let (x, w, bias) = (values(nx, 4), values(nw, 5), values(s.out_channels, 6));
            let g = values(s.output_len(), 7);
            let all = Wanted {
                input: true,
                weight: true,
                bias: true,
            };
            let grads = conv2d_backward(&s, &x, &w, &g, all).unwrap();
            let loss = |x: &[f32], w: &[f32], b: &[f32]| -> f64 {
                naive(&s, x, w, Some(b))
                    .iter()
                    .zip(&g)
                    .map(|(y, gg)| y * *gg as f64)
                    .sum()
            };
            let base = loss(&x, &w, &bias);
            let (dx, dw, db) = (values(nx, 8), values(nw, 9), values(s.out_channels, 10));
            let shifted = |v: &[f32], d: &[f32]| -> Vec<f32> { v.iter().zip(d).map(|(a, b)| a + b).collect() };
            let dot = |a: &[f32], b: &[f32]| -> f64 { a.iter().zip(b).map(|(p, q)| *p as f64 * *q as f64).sum() };
            for (what, change, predicted) in [
                (
                    "input",
                    loss(&shifted(&x, &dx), &w, &bias) - base,
                    dot(grads.input.as_ref().unwrap(), &dx),
                ),
                (
                    "weight",
                    loss(&x, &shifted(&w, &dw), &bias) - base,
                    dot(grads.weight.as_ref().unwrap(), &dw),
                ),
                (
                    "bias",
                    loss(&x, &w, &shifted(&bias, &db)) - base,
                    dot(grads.bias.as_ref().unwrap(), &db),
                ),
            ] {
                assert!(
                    (change - predicted).abs() < 1e-3 * (1.0 + change.abs()),
                    "{s:?} {what}: change {change} vs predicted {predicted}"
                );
            }
            // Asking for less computes less, and the same values.
            let only_w = conv2d_backward(
                &s,
                &x,
                &w,
                &g,
                Wanted {
                    input: false,
                    weight: true,
                    bias: false,
                },
            )
            .unwrap();
            assert!(only_w.input.is_none() && only_w.bias.is_none());
            assert_eq!(only_w.weight, grads.weight);
        }
    }

    #[test]
    fn valid_ranges_are_exactly_the_in_bounds_positions() {
        for out_len in 0..7 {
            for stride in 1..4 {
                for offset in -5isize..5 {
                    for in_len in 0..8 {
                        let inside: Vec<usize> = (0..out_len)
                            .filter(|&x| (0..in_len as isize).contains(&(x as isize * stride as isize + offset)))
                            .collect();
                        let (x0, x1) = valid_range(out_len, stride, offset, in_len);
                        let got: Vec<usize> = (x0..x1).collect();
                        assert_eq!(got, inside, "out {out_len} stride {stride} offset {offset} in {in_len}");
                    }
                }
            }
        }
    }

    #[test]
    fn mismatched_buffers_and_geometry_are_errors() {
        let s = shapes()[0];
        assert!(
            conv2d(&s, &[0.0; 3], &[0.0; 180], None)
                .unwrap_err()
                .contains("do not match")
        );
        let too_big = Conv2dShape {
            kernel: [12, 3],
            padding: [(0, 0), (0, 0)],
            ..s
        };
        assert!(too_big.output_size().unwrap_err().contains("axis 0"));
    }
}
