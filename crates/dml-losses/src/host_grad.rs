//! Losses evaluated on the host with their analytic gradient, then attached to the graph.
//!
//! For the losses that dominate training time (margin, triplet margin, multi-similarity,
//! Proxy-Anchor) the per-tuple work is a handful of scalar operations over many pairs or
//! triplets. As tensor operations every one of those steps is a separate kernel with its own
//! autodiff node, and on the CPU backend that bookkeeping costs more than the arithmetic. So
//! these losses read the (small, `[N, N]` or `[N, C]`) matrix once, compute the loss `L` and
//! `G = ∂L/∂M` in `f64` on the host, and re-enter the graph as one autodiff node (see `attach`) whose value is `L` and whose backward pass hands `G` to
//! `M`. The gradients are checked against PML's autograd by the reference cases and against
//! finite differences by the unit tests.
//!
//! For Euclidean, cosine and dot-product distances the graph does not even build the distance
//! matrix: the host computes the Gram matrix `R = X Xᵀ` of the raw embeddings (see `gemm`),
//! maps it to the normalised Gram matrix and the distance, and `∂L/∂M` back to `∂L/∂X`, which
//! is attached at the embeddings themselves.

use burn::tensor::Tensor;

use crate::attach::attach_gradient;
use crate::distance::Distance;
use crate::ops::float1;
use crate::reducer::Reducer;

/// `L` plus `G = ∂L/∂M` for a row-major `[rows, cols]` matrix `M`.
pub(crate) struct HostLoss {
    pub value: f64,
    pub grad: Vec<f64>,
    pub tuples: usize,
}

/// Attaches a host-computed value `L` and gradient `G = ∂L/∂t` (row-major, `t`'s size) to the
/// graph through `t`: the result has the value `L` and, under autodiff, the gradient `G` with
/// respect to `t` (one node, see `attach`).
pub(crate) fn attach<const D: usize>(t: Tensor<D>, grad: Vec<f64>, value: f64) -> Tensor<1> {
    let (device, dtype) = (t.device(), t.dtype());
    let g: Tensor<D> = float1(grad, &device, dtype).reshape(t.dims());
    attach_gradient(float1(vec![value], &device, dtype), t, g)
}

/// The weight of each element in `reducer(values)`, so that the reduced value is
/// `Σ w_e values_e` and its derivative with respect to `values_e` is `w_e` (the selection
/// of a threshold reducer is locally constant). `divisor` is the loss's own divisor.
pub(crate) fn reducer_weights(reducer: &Reducer, values: &[f64], divisor: Option<f64>) -> Vec<f64> {
    let k = values.len();
    if k == 0 {
        return Vec::new();
    }
    let threshold = |low: Option<f64>, high: Option<f64>| {
        let keep: Vec<bool> = values
            .iter()
            .map(|&v| low.is_none_or(|l| v > l) && high.is_none_or(|h| v < h))
            .collect();
        let count = keep.iter().filter(|&&x| x).count();
        keep.iter().map(|&x| if x { 1.0 / count as f64 } else { 0.0 }).collect()
    };
    match reducer {
        Reducer::Mean => vec![1.0 / k as f64; k],
        Reducer::Sum => vec![1.0; k],
        Reducer::Divisor => {
            let d = divisor.unwrap_or(1.0);
            vec![if d == 0.0 { 0.0 } else { 1.0 / d }; k]
        }
        Reducer::AvgNonZero => threshold(Some(0.0), None),
        Reducer::Threshold { low, high } => threshold(*low, *high),
    }
}

/// `log(1 + Σ e^{x_i})` (or without the 1) over `xs`, with the softmax weights
/// `e^{x_i} / (1 + Σ e^{x})` written into `weights`. An empty set gives 0 (PML's masked
/// log-sum-exp convention).
pub(crate) fn logsumexp_with_weights(xs: &[f64], add_one: bool, weights: &mut Vec<f64>) -> f64 {
    weights.clear();
    if xs.is_empty() {
        return 0.0;
    }
    let mut m = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if add_one {
        m = m.max(0.0);
    }
    let mut s = if add_one { (-m).exp() } else { 0.0 };
    for &x in xs {
        let e = (x - m).exp();
        weights.push(e);
        s += e;
    }
    for w in weights.iter_mut() {
        *w /= s;
    }
    m + s.ln()
}

/// Stable `softplus(x) = log(1 + e^x)` and its derivative `sigmoid(x)`.
pub(crate) fn softplus(x: f64) -> (f64, f64) {
    let value = x.max(0.0) + (-x.abs()).exp().ln_1p();
    let slope = if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        x.exp() / (1.0 + x.exp())
    };
    (value, slope)
}

/// How a self-distance matrix is obtained from the Gram matrix `S` of the (normalised)
/// embeddings, when it can be.
#[derive(Clone, Copy, Debug)]
pub(crate) enum GramMap {
    /// `M = S^power` (cosine, dot product).
    Similarity { power: f64 },
    /// `M = (S_ii + S_jj - 2 S_ij)^(power/2)` with a zero diagonal (Euclidean).
    Euclidean { power: f64 },
}

impl GramMap {
    /// The map for a distance, or `None` when the distance is not a function of the Gram
    /// matrix (SNR, `p != 2`).
    pub(crate) fn for_distance(distance: &Distance) -> Option<Self> {
        match distance {
            Distance::Cosine { power } | Distance::DotProduct { power, .. } => {
                Some(GramMap::Similarity { power: *power })
            }
            Distance::Lp { p, power, .. } if *p == 2.0 => Some(GramMap::Euclidean { power: *power }),
            _ => None,
        }
    }

    /// `M` from `S` (`n × n`), matching [`Distance::self_matrix`]: the squared distance is
    /// clamped at 0 and the root taken of at least 1e-12.
    pub(crate) fn matrix(&self, s: &[f64], n: usize) -> Vec<f64> {
        match *self {
            GramMap::Similarity { power } => {
                if power == 1.0 {
                    s.to_vec()
                } else {
                    s.iter().map(|v| v.powf(power)).collect()
                }
            }
            GramMap::Euclidean { power } => {
                let mut m = vec![0.0; n * n];
                for i in 0..n {
                    for j in 0..n {
                        if i != j {
                            let sq = (s[i * n + i] + s[j * n + j] - 2.0 * s[i * n + j]).max(0.0);
                            m[i * n + j] = euclid_from_sq(sq, power).0;
                        }
                    }
                }
                m
            }
        }
    }

    /// `∂L/∂S` from `∂L/∂M`.
    pub(crate) fn chain(&self, s: &[f64], g: &[f64], n: usize) -> Vec<f64> {
        match *self {
            GramMap::Similarity { power } => {
                if power == 1.0 {
                    g.to_vec()
                } else {
                    s.iter()
                        .zip(g)
                        .map(|(&v, &gv)| gv * power * v.powf(power - 1.0))
                        .collect()
                }
            }
            GramMap::Euclidean { power } => {
                let mut out = vec![0.0; n * n];
                for i in 0..n {
                    for j in 0..n {
                        let gm = g[i * n + j];
                        if i == j || gm == 0.0 {
                            continue;
                        }
                        let raw = s[i * n + i] + s[j * n + j] - 2.0 * s[i * n + j];
                        if raw <= 0.0 {
                            continue;
                        }
                        let gsq = gm * euclid_from_sq(raw, power).1;
                        out[i * n + j] -= 2.0 * gsq;
                        out[i * n + i] += gsq;
                        out[j * n + j] += gsq;
                    }
                }
                out
            }
        }
    }
}

/// `d^power` from the squared distance and its derivative with respect to the square; below
/// 1e-12 the root is taken of 1e-12 with a zero derivative (duplicates: no infinite slope).
fn euclid_from_sq(sq: f64, power: f64) -> (f64, f64) {
    if power == 2.0 {
        return (sq, 1.0);
    }
    let clamped = sq.max(1e-12);
    let d = clamped.sqrt();
    if power == 1.0 {
        // The common case, without `powf`.
        return (d, if sq > 1e-12 { 0.5 / d } else { 0.0 });
    }
    let slope = if sq > 1e-12 {
        0.5 * power * clamped.powf(power / 2.0 - 1.0)
    } else {
        0.0
    };
    (d.powf(power), slope)
}

/// A row's L2-normalisation divisor `max(||x||, 1e-12)` (PML's `normalize`) and whether
/// it depends on the row (false when clamped or when rows are not normalised: then the
/// divisor is a constant with no derivative).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Norm {
    pub div: f64,
    pub live: bool,
}

impl Norm {
    /// From a squared norm; `normalize = false` gives the constant 1.
    pub(crate) fn new(sq: f64, normalize: bool) -> Self {
        if !normalize {
            return Self { div: 1.0, live: false };
        }
        let norm = sq.max(0.0).sqrt();
        if norm > 1e-12 {
            Self { div: norm, live: true }
        } else {
            Self {
                div: 1e-12,
                live: false,
            }
        }
    }
}

/// The product of normalised rows from the raw product: `S_ij = R_ij / (a_i b_j)` for
/// `R = X Yᵀ` (`[n, m]`), so that normalisation never has to touch the `[N, D]` embeddings.
pub(crate) fn normalize_product(r: &[f64], a: &[Norm], b: &[Norm]) -> Vec<f64> {
    let m = b.len();
    let mut s = Vec::with_capacity(r.len());
    // Row by row, so that no index is divided: this runs once per step over `[N, C]`.
    for (row, ai) in r.chunks_exact(m.max(1)).zip(a) {
        s.extend(row.iter().zip(b).map(|(&v, bj)| v / (ai.div * bj.div)));
    }
    s
}

/// Back through [`normalize_product`]: from `G = ∂L/∂S` to `∂L/∂R` and the per-row
/// coefficients `u_i = -Σ_j G_ij S_ij / a_i²` (and `v_j` likewise over columns) that the
/// norms contribute, so that `∂L/∂X = (∂L/∂R) Y + diag(u) X` and
/// `∂L/∂Y = (∂L/∂R)ᵀ X + diag(v) Y`.
pub(crate) fn normalize_product_backward(
    g: &[f64],
    s: &[f64],
    a: &[Norm],
    b: &[Norm],
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let m = b.len();
    let mut u = vec![0.0; a.len()];
    let mut v = vec![0.0; m];
    let mut dr = Vec::with_capacity(g.len());
    for (((g_row, s_row), ai), ui) in g
        .chunks_exact(m.max(1))
        .zip(s.chunks_exact(m.max(1)))
        .zip(a)
        .zip(&mut u)
    {
        for (((&gk, &sk), bj), vj) in g_row.iter().zip(s_row).zip(b).zip(&mut v) {
            dr.push(gk / (ai.div * bj.div));
            *ui -= gk * sk;
            *vj -= gk * sk;
        }
    }
    for (ui, ai) in u.iter_mut().zip(a) {
        *ui = if ai.live { *ui / (ai.div * ai.div) } else { 0.0 };
    }
    for (vj, bj) in v.iter_mut().zip(b) {
        *vj = if bj.live { *vj / (bj.div * bj.div) } else { 0.0 };
    }
    (dr, u, v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalized_product_backward_matches_finite_differences() {
        // X [2, 3], Y [3, 3]; L = Σ c ⊙ S with S the cosine matrix.
        let x = [0.3, -1.2, 0.5, 2.0, 0.1, -0.4];
        let y = [1.0, 0.2, 0.3, -0.5, 0.7, 0.9, 0.05, -0.3, 1.4];
        let c: Vec<f64> = (0..6).map(|k| 0.2 * k as f64 - 0.5).collect();
        let loss = |x: &[f64], y: &[f64]| {
            let norms = |v: &[f64]| {
                v.chunks(3)
                    .map(|r| Norm::new(r.iter().map(|a| a * a).sum(), true))
                    .collect::<Vec<_>>()
            };
            let r: Vec<f64> = (0..6)
                .map(|k| (0..3).map(|d| x[(k / 3) * 3 + d] * y[(k % 3) * 3 + d]).sum())
                .collect();
            let s = normalize_product(&r, &norms(x), &norms(y));
            (
                s.iter().zip(&c).map(|(a, b)| a * b).sum::<f64>(),
                r,
                s,
                norms(x),
                norms(y),
            )
        };
        let (_, _, s, nx, ny) = loss(&x, &y);
        let (dr, u, v) = normalize_product_backward(&c, &s, &nx, &ny);
        for i in 0..2 {
            for d in 0..3 {
                let analytic: f64 = (0..3).map(|j| dr[i * 3 + j] * y[j * 3 + d]).sum::<f64>() + u[i] * x[i * 3 + d];
                let (mut p, mut m) = (x, x);
                p[i * 3 + d] += 1e-6;
                m[i * 3 + d] -= 1e-6;
                let fd = (loss(&p, &y).0 - loss(&m, &y).0) / 2e-6;
                assert!((fd - analytic).abs() < 1e-7, "x[{i},{d}]: {fd} vs {analytic}");
            }
        }
        for j in 0..3 {
            for d in 0..3 {
                let analytic: f64 = (0..2).map(|i| dr[i * 3 + j] * x[i * 3 + d]).sum::<f64>() + v[j] * y[j * 3 + d];
                let (mut p, mut m) = (y, y);
                p[j * 3 + d] += 1e-6;
                m[j * 3 + d] -= 1e-6;
                let fd = (loss(&x, &p).0 - loss(&x, &m).0) / 2e-6;
                assert!((fd - analytic).abs() < 1e-7, "y[{j},{d}]: {fd} vs {analytic}");
            }
        }
    }

    #[test]
    fn euclidean_chain_matches_finite_differences() {
        let n = 3;
        let s = vec![1.0, 0.3, -0.2, 0.3, 0.9, 0.1, -0.2, 0.1, 1.1];
        for power in [1.0, 2.0, 1.5] {
            let map = GramMap::Euclidean { power };
            // L = Σ c_ij M_ij with fixed coefficients.
            let c: Vec<f64> = (0..9).map(|k| 0.1 * k as f64 - 0.3).collect();
            let l = |s: &[f64]| map.matrix(s, n).iter().zip(&c).map(|(a, b)| a * b).sum::<f64>();
            let g = map.chain(&s, &c, n);
            for k in 0..9 {
                let mut p = s.clone();
                p[k] += 1e-6;
                let mut m = s.clone();
                m[k] -= 1e-6;
                let fd = (l(&p) - l(&m)) / 2e-6;
                assert!((fd - g[k]).abs() < 1e-6, "power {power} entry {k}: {fd} vs {}", g[k]);
            }
        }
    }

    #[test]
    fn reducer_weights_follow_pml() {
        let v = [0.0, 2.0, 4.0, -1.0];
        assert_eq!(reducer_weights(&Reducer::Mean, &v, None), vec![0.25; 4]);
        assert_eq!(
            reducer_weights(&Reducer::AvgNonZero, &v, None),
            vec![0.0, 0.5, 0.5, 0.0]
        );
        assert_eq!(reducer_weights(&Reducer::Divisor, &v, Some(4.0)), vec![0.25; 4]);
        assert_eq!(reducer_weights(&Reducer::Divisor, &v, Some(0.0)), vec![0.0; 4]);
        let t = Reducer::Threshold {
            low: None,
            high: Some(3.0),
        };
        assert_eq!(
            reducer_weights(&t, &v, None),
            vec![1.0 / 3.0, 1.0 / 3.0, 0.0, 1.0 / 3.0]
        );
    }

    #[test]
    fn logsumexp_and_softplus_are_stable() {
        let mut w = Vec::new();
        let v = logsumexp_with_weights(&[1000.0, 1000.0], true, &mut w);
        assert!((v - (1000.0 + 2f64.ln())).abs() < 1e-9);
        assert!((w[0] - 0.5).abs() < 1e-12);
        assert_eq!(logsumexp_with_weights(&[], true, &mut w), 0.0);
        assert_eq!(softplus(800.0), (800.0, 1.0));
        assert!(softplus(-800.0).0 == 0.0 && softplus(-800.0).1 == 0.0);
    }
}
