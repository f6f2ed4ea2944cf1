//! A validated, borrowed view of a row-major embedding matrix.

use crate::error::EvalError;

/// A borrowed row-major matrix of `rows` embeddings with `dim` columns each.
///
/// Row `i` occupies `data[i * dim .. (i + 1) * dim]`. Construction checks the shape and that every value is
/// finite, so the search and metric code never has to handle NaN or infinity.
#[derive(Debug, Clone, Copy)]
pub struct Embeddings<'a> {
    data: &'a [f32],
    rows: usize,
    dim: usize,
}

impl<'a> Embeddings<'a> {
    /// Wraps `data` (length `rows * dim`, row-major) after validating it.
    ///
    /// # Errors
    /// [`EvalError::ZeroDim`] when `dim == 0`, [`EvalError::ShapeMismatch`] when `data.len() != rows * dim`,
    /// and [`EvalError::NonFinite`] naming the first row and column that hold NaN or an infinity.
    /// Zero rows are allowed; evaluations over an empty set report that nothing was evaluated.
    pub fn new(data: &'a [f32], rows: usize, dim: usize) -> Result<Self, EvalError> {
        if dim == 0 {
            return Err(EvalError::ZeroDim { rows });
        }
        let expected = rows.saturating_mul(dim);
        if data.len() != expected {
            return Err(EvalError::ShapeMismatch {
                len: data.len(),
                rows,
                dim,
                expected,
            });
        }
        // The scan is split into a fast all-finite check per row and a slow search for the column only
        // when a row fails, because validation runs on every evaluation of large sets.
        for (row, values) in data.chunks_exact(dim).enumerate() {
            if !values.iter().all(|v| v.is_finite()) {
                let col = values.iter().position(|v| !v.is_finite()).unwrap_or(0);
                return Err(EvalError::NonFinite {
                    row,
                    col,
                    value: values[col],
                });
            }
        }
        Ok(Self { data, rows, dim })
    }

    /// Number of embeddings (rows).
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Number of columns of every embedding.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The whole row-major buffer, `rows * dim` values.
    pub fn as_slice(&self) -> &'a [f32] {
        self.data
    }

    /// Row `i` as a slice of `dim` values.
    ///
    /// # Panics
    /// When `i >= rows()`, like slice indexing.
    pub fn row(&self, i: usize) -> &'a [f32] {
        &self.data[i * self.dim..(i + 1) * self.dim]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_well_formed_input_and_exposes_rows() {
        let data = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let e = Embeddings::new(&data, 3, 2).unwrap();
        assert_eq!((e.rows(), e.dim()), (3, 2));
        assert_eq!(e.row(1), &[3.0, 4.0]);
        assert_eq!(e.as_slice().len(), 6);
    }

    #[test]
    fn rejects_length_mismatch_with_shapes() {
        let data = [0.0; 5];
        let err = Embeddings::new(&data, 3, 2).unwrap_err();
        assert_eq!(
            err,
            EvalError::ShapeMismatch {
                len: 5,
                rows: 3,
                dim: 2,
                expected: 6
            }
        );
        assert!(err.to_string().contains("3 × 2 = 6"), "{err}");
    }

    #[test]
    fn rejects_zero_dim() {
        assert_eq!(Embeddings::new(&[], 4, 0).unwrap_err(), EvalError::ZeroDim { rows: 4 });
    }

    #[test]
    fn rejects_nan_and_infinity_naming_row_and_column() {
        let mut data = vec![0.5f32; 12];
        data[7] = f32::NAN;
        let err = Embeddings::new(&data, 4, 3).unwrap_err();
        assert!(matches!(err, EvalError::NonFinite { row: 2, col: 1, .. }), "{err:?}");
        assert!(err.to_string().contains("row 2, column 1"), "{err}");
        data[7] = 0.0;
        data[11] = f32::NEG_INFINITY;
        let err = Embeddings::new(&data, 4, 3).unwrap_err();
        assert_eq!(
            err,
            EvalError::NonFinite {
                row: 3,
                col: 2,
                value: f32::NEG_INFINITY
            }
        );
    }

    #[test]
    fn overflowing_shape_is_a_mismatch_not_a_panic() {
        let err = Embeddings::new(&[0.0], usize::MAX, 2).unwrap_err();
        assert!(matches!(
            err,
            EvalError::ShapeMismatch {
                expected: usize::MAX,
                ..
            }
        ));
    }
}
