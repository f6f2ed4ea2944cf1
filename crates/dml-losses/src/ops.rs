//! Small tensor helpers shared by distances, miners and losses.
//!
//! Masks and index lists are built on the host (from labels and detached matrices) and
//! uploaded once per forward pass; the differentiable part of every loss is a handful of
//! whole-matrix tensor operations. This keeps the autodiff graph short, which is what
//! dominates the cost of a loss on the CPU backend.

use burn::tensor::{Bool, DType, Device, Int, Tensor, TensorData};
use dml_backend::float_tensor;

/// A stand-in for minus infinity in masked reductions. It is finite so that `0 * x` and
/// `x - x` stay finite (PML uses `finfo.min` for the same reason) yet far below any real
/// logit, and small enough in magnitude to be representable in `f32`.
pub(crate) const MASKED: f64 = -1e30;

/// A float tensor `[len]` on the given device and dtype (see [`dml_backend::float_tensor`]).
pub(crate) fn float1(values: Vec<f64>, device: &Device, dtype: DType) -> Tensor<1> {
    let n = values.len();
    float_tensor(values, [n], device, dtype)
}

/// A boolean mask `[rows, cols]`.
pub(crate) fn bool2(values: Vec<bool>, shape: [usize; 2], device: &Device) -> Tensor<2, Bool> {
    Tensor::from_data(TensorData::new(values, shape), device)
}

/// An index tensor `[len]`.
pub(crate) fn index1(values: &[usize], device: &Device) -> Tensor<1, Int> {
    let v: Vec<i64> = values.iter().map(|&i| i as i64).collect();
    let n = v.len();
    Tensor::from_data(TensorData::new(v, [n]), device)
}

/// The entries `mat[rows[k], cols[k]]` as a `[K]` tensor (one gather on the flattened
/// matrix, whose backward pass is a single scatter-add).
pub(crate) fn gather_pairs(mat: &Tensor<2>, rows: &[usize], cols: &[usize]) -> Tensor<1> {
    debug_assert_eq!(rows.len(), cols.len());
    let [_, m] = mat.dims();
    let flat: Vec<usize> = rows.iter().zip(cols).map(|(&r, &c)| r * m + c).collect();
    let n = mat.dims()[0] * m;
    mat.clone().reshape([n]).select(0, index1(&flat, &mat.device()))
}

/// `sum(x * 0)` as a `[1]` tensor: a zero that stays connected to the graph, so that a batch
/// without any valid tuple still yields a (zero) gradient instead of an error or NaN.
pub(crate) fn zero_like<const D: usize>(x: &Tensor<D>) -> Tensor<1> {
    (x.clone() * 0.0).sum()
}

/// L2-normalises the rows (`dim = 1`) or columns (`dim = 0`) of `x` like
/// `torch.nn.functional.normalize(x, p=2, eps=1e-12)`: `x / max(||x||, 1e-12)`.
///
/// The squared norm is clamped before the square root so that a zero row has a zero
/// gradient rather than `0 * inf = NaN`.
pub(crate) fn l2_normalize(x: Tensor<2>, dim: usize) -> Tensor<2> {
    let norm = x.clone().square().sum_dim(dim).clamp_min(1e-24).sqrt();
    x / norm
}

/// Lp-normalisation for a general `p` (`x / max(||x||_p, 1e-12)`), used only when a
/// distance is configured with `p != 2`.
pub(crate) fn lp_normalize(x: Tensor<2>, p: f64, dim: usize) -> Tensor<2> {
    if p == 2.0 {
        return l2_normalize(x, dim);
    }
    let norm = x
        .clone()
        .abs()
        .clamp_min(1e-30)
        .powf_scalar(p)
        .sum_dim(dim)
        .powf_scalar(1.0 / p)
        .clamp_min(1e-12);
    x / norm
}

/// `log(sum_j exp(x_ij))` over the kept entries of each row (`dim = 1`) or column
/// (`dim = 0`), optionally with an extra `exp(0)` term (PML's `lmu.logsumexp` with
/// `add_one`). Rows without any kept entry give 0, as in PML.
///
/// Returned with the reduced dimension kept (`[R, 1]` or `[1, C]`). The shift by the
/// (detached) maximum makes it overflow-free; masked entries are replaced by a very
/// negative finite value *before* the exponential so their gradient is exactly zero and
/// never `0 * inf`.
pub(crate) fn masked_logsumexp(x: Tensor<2>, keep: &[bool], add_one: bool, dim: usize) -> Tensor<2> {
    let [r, c] = x.dims();
    let device = x.device();
    let drop = bool2(keep.iter().map(|&k| !k).collect(), [r, c], &device);
    // Which rows (or columns) have no kept entry at all, computed on the host.
    let empty: Vec<bool> = if dim == 1 {
        (0..r).map(|i| !keep[i * c..(i + 1) * c].iter().any(|&k| k)).collect()
    } else {
        (0..c).map(|j| !(0..r).any(|i| keep[i * c + j])).collect()
    };
    let empty_shape = if dim == 1 { [r, 1] } else { [1, c] };
    let any_empty = empty.iter().any(|&e| e);
    let xm = x.mask_fill(drop, MASKED);
    let mut m = xm.clone().detach().max_dim(dim).clamp_min(MASKED / 10.0);
    if add_one {
        m = m.clamp_min(0.0);
    }
    let mut s = (xm - m.clone()).exp().sum_dim(dim);
    if add_one {
        s = s + m.clone().neg().exp();
    }
    if any_empty && !add_one {
        // log(0) would be -inf with an infinite derivative; the rows are zeroed below, so
        // give them a harmless argument here.
        let empty_mask = bool2(empty.clone(), empty_shape, &device);
        s = s.mask_fill(empty_mask, 1.0);
    }
    let out = s.log() + m;
    if any_empty {
        out.mask_fill(bool2(empty, empty_shape, &device), 0.0)
    } else {
        out
    }
}

/// Per-row cross-entropy `-log softmax(logits)[i, target_i]` as a `[N]` tensor.
pub(crate) fn cross_entropy(logits: Tensor<2>, targets: &[usize]) -> Tensor<1> {
    let [n, c] = logits.dims();
    let device = logits.device();
    let logp = burn::tensor::activation::log_softmax(logits, 1);
    let flat: Vec<usize> = targets.iter().enumerate().map(|(i, &t)| i * c + t).collect();
    logp.reshape([n * c]).select(0, index1(&flat, &device)).neg()
}
