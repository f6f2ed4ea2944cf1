//! Host matrix products for the losses that are evaluated outside the graph on CPU devices.
//!
//! On the CPU backends a loss whose value and gradient are computed on the host (see
//! `host_grad`) would otherwise round-trip through device tensors and three backend matrix
//! products per step. Here the products run on the host copies directly: `f32` through the
//! AVX-512 kernel of `dml_kernels::sgemm` where the CPU has it (about 2.5× the `gemm` crate's
//! throughput on the development machine), everything else through the `gemm` crate (the
//! build burn-flex uses). GPU devices keep their own matrix products.

use burn::tensor::{DType, Device, Element, Tensor, TensorData};
use dml_backend::{float_tensor, is_cpu_device, read_f64s};
use dml_kernels::sgemm::{self, View};

/// A float type the host products run in: the embeddings' own precision (`f32`, or `f64` for
/// the reference cases), so that the host path changes no rounding but the order of sums.
pub(crate) trait HostFloat:
    Element + Default + Copy + Send + Sync + std::ops::Mul<Output = Self> + 'static
{
    /// The burn dtype of this type.
    const DTYPE: DType;
    /// Widening to `f64` for the loss's own arithmetic.
    fn wide(self) -> f64;
    /// Narrowing from `f64` (rounds to nearest for `f32`).
    fn narrow(v: f64) -> Self;
    /// The values of tensor data of this type.
    fn values(data: TensorData) -> Vec<Self> {
        data.try_into_vec::<Self>()
            .expect("tensor data converted to the host float type reads back as that type")
    }
    /// Runs [`matmul`] through the AVX-512 kernel of `dml_kernels::sgemm` when this type and the CPU
    /// allow it; returns whether it did.
    #[allow(clippy::too_many_arguments)]
    fn fast_matmul(
        c: &mut [Self],
        mnk: [usize; 3],
        a: &[Self],
        a_t: bool,
        b: &[Self],
        b_t: bool,
        accumulate: bool,
    ) -> bool {
        let _ = (c, mnk, a, a_t, b, b_t, accumulate);
        false
    }
}

impl HostFloat for f32 {
    const DTYPE: DType = DType::F32;
    fn wide(self) -> f64 {
        self as f64
    }
    fn narrow(v: f64) -> Self {
        v as f32
    }
    fn values(data: TensorData) -> Vec<f32> {
        // Without Burn's per-element validity check (see `dml_backend::f32s_in_ne_bytes`).
        dml_backend::f32s_in_ne_bytes(data.as_bytes()).into_owned()
    }
    fn fast_matmul(
        c: &mut [f32],
        mnk: [usize; 3],
        a: &[f32],
        a_t: bool,
        b: &[f32],
        b_t: bool,
        accumulate: bool,
    ) -> bool {
        if !sgemm::available() {
            return false;
        }
        let [m, n, k] = mnk;
        let view = |data, t: bool, rows: usize, cols: usize| View {
            data,
            rs: if t { 1 } else { cols },
            cs: if t { rows } else { 1 },
        };
        sgemm::sgemm(
            c,
            mnk,
            view(a, a_t, m, k),
            view(b, b_t, k, n),
            accumulate,
            sgemm::worth_splitting(mnk),
        );
        true
    }
}

impl HostFloat for f64 {
    const DTYPE: DType = DType::F64;
    fn wide(self) -> f64 {
        self
    }
    fn narrow(v: f64) -> Self {
        v
    }
}

/// The values of a (detached) rank-2 tensor as a row-major host vector of `T`.
pub(crate) fn read<T: HostFloat>(t: Tensor<2>) -> Vec<T> {
    let data = t.detach().into_data();
    let data = if data.dtype() == T::DTYPE {
        data
    } else {
        data.convert::<T>()
    };
    T::values(data)
}

/// A `[rows, cols]` tensor of `values` on `device`, stored as `dtype` (converted when `T` is not
/// `dtype`, e.g. for half-precision embeddings).
pub(crate) fn tensor<T: HostFloat>(values: Vec<T>, shape: [usize; 2], device: &Device, dtype: DType) -> Tensor<2> {
    Tensor::from_data(TensorData::new(values, shape), (device, dtype))
}

/// Detached embeddings `X` `[n, d]` for the two products of a Gram-based loss, `X Xᵀ` and `A X`:
/// copied to the host once on CPU devices, kept on the device otherwise.
pub(crate) struct GramOperand {
    values: HostValues,
    n: usize,
    d: usize,
    device: Device,
    dtype: DType,
}

/// Where the operand lives.
enum HostValues {
    F32(Vec<f32>),
    F64(Vec<f64>),
    /// Boxed: a tensor handle is far larger than a vector's.
    Device(Box<Tensor<2>>),
}

impl GramOperand {
    /// The (detached) values of `x`.
    pub(crate) fn new(x: &Tensor<2>) -> Self {
        let [n, d] = x.dims();
        let (device, dtype) = (x.device(), x.dtype());
        let values = match (is_cpu_device(&device), dtype) {
            (true, DType::F64) => HostValues::F64(read(x.clone())),
            (true, _) => HostValues::F32(read(x.clone())),
            (false, _) => HostValues::Device(Box::new(x.clone().detach())),
        };
        Self {
            values,
            n,
            d,
            device,
            dtype,
        }
    }

    /// `X Xᵀ` `[n, n]`, row-major on the host.
    pub(crate) fn gram(&self) -> Vec<f64> {
        fn on_host<T: HostFloat>(x: &[T], n: usize, d: usize) -> Vec<f64> {
            let mut r = vec![T::default(); n * n];
            matmul(&mut r, [n, n, d], x, false, x, true, false);
            r.into_iter().map(T::wide).collect()
        }
        match &self.values {
            HostValues::F32(x) => on_host(x, self.n, self.d),
            HostValues::F64(x) => on_host(x, self.n, self.d),
            HostValues::Device(x) => read_f64s(x.clone().matmul(x.clone().transpose())),
        }
    }

    /// `A X` `[n, d]` for a row-major `a` `[n, n]`, as a tensor of `X`'s device and dtype.
    pub(crate) fn left_multiply(&self, a: Vec<f64>) -> Tensor<2> {
        fn on_host<T: HostFloat>(a: Vec<f64>, x: &[T], n: usize, d: usize) -> Vec<T> {
            let a: Vec<T> = a.into_iter().map(T::narrow).collect();
            let mut out = vec![T::default(); n * d];
            matmul(&mut out, [n, d, n], &a, false, x, false, false);
            out
        }
        let (n, d) = (self.n, self.d);
        match &self.values {
            HostValues::F32(x) => tensor(on_host(a, x, n, d), [n, d], &self.device, self.dtype),
            HostValues::F64(x) => tensor(on_host(a, x, n, d), [n, d], &self.device, self.dtype),
            HostValues::Device(x) => float_tensor(a, [n, n], &self.device, self.dtype).matmul(*x.clone()),
        }
    }
}

/// `Σ a_i b_i` accumulated in `f64` over eight independent partial sums: a single running
/// sum is bound by the latency of each addition, eight keep the adder busy.
pub(crate) fn dot<T: HostFloat>(a: &[T], b: &[T]) -> f64 {
    let mut acc = [0.0f64; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f64 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x.wide() * y.wide())
        .sum();
    for (xa, xb) in ca.zip(cb) {
        for k in 0..8 {
            acc[k] += xa[k].wide() * xb[k].wide();
        }
    }
    acc.iter().sum::<f64>() + tail
}

/// `c = op(a) · op(b)`, or `c += op(a) · op(b)` with `accumulate`, for a row-major `c`
/// `[m, n]`. `op(a)` is `[m, k]`: `a` is row-major `[m, k]`, or `[k, m]` when `a_t` (then its
/// transpose is used). Likewise `op(b)` is `[k, n]`, stored `[n, k]` when `b_t`.
///
/// # Panics
/// When a slice is shorter than its shape; the callers build them from tensor shapes.
#[allow(clippy::too_many_arguments)]
pub(crate) fn matmul<T: HostFloat>(
    c: &mut [T],
    [m, n, k]: [usize; 3],
    a: &[T],
    a_t: bool,
    b: &[T],
    b_t: bool,
    accumulate: bool,
) {
    assert!(
        c.len() >= m * n && a.len() >= m * k && b.len() >= k * n,
        "matmul: slices of {}, {} and {} values for [{m}, {k}] × [{k}, {n}]",
        c.len(),
        a.len(),
        b.len()
    );
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if !accumulate {
            c[..m * n].fill(T::default());
        }
        return;
    }
    if T::fast_matmul(c, [m, n, k], a, a_t, b, b_t, accumulate) {
        return;
    }
    // (row stride, column stride) of op(a) [m, k] and op(b) [k, n] in their row-major storage.
    let (a_rs, a_cs) = if a_t { (1, m) } else { (k, 1) };
    let (b_rs, b_cs) = if b_t { (1, k) } else { (n, 1) };
    let parallelism = if sgemm::worth_splitting([m, n, k]) {
        gemm::Parallelism::Rayon(0)
    } else {
        gemm::Parallelism::None
    };
    let (one, zero) = (T::narrow(1.0), T::narrow(0.0));
    // SAFETY: the assert above guarantees every addressed element exists: c is [m, n] with row
    // stride n; a and b are addressed within m·k and k·n values through the strides above.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            c.as_mut_ptr(),
            1,
            n as isize,
            accumulate,
            a.as_ptr(),
            a_cs as isize,
            a_rs as isize,
            b.as_ptr(),
            b_cs as isize,
            b_rs as isize,
            if accumulate { one } else { zero },
            one,
            false,
            false,
            false,
            parallelism,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The naive triple loop, in `f64`.
    fn naive(
        m: usize,
        n: usize,
        k: usize,
        a: impl Fn(usize, usize) -> f64,
        b: impl Fn(usize, usize) -> f64,
    ) -> Vec<f64> {
        (0..m * n)
            .map(|idx| (0..k).map(|p| a(idx / n, p) * b(p, idx % n)).sum())
            .collect()
    }

    #[test]
    fn every_transpose_combination_matches_the_naive_product() {
        let (m, n, k) = (7, 5, 9);
        let a: Vec<f64> = (0..m * k).map(|i| (i as f64 * 0.37).sin()).collect();
        let b: Vec<f64> = (0..k * n).map(|i| (i as f64 * 0.11).cos()).collect();
        for (a_t, b_t) in [(false, false), (true, false), (false, true), (true, true)] {
            // Element (i, p) of op(a) and (p, j) of op(b) under each storage order.
            let at = |i: usize, p: usize| if a_t { a[p * m + i] } else { a[i * k + p] };
            let bt = |p: usize, j: usize| if b_t { b[j * k + p] } else { b[p * n + j] };
            let want = naive(m, n, k, at, bt);
            let mut c = vec![0.0; m * n];
            matmul(&mut c, [m, n, k], &a, a_t, &b, b_t, false);
            for (x, y) in c.iter().zip(&want) {
                assert!((x - y).abs() < 1e-12, "a_t={a_t} b_t={b_t}: {x} vs {y}");
            }
            // Accumulating adds the product to what is there.
            let mut acc = vec![1.5; m * n];
            matmul(&mut acc, [m, n, k], &a, a_t, &b, b_t, true);
            for (x, y) in acc.iter().zip(&want) {
                assert!((x - (y + 1.5)).abs() < 1e-12, "accumulate a_t={a_t} b_t={b_t}");
            }
        }
    }

    #[test]
    fn large_products_use_threads_and_agree_in_f32() {
        // Above the parallel threshold: [400, 300] × [300, 300].
        let (m, n, k) = (400, 300, 300);
        assert!(dml_kernels::sgemm::worth_splitting([m, n, k]));
        let a: Vec<f32> = (0..m * k).map(|i| ((i % 17) as f32 - 8.0) / 8.0).collect();
        let b: Vec<f32> = (0..k * n).map(|i| ((i % 13) as f32 - 6.0) / 6.0).collect();
        let want = naive(m, n, k, |i, p| a[i * k + p] as f64, |p, j| b[p * n + j] as f64);
        let mut c = vec![0.0f32; m * n];
        matmul(&mut c, [m, n, k], &a, false, &b, false, false);
        let worst = c
            .iter()
            .zip(&want)
            .map(|(x, y)| (*x as f64 - y).abs())
            .fold(0.0, f64::max);
        assert!(worst < 1e-3, "largest error {worst}");
    }
}
