//! A convolution followed by training-mode batch norm and an optional ReLU, as one pass
//! forward and one backward (the conv-BN-ReLU block of every CNN backbone).
//!
//! Run as three separate operations, the block makes several full passes over its activation
//! that only move data: the convolution's product yields `Z [O, B·Ho·Wo]` (channel-major) and
//! reorders it to NCHW, batch norm then reads it channel by channel, ReLU reads and writes it
//! once more, and backward the output gradient is masked, normalised and reordered back to
//! channel-major for the products. Here the statistics are taken straight from the rows of
//! `Z`, the normalised and rectified output is written to NCHW in the same pass, and backward
//! the gradient through ReLU and batch norm is written channel-major, ready for the products.
//!
//! With `M = B·Ho·Wo` values per channel `c` (Ioffe & Szegedy 2015, Alg. 1 and its gradients):
//!
//! * forward: `z = W ⋆ x`, `μ = mean(z)`, `σ² = mean((z − μ)²)` (biased), `x̂ = (z − μ)/√(σ² + ε)`,
//!   `y = γ x̂ + β` and the output `max(y, 0)` with `relu` (NaN is kept, not clipped);
//! * backward from `∂out`: `∂y = ∂out ⊙ [y > 0]` with `relu`, `∂β = Σ ∂y`, `∂γ = Σ ∂y x̂`,
//!   `∂z = γ/√(σ² + ε) · (∂y − ∂β/M − x̂ ∂γ/M)`, then `∂x` and `∂W` from `∂z` as in
//!   [`crate::conv`].

use rayon::prelude::*;

use crate::conv::{Conv2dGrads, Conv2dShape, Wanted, backward_channel_major, conv2d_channel_major};
use crate::layout::with_scratch;
use crate::norm::{ChannelBackward, channel_moments, per_channel, scale_shift};
use crate::shared::Buffer;

/// The output of [`conv_bn_train`] and what its backward pass needs.
pub struct ConvBnForward {
    /// The block's output `[B, O, Ho, Wo]`.
    pub output: Vec<f32>,
    /// What [`conv_bn_train_backward`] reads.
    pub saved: ConvBnSaved,
}

/// What the forward pass of a block leaves for its backward pass.
#[derive(Debug)]
pub struct ConvBnSaved {
    /// The convolution's output `Z` before normalisation, channel-major `[O, B·Ho·Wo]`.
    pub conv: Buffer,
    /// The input as the convolution's products read it, kept for the weight gradient when it
    /// takes at most [`KEEP_UNFOLDED_BYTES`] (larger ones are unfolded again in the backward
    /// pass): unfolded, `[C·kh·kw, B·Ho·Wo]`, or, for a convolution on the Winograd route (wide
    /// 3 × 3 kernels of stride 1), its transform `[C, 16, B·⌈Ho/2⌉·⌈Wo/2⌉]` (see [`crate::conv`]).
    pub unfolded: Option<Buffer>,
    /// `μ` `[O]`.
    pub mean: Vec<f32>,
    /// `σ²` `[O]`, biased (as Burn's batch norm feeds it to the running statistics).
    pub variance: Vec<f32>,
}

/// The largest unfolded input [`conv_bn_train`] keeps for the backward pass: 64 MiB. The small
/// CNN's and ResNet-18's (112², batch 32) are all below it and are not unfolded twice, and so
/// are ResNet-50's at 224², batch 16, whose 3 × 3 convolutions keep their Winograd transform
/// (49 MiB in the first stage, where the unfolded input would take 110 MiB). Larger ones are
/// computed again in the backward pass: memory matters more there than one more pass over the
/// input.
pub const KEEP_UNFOLDED_BYTES: usize = 64 << 20;

/// The gradients of [`conv_bn_train`].
pub struct ConvBnGrads {
    /// `∂x` `[B, C, H, W]`, when asked for.
    pub input: Option<Vec<f32>>,
    /// `∂W` `[O, C, kh, kw]`, when asked for.
    pub weight: Option<Vec<f32>>,
    /// `∂γ` `[O]`.
    pub gamma: Vec<f32>,
    /// `∂β` `[O]`.
    pub beta: Vec<f32>,
}

/// The batch-norm parameters and statistics of one block, `[O]` each.
#[derive(Clone, Copy)]
pub struct BnParams<'a> {
    /// `γ`.
    pub gamma: &'a [f32],
    /// `β`.
    pub beta: &'a [f32],
    /// `ε`.
    pub epsilon: f64,
}

impl BnParams<'_> {
    fn check(&self, channels: usize, stats: &[&[f32]]) -> Result<(), String> {
        let lengths: Vec<usize> = [self.gamma, self.beta].iter().chain(stats).map(|v| v.len()).collect();
        if lengths.iter().any(|&l| l != channels) {
            return Err(format!(
                "batch norm over {channels} channels: per-channel lengths {lengths:?}"
            ));
        }
        Ok(())
    }
}

/// The rectifier with PyTorch's and Burn's treatment of NaN: it passes through.
#[inline(always)]
fn rectify(v: f32, relu: bool) -> f32 {
    if relu && v <= 0.0 { 0.0 } else { v }
}

/// Convolution of `input` `[B, C, H, W]` with `weight` `[O, C, kh, kw]` (no bias: batch norm
/// removes it), training-mode batch norm with the batch's statistics, and ReLU when `relu`.
///
/// # Errors
/// When the geometry is invalid or a buffer does not match it.
///
/// # Panics
/// When [`crate::conv::available`] is false.
pub fn conv_bn_train(
    s: &Conv2dShape,
    input: &[f32],
    weight: &[f32],
    bn: BnParams,
    relu: bool,
) -> Result<ConvBnForward, String> {
    s.check(input.len(), weight.len(), None)?;
    let (o, hw) = (s.out_channels, s.out_plane());
    bn.check(o, &[])?;
    let n = s.batch * hw;
    // Both buffers are fully written before they are read.
    let mut conv = Buffer::take(o * n);
    let len = s.unfolded_len();
    let mut unfolded = (len * 4 <= KEEP_UNFOLDED_BYTES).then(|| Buffer::take(len));
    conv2d_channel_major(s, input, weight, &mut conv, unfolded.as_deref_mut());
    let count = n.max(1) as f64;
    let z = &conv;
    let (output, mean, variance) = per_channel([s.batch, o, hw], |c| {
        let row = &z[c * n..][..n];
        let (mean, variance) = channel_moments(std::iter::once(row), count);
        let (scale, shift) = scale_shift(bn.gamma[c], bn.beta[c], mean, variance, bn.epsilon);
        // `start` is the NCHW offset of image b's plane of channel c; its values are the b-th run
        // of the channel's row of Z.
        let run = move |start: usize| {
            let b = start / (o * hw);
            row[b * hw..][..hw]
                .iter()
                .map(move |&v| rectify(v * scale + shift, relu))
        };
        ((mean, variance), run)
    });
    Ok(ConvBnForward {
        output,
        saved: ConvBnSaved {
            conv,
            unfolded,
            mean,
            variance,
        },
    })
}

/// The backward pass of [`conv_bn_train`] from the output gradient `grad` `[B, O, Ho, Wo]`,
/// given what the forward pass saved. `∂γ` and `∂β` are always computed,
/// `∂x` and `∂W` as `wanted` says (its `bias` is ignored).
///
/// # Errors
/// When the geometry is invalid or a buffer does not match it.
///
/// # Panics
/// When [`crate::conv::available`] is false.
#[allow(clippy::too_many_arguments)]
pub fn conv_bn_train_backward(
    s: &Conv2dShape,
    input: &[f32],
    weight: &[f32],
    saved: &ConvBnSaved,
    bn: BnParams,
    relu: bool,
    grad: &[f32],
    wanted: Wanted,
) -> Result<ConvBnGrads, String> {
    let (conv, mean, variance) = (&saved.conv[..], &saved.mean[..], &saved.variance[..]);
    let unfolded = saved.unfolded.as_deref();
    s.check(input.len(), weight.len(), Some(grad.len()))?;
    let (o, hw) = (s.out_channels, s.out_plane());
    bn.check(o, &[mean, variance])?;
    let n = s.batch * hw;
    if conv.len() != o * n {
        return Err(format!("convolution output of {} values for [{o}, {n}]", conv.len()));
    }
    let unfolded_len = s.unfolded_len();
    if let Some(cols) = unfolded
        && cols.len() != unfolded_len
    {
        return Err(format!(
            "unfolded input of {} values where {s:?} needs {unfolded_len}",
            cols.len()
        ));
    }
    let count = n.max(1) as f64;
    // ∂Z, channel-major, in a reused work buffer (every entry is written): each channel's row is
    // one parallel task.
    let grads = with_scratch(o * n, |dz| {
        let sums: Vec<(f32, f32)> = dz
            .par_chunks_mut(n.max(1))
            .enumerate()
            .map(|(c, out)| {
                let row = &conv[c * n..][..n];
                let (scale, shift) = scale_shift(bn.gamma[c], bn.beta[c], mean[c], variance[c], bn.epsilon);
                let mut channel = ChannelBackward::new(mean[c], variance[c], bn.epsilon);
                // First pass: ∂y (the gradient through ReLU, zero where the output was clipped) into
                // `out`, and its two sums.
                for b in 0..s.batch {
                    let g = &grad[(b * o + c) * hw..][..hw];
                    let zr = &row[b * hw..][..hw];
                    let dst = &mut out[b * hw..][..hw];
                    if relu {
                        // A select, not a branch (which output was clipped is unpredictable), so the
                        // loop vectorises.
                        for ((d, &gv), &zv) in dst.iter_mut().zip(g).zip(zr) {
                            *d = if zv * scale + shift <= 0.0 { 0.0 } else { gv };
                        }
                    } else {
                        dst.copy_from_slice(g);
                    }
                    channel.add_run(zr, dst);
                }
                // Second pass: ∂z.
                let (sums, dz) = channel.finish(bn.gamma[c], count);
                for (d, &v) in out.iter_mut().zip(row) {
                    *d = dz(v, *d);
                }
                sums
            })
            .collect();
        let (gamma_grad, beta_grad) = if n == 0 {
            (vec![0.0; o], vec![0.0; o])
        } else {
            sums.into_iter().unzip()
        };
        let Conv2dGrads { input, weight, .. } =
            backward_channel_major(s, input, weight, dz, unfolded, Wanted { bias: false, ..wanted });
        ConvBnGrads {
            input,
            weight,
            gamma: gamma_grad,
            beta: beta_grad,
        }
    });
    Ok(grads)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conv::tests::shapes;
    use crate::conv::{available, conv2d, conv2d_backward};
    use crate::norm::{batch_norm_train, batch_norm_train_backward};

    fn values(n: usize, seed: usize) -> Vec<f32> {
        crate::shared::test_values(n, seed, 450.0, 350.0)
    }

    /// Both operand gradients.
    const BOTH: Wanted = Wanted {
        input: true,
        weight: true,
        bias: false,
    };

    /// `max(v, 0)` applied to a buffer, keeping NaN.
    fn rectified(v: &[f32]) -> Vec<f32> {
        v.iter().map(|&x| rectify(x, true)).collect()
    }

    fn assert_close(got: &[f32], want: &[f32], tolerance: f32, what: &str) {
        assert_eq!(got.len(), want.len(), "{what}: lengths");
        let scale = want.iter().fold(0.0f32, |m, v| m.max(v.abs())).max(1e-6);
        for (i, (a, b)) in got.iter().zip(want).enumerate() {
            assert!((a - b).abs() <= tolerance * scale, "{what}[{i}]: {a} vs {b}");
        }
    }

    /// The fused block against the three kernels it replaces, run one after another: forward,
    /// statistics and all four gradients, with and without ReLU.
    #[test]
    #[cfg_attr(not(host_avx512), ignore = "needs AVX-512F, which this CPU lacks")]
    fn fused_block_equals_convolution_then_batch_norm_then_relu() {
        assert!(
            available(),
            "dml-kernels was built on a CPU with AVX-512F but runs on one without: rebuild it"
        );
        for s in shapes() {
            for relu in [false, true] {
                let label = format!("{s:?} relu {relu}");
                let o = s.out_channels;
                let x = values(s.batch * s.channels * s.height * s.width, 1);
                let w = values(o * s.channels * s.kernel[0] * s.kernel[1], 2);
                let gamma: Vec<f32> = (0..o).map(|c| 0.5 + 0.1 * c as f32).collect();
                // Shifts of both signs, so that ReLU clips a real share of every channel.
                let beta: Vec<f32> = (0..o).map(|c| 0.3 * (c as f32 - 2.0)).collect();
                let bn = BnParams {
                    gamma: &gamma,
                    beta: &beta,
                    epsilon: 1e-5,
                };
                let fused = conv_bn_train(&s, &x, &w, bn, relu).unwrap();
                let z = conv2d(&s, &x, &w, None).unwrap();
                let plane = s.out_plane();
                let norm = batch_norm_train(&z, [s.batch, o, plane], &gamma, &beta, 1e-5).unwrap();
                let want = if relu {
                    rectified(&norm.output)
                } else {
                    norm.output.clone()
                };
                assert_close(&fused.output, &want, 1e-5, &format!("{label}: output"));
                assert_close(&fused.saved.mean, &norm.mean, 1e-5, &format!("{label}: mean"));
                assert_close(
                    &fused.saved.variance,
                    &norm.variance,
                    1e-5,
                    &format!("{label}: variance"),
                );

                let g = values(fused.output.len(), 3);
                let grads = conv_bn_train_backward(&s, &x, &w, &fused.saved, bn, relu, &g, BOTH).unwrap();
                // Without the kept unfolded input the backward pass unfolds it again: the same
                // values, bit for bit.
                assert!(fused.saved.unfolded.is_some(), "{label}: small inputs are kept");
                let mut again = conv_bn_train(&s, &x, &w, bn, relu).unwrap().saved;
                again.unfolded = None;
                let unfolded_again = conv_bn_train_backward(&s, &x, &w, &again, bn, relu, &g, BOTH).unwrap();
                assert_eq!(grads.weight, unfolded_again.weight, "{label}: ∂W unfolded again");
                assert_eq!(grads.input, unfolded_again.input, "{label}: ∂x unfolded again");
                // The reference chain backward: ReLU mask, batch norm, convolution.
                let masked: Vec<f32> = if relu {
                    g.iter()
                        .zip(&norm.output)
                        .map(|(&gv, &y)| if y <= 0.0 { 0.0 } else { gv })
                        .collect()
                } else {
                    g.clone()
                };
                let bn_grads = batch_norm_train_backward(
                    &z,
                    [s.batch, o, plane],
                    &gamma,
                    &norm.mean,
                    &norm.variance,
                    1e-5,
                    &masked,
                )
                .unwrap();
                let conv_grads = conv2d_backward(&s, &x, &w, &bn_grads.input, BOTH).unwrap();
                // The tolerance covers f32 summation order only: the fused pass sums each channel's
                // row in the same lanes, but the products see a differently rounded ∂z.
                assert_close(&grads.gamma, &bn_grads.gamma, 1e-4, &format!("{label}: ∂γ"));
                assert_close(&grads.beta, &bn_grads.beta, 1e-4, &format!("{label}: ∂β"));
                assert_close(
                    grads.input.as_ref().unwrap(),
                    conv_grads.input.as_ref().unwrap(),
                    1e-4,
                    &format!("{label}: ∂x"),
                );
                assert_close(
                    grads.weight.as_ref().unwrap(),
                    conv_grads.weight.as_ref().unwrap(),
                    1e-4,
                    &format!("{label}: ∂W"),
                );
            }
        }
    }

    /// Central differences in the input, the weight, γ and β of `L = Σ g ⊙ block(x)`.
    #[test]
    #[cfg_attr(not(host_avx512), ignore = "needs AVX-512F, which this CPU lacks")]
    fn backward_matches_finite_differences() {
        assert!(
            available(),
            "dml-kernels was built on a CPU with AVX-512F but runs on one without: rebuild it"
        );
        let s = Conv2dShape {
            batch: 2,
            channels: 2,
            height: 4,
            width: 3,
            out_channels: 3,
            kernel: [3, 3],
            stride: [1, 1],
            padding: [(1, 1), (1, 1)],
        };
        let x = values(48, 4);
        let w = values(54, 5);
        let (gamma, beta) = (vec![0.8f32, -1.2, 1.5], vec![0.2f32, -0.1, 0.4]);
        let g = values(s.output_len(), 6);
        let loss = |x: &[f32], w: &[f32], gamma: &[f32], beta: &[f32]| -> f64 {
            let bn = BnParams {
                gamma,
                beta,
                epsilon: 1e-5,
            };
            let y = conv_bn_train(&s, x, w, bn, true).unwrap().output;
            y.iter().zip(&g).map(|(a, b)| *a as f64 * *b as f64).sum()
        };
        let bn = BnParams {
            gamma: &gamma,
            beta: &beta,
            epsilon: 1e-5,
        };
        let fwd = conv_bn_train(&s, &x, &w, bn, true).unwrap();
        let grads = conv_bn_train_backward(&s, &x, &w, &fwd.saved, bn, true, &g, BOTH).unwrap();
        // f32 forward passes: a step of 1e-2 keeps the rounding error of the difference quotient
        // near 1e-4, and the 3e-3 tolerance leaves room for it; for these inputs no output
        // crosses the ReLU kink within the step (a crossing would show as a mismatch here).
        let h = 1e-2f32;
        let fd = |f: &dyn Fn(f32) -> f64| (f(h) - f(-h)) / (2.0 * h as f64);
        let check = |what: &str, i: usize, numeric: f64, analytic: f32| {
            assert!(
                (numeric - analytic as f64).abs() < 3e-3 * (1.0 + numeric.abs()),
                "{what}[{i}]: numeric {numeric} vs analytic {analytic}"
            );
        };
        for i in 0..x.len() {
            let d = fd(&|e| {
                let mut v = x.clone();
                v[i] += e;
                loss(&v, &w, &gamma, &beta)
            });
            check("∂x", i, d, grads.input.as_ref().unwrap()[i]);
        }
        for i in 0..w.len() {
            let d = fd(&|e| {
                let mut v = w.clone();
                v[i] += e;
                loss(&x, &v, &gamma, &beta)
            });
            check("∂W", i, d, grads.weight.as_ref().unwrap()[i]);
        }
        for c in 0..3 {
            let dg = fd(&|e| {
                let mut v = gamma.clone();
                v[c] += e;
                loss(&x, &w, &v, &beta)
            });
            let db = fd(&|e| {
                let mut v = beta.clone();
                v[c] += e;
                loss(&x, &w, &gamma, &v)
            });
            check("∂γ", c, dg, grads.gamma[c]);
            check("∂β", c, db, grads.beta[c]);
        }
    }

    #[test]
    fn nan_passes_through_the_rectifier() {
        assert!(rectify(f32::NAN, true).is_nan());
        assert_eq!(rectify(-1.0, true), 0.0);
        assert_eq!(rectify(-1.0, false), -1.0);
    }

    #[test]
    fn mismatched_parameters_are_errors() {
        let s = shapes()[0];
        let x = vec![0.0; s.batch * s.channels * s.height * s.width];
        let w = vec![0.0; s.out_channels * s.channels * 9];
        let short = [1.0f32; 4];
        let ok = [1.0f32; 5];
        let bn = BnParams {
            gamma: &short,
            beta: &ok,
            epsilon: 1e-5,
        };
        let err = conv_bn_train(&s, &x, &w, bn, true).err().unwrap();
        assert!(err.contains("5 channels") && err.contains("[4, 5]"), "{err}");
    }
}
