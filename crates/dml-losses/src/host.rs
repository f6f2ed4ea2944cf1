//! A detached matrix copied to the host for mining and for host-side bookkeeping.

use burn::tensor::Tensor;
use dml_backend::read_f64s;

/// A square `[N, N]` matrix of `f64` values, row-major.
#[derive(Clone, Debug)]
pub struct HostMatrix {
    /// N.
    pub n: usize,
    /// Row-major values (`n * n`; empty for miners that need no matrix).
    pub values: Vec<f64>,
    /// Whether larger means more similar.
    pub is_similarity: bool,
}

impl HostMatrix {
    /// Copies a (square) tensor to the host; the tensor is detached first.
    pub fn from_tensor(mat: Tensor<2>, is_similarity: bool) -> Self {
        let [n, m] = mat.dims();
        assert_eq!(n, m, "HostMatrix needs a square matrix, got [{n}, {m}]");
        Self {
            n,
            values: read_f64s(mat),
            is_similarity,
        }
    }

    /// The entry `(i, j)`.
    #[inline]
    pub fn at(&self, i: usize, j: usize) -> f64 {
        self.values[i * self.n + j]
    }

    /// `x` is strictly closer than `y` (smaller distance or larger similarity).
    #[inline]
    pub fn closer(&self, x: f64, y: f64) -> bool {
        if self.is_similarity { x > y } else { x < y }
    }

    /// PML's `margin(x, y)`: `x - y` for a distance, `y - x` for a similarity.
    #[inline]
    pub fn margin(&self, x: f64, y: f64) -> f64 {
        if self.is_similarity { y - x } else { x - y }
    }
}
