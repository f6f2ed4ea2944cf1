//! Batch normalisation in training mode on the host (NCHW, `f32`), forward and backward.
//!
//! For a channel `c` with `M = B·H·W` values: `μ = mean(x)`, `σ² = mean((x − μ)²)` (biased, as
//! Burn's `batch_norm_train` returns and feeds to the running statistics), `x̂ = (x − μ)/√(σ² + ε)`
//! and `y = γ x̂ + β`. Backward, from `∂y`: `∂β = Σ ∂y`, `∂γ = Σ ∂y x̂` and
//! `∂x = γ/√(σ² + ε) · (∂y − ∂β/M − x̂ ∂γ/M)`.
//!
//! Each channel is one task; its values lie in `B` runs of `H·W` (one per image), and sums are
//! accumulated in `f64`. This replaces the composed default of Burn's CPU backends, which
//! transposes the activation to `[C, B·H·W]` for every reduction.

use rayon::prelude::*;

use crate::shared::{SharedOut, filled_vec};

/// The output and the batch statistics of [`batch_norm_train`].
pub struct BatchNormForward {
    /// `[B, C, H, W]`.
    pub output: Vec<f32>,
    /// `[C]`.
    pub mean: Vec<f32>,
    /// `[C]`, biased.
    pub variance: Vec<f32>,
}

/// The gradients of [`batch_norm_train`].
pub struct BatchNormGrads {
    /// `[B, C, H, W]`.
    pub input: Vec<f32>,
    /// `[C]`.
    pub gamma: Vec<f32>,
    /// `[C]`.
    pub beta: Vec<f32>,
}

/// Checks that `x` holds `[batch, channels, plane]` values and the per-channel slices `C`.
fn check(x: usize, [batch, channels, plane]: [usize; 3], per_channel: &[usize]) -> Result<(), String> {
    if x != batch * channels * plane || per_channel.iter().any(|&n| n != channels) {
        return Err(format!(
            "batch norm of [{batch}, {channels}, {plane}]: {x} values and per-channel lengths {per_channel:?}"
        ));
    }
    Ok(())
}

/// The values of channel `c`: `batch` runs of `plane`.
fn runs(x: &[f32], c: usize, [batch, channels, plane]: [usize; 3]) -> impl Iterator<Item = &[f32]> + Clone {
    (0..batch).map(move |b| &x[(b * channels + c) * plane..][..plane])
}

/// A new `[B, C, H·W]` buffer filled one channel per parallel task. `task(c)` returns channel
/// `c`'s two per-channel results and a function giving the values of the run (one image's
/// plane of channel `c`) that starts at a flat offset; returns the buffer and each result per
/// channel.
pub(crate) fn per_channel<G, I>(
    [batch, channels, plane]: [usize; 3],
    task: impl Fn(usize) -> ((f32, f32), G) + Sync,
) -> (Vec<f32>, Vec<f32>, Vec<f32>)
where
    G: Fn(usize) -> I,
    I: ExactSizeIterator<Item = f32>,
{
    let fill = |out: SharedOut| -> Vec<(f32, f32)> {
        (0..channels)
            .into_par_iter()
            .map(|c| {
                let (results, run) = task(c);
                for b in 0..batch {
                    let start = (b * channels + c) * plane;
                    let values = run(start);
                    assert_eq!(values.len(), plane, "a batch-norm run covers one feature map");
                    // SAFETY: channel c's runs are written by this task only.
                    unsafe { out.write_run(start, values) };
                }
                results
            })
            .collect()
    };
    // SAFETY: every channel task writes all `batch` runs of its channel, each exactly `plane`
    // values long (asserted), and the channels cover the whole buffer.
    let (values, results) = unsafe { filled_vec(batch * channels * plane, fill) };
    let (first, second) = results.into_iter().unzip();
    (values, first, second)
}

/// `Σ_i f(a_i, b_i)` in `f64` over eight independent partial sums: one running sum is bound by
/// the latency of each addition.
fn lane_sum(a: &[f32], b: &[f32], f: impl Fn(f32, f32) -> f64) -> f64 {
    let mut acc = [0.0f64; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f64 = ca.remainder().iter().zip(cb.remainder()).map(|(&x, &y)| f(x, y)).sum();
    for (xa, xb) in ca.zip(cb) {
        for k in 0..8 {
            acc[k] += f(xa[k], xb[k]);
        }
    }
    acc.iter().sum::<f64>() + tail
}

/// `1/√(σ² + ε)`.
fn inv_std(variance: f32, epsilon: f64) -> f64 {
    1.0 / (variance as f64 + epsilon).sqrt()
}

/// The per-element affine map of a normalised channel, `y = x·scale + shift` with
/// `scale = γ/√(σ² + ε)` and `shift = β − μ·scale`: the forward pass and every backward pass
/// that recomputes an output (for a ReLU mask) use this one expression, so they agree bit for bit.
pub(crate) fn scale_shift(gamma: f32, beta: f32, mean: f32, variance: f32, epsilon: f64) -> (f32, f32) {
    let scale = (gamma as f64 * inv_std(variance, epsilon)) as f32;
    (scale, beta - mean * scale)
}

/// `(μ, σ²)` (biased) of one channel whose values are `runs`: two passes in `f64`.
pub(crate) fn channel_moments<'a>(runs: impl Iterator<Item = &'a [f32]> + Clone, count: f64) -> (f32, f32) {
    let mean = runs.clone().map(|r| lane_sum(r, r, |v, _| v as f64)).sum::<f64>() / count;
    let variance = runs
        .map(|r| lane_sum(r, r, |v, _| (v as f64 - mean).powi(2)))
        .sum::<f64>()
        / count;
    (mean as f32, variance as f32)
}

/// One channel's backward pass: the sums `∂β = Σ ∂y` and `∂γ = Σ ∂y x̂` over its runs (in
/// `f64`), then the per-element `∂x = γ/√(σ² + ε) · (∂y − ∂β/M − x̂ ∂γ/M)` in `f32`, as Burn's own
/// batch norm computes it. The plain batch norm and the fused convolution block share it.
pub(crate) struct ChannelBackward {
    mu: f64,
    inv: f64,
    d_beta: f64,
    d_gamma: f64,
}

impl ChannelBackward {
    /// A channel with the forward pass's `mean` and biased `variance`.
    pub(crate) fn new(mean: f32, variance: f32, epsilon: f64) -> Self {
        Self {
            mu: mean as f64,
            inv: inv_std(variance, epsilon),
            d_beta: 0.0,
            d_gamma: 0.0,
        }
    }

    /// Adds one run of inputs `x` and their output gradients `dy` to the two sums.
    pub(crate) fn add_run(&mut self, x: &[f32], dy: &[f32]) {
        let mu = self.mu;
        self.d_beta += lane_sum(dy, dy, |g, _| g as f64);
        self.d_gamma += lane_sum(x, dy, |v, g| g as f64 * (v as f64 - mu)) * self.inv;
    }

    /// `(∂γ, ∂β)` and the map `(x, ∂y) → ∂x` for a channel of `count` values.
    pub(crate) fn finish(self, gamma: f32, count: f64) -> ((f32, f32), impl Fn(f32, f32) -> f32 + Copy) {
        let scale = (gamma as f64 * self.inv) as f32;
        let (shift_b, shift_g) = ((self.d_beta / count) as f32, (self.d_gamma / count) as f32);
        let (mu, inv) = (self.mu as f32, self.inv as f32);
        let input = move |v: f32, g: f32| scale * (g - shift_b - (v - mu) * inv * shift_g);
        ((self.d_gamma as f32, self.d_beta as f32), input)
    }
}

/// Batch normalisation of `x` `[B, C, H·W]` with the batch's own statistics.
///
/// # Errors
/// When a length does not match the shape.
pub fn batch_norm_train(
    x: &[f32],
    shape: [usize; 3],
    gamma: &[f32],
    beta: &[f32],
    epsilon: f64,
) -> Result<BatchNormForward, String> {
    check(x.len(), shape, &[gamma.len(), beta.len()])?;
    let [batch, _, plane] = shape;
    let count = (batch * plane).max(1) as f64;
    let (output, mean, variance) = per_channel(shape, |c| {
        let (mean, variance) = channel_moments(runs(x, c, shape), count);
        let (scale, shift) = scale_shift(gamma[c], beta[c], mean, variance, epsilon);
        let run = move |start: usize| x[start..start + plane].iter().map(move |&v| v * scale + shift);
        ((mean, variance), run)
    });
    Ok(BatchNormForward { output, mean, variance })
}

/// The gradients of [`batch_norm_train`] from the output gradient `grad` `[B, C, H·W]`, given the
/// statistics the forward pass returned.
///
/// # Errors
/// When a length does not match the shape.
#[allow(clippy::too_many_arguments)]
pub fn batch_norm_train_backward(
    x: &[f32],
    shape: [usize; 3],
    gamma: &[f32],
    mean: &[f32],
    variance: &[f32],
    epsilon: f64,
    grad: &[f32],
) -> Result<BatchNormGrads, String> {
    check(x.len(), shape, &[gamma.len(), mean.len(), variance.len()])?;
    check(grad.len(), shape, &[])?;
    let [batch, _, plane] = shape;
    let count = (batch * plane).max(1) as f64;
    let (input, gamma_grad, beta_grad) = per_channel(shape, |c| {
        let mut channel = ChannelBackward::new(mean[c], variance[c], epsilon);
        for (xr, gr) in runs(x, c, shape).zip(runs(grad, c, shape)) {
            channel.add_run(xr, gr);
        }
        let (sums, dx) = channel.finish(gamma[c], count);
        let run = move |start: usize| {
            x[start..start + plane]
                .iter()
                .zip(&grad[start..start + plane])
                .map(move |(&v, &g)| dx(v, g))
        };
        (sums, run)
    });
    Ok(BatchNormGrads {
        input,
        gamma: gamma_grad,
        beta: beta_grad,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(n: usize, seed: usize) -> Vec<f32> {
        crate::shared::test_values(n, seed, 400.0, 300.0)
    }

    #[test]
    fn forward_normalises_each_channel() {
        let shape = [3, 4, 5];
        let x = values(60, 1);
        let (gamma, beta) = (vec![1.0, 2.0, 0.5, -1.0], vec![0.0, 1.0, -2.0, 0.25]);
        let out = batch_norm_train(&x, shape, &gamma, &beta, 1e-5).unwrap();
        for c in 0..4 {
            let vals: Vec<f64> = runs(&x, c, shape).flat_map(|r| r.iter()).map(|&v| v as f64).collect();
            let mean = vals.iter().sum::<f64>() / 15.0;
            let var = vals.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / 15.0;
            assert!((out.mean[c] as f64 - mean).abs() < 1e-6 && (out.variance[c] as f64 - var).abs() < 1e-6);
            let ys: Vec<f32> = runs(&out.output, c, shape).flat_map(|r| r.iter().copied()).collect();
            for (y, v) in ys.iter().zip(&vals) {
                let want = gamma[c] as f64 * (v - mean) / (var + 1e-5).sqrt() + beta[c] as f64;
                assert!((*y as f64 - want).abs() < 1e-5, "channel {c}: {y} vs {want}");
            }
        }
    }

    #[test]
    fn backward_matches_finite_differences() {
        let shape = [2, 3, 4];
        let x = values(24, 2);
        let (gamma, beta) = (vec![0.7, -1.3, 2.0], vec![0.1, 0.2, -0.3]);
        let g = values(24, 3);
        // L = Σ g ⊙ y, differentiated numerically in f64 through the forward pass.
        let loss = |x: &[f32], gamma: &[f32], beta: &[f32]| -> f64 {
            let y = batch_norm_train(x, shape, gamma, beta, 1e-5).unwrap().output;
            y.iter().zip(&g).map(|(a, b)| *a as f64 * *b as f64).sum()
        };
        let fwd = batch_norm_train(&x, shape, &gamma, &beta, 1e-5).unwrap();
        let grads = batch_norm_train_backward(&x, shape, &gamma, &fwd.mean, &fwd.variance, 1e-5, &g).unwrap();
        let h = 1e-2f32;
        let fd = |f: &dyn Fn(f32) -> f64| (f(h) - f(-h)) / (2.0 * h as f64);
        for i in 0..24 {
            let d = fd(&|e| {
                let mut xs = x.clone();
                xs[i] += e;
                loss(&xs, &gamma, &beta)
            });
            assert!(
                (d - grads.input[i] as f64).abs() < 2e-3 * (1.0 + d.abs()),
                "∂x[{i}]: {d} vs {}",
                grads.input[i]
            );
        }
        for c in 0..3 {
            let dg = fd(&|e| {
                let mut gs = gamma.clone();
                gs[c] += e;
                loss(&x, &gs, &beta)
            });
            let db = fd(&|e| {
                let mut bs = beta.clone();
                bs[c] += e;
                loss(&x, &gamma, &bs)
            });
            assert!((dg - grads.gamma[c] as f64).abs() < 2e-3 * (1.0 + dg.abs()), "∂γ[{c}]");
            assert!((db - grads.beta[c] as f64).abs() < 2e-3 * (1.0 + db.abs()), "∂β[{c}]");
        }
    }

    #[test]
    fn mismatched_lengths_are_errors() {
        assert!(batch_norm_train(&[0.0; 5], [1, 2, 3], &[1.0; 2], &[0.0; 2], 1e-5).is_err());
        assert!(batch_norm_train(&[0.0; 6], [1, 2, 3], &[1.0; 3], &[0.0; 2], 1e-5).is_err());
    }
}
