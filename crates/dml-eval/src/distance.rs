//! The distances used for retrieval and how embeddings are prepared for them.

use std::borrow::Cow;

use serde::Serialize;

use crate::embeddings::Embeddings;
use crate::error::EvalError;

/// How query and reference embeddings are compared. Smaller distances are closer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Distance {
    /// Euclidean (L2) distance. Neighbours are ranked by the squared distance computed as
    /// `|r|² - 2 q·r` (the query's own `|q|²` is constant per query and does not change the order);
    /// reported distances are `sqrt(max(0, |q|² + |r|² - 2 q·r))`, so their absolute error is about
    /// `1e-7 · (|q|² + |r|²)` for near-duplicate pairs, as in faiss and `torch.cdist`.
    Euclidean,
    /// Cosine distance `1 - cos(q, r)`. Rows are L2-normalised (in `f64`) first and neighbours are ranked by
    /// `-q̂·r̂`, which keeps full `f32` resolution for nearly orthogonal pairs; reported distances are
    /// `1 - q̂·r̂`. An all-zero row is an error because its direction is undefined.
    Cosine,
}

/// The largest squared norm accepted for Euclidean rows: it keeps `|r|² - 2 q·r` below `f32::MAX`.
pub(crate) const MAX_SQUARED_NORM: f64 = (f32::MAX / 8.0) as f64;

/// Rows transformed for a distance: normalised copies for cosine, borrowed rows for Euclidean.
pub(crate) struct PreparedRows<'a> {
    /// Row-major `rows × dim` values.
    pub data: Cow<'a, [f32]>,
    /// Number of rows.
    pub rows: usize,
    /// Columns per row.
    pub dim: usize,
    /// `|x|²` per row for Euclidean (computed in `f64`, rounded once); `1` for cosine.
    pub sq_norms: Vec<f32>,
}

impl<'a> PreparedRows<'a> {
    /// Row `i`.
    pub(crate) fn row(&self, i: usize) -> &[f32] {
        &self.data[i * self.dim..(i + 1) * self.dim]
    }
}

impl Distance {
    /// Factor applied to the dot product in `bias + alpha * dot`.
    pub(crate) fn alpha(self) -> f32 {
        match self {
            Distance::Euclidean => -2.0,
            Distance::Cosine => -1.0,
        }
    }

    /// Per-reference bias in `bias + alpha * dot`.
    pub(crate) fn bias(self, sq_norm: f32) -> f32 {
        match self {
            Distance::Euclidean => sq_norm,
            Distance::Cosine => 0.0,
        }
    }

    /// Converts a ranking distance of a query with squared norm `q_sq_norm` into the reported distance.
    #[inline]
    pub(crate) fn report(self, rank_dist: f32, q_sq_norm: f32) -> f32 {
        match self {
            Distance::Euclidean => (q_sq_norm + rank_dist).max(0.0).sqrt(),
            Distance::Cosine => 1.0 + rank_dist,
        }
    }

    /// Prepares `emb` (named `input` in errors) for this distance.
    ///
    /// # Errors
    /// [`EvalError::MagnitudeTooLarge`] for Euclidean rows whose squared norm exceeds
    /// [`MAX_SQUARED_NORM`], [`EvalError::ZeroNorm`] for all-zero rows under cosine.
    pub(crate) fn prepare<'a>(self, emb: &Embeddings<'a>, input: &'static str) -> Result<PreparedRows<'a>, EvalError> {
        let (rows, dim) = (emb.rows(), emb.dim());
        let mut sq_norms = Vec::with_capacity(rows);
        for (row, x) in emb.as_slice().chunks_exact(dim).enumerate() {
            let s: f64 = x.iter().map(|&v| f64::from(v) * f64::from(v)).sum();
            match self {
                Distance::Euclidean if s > MAX_SQUARED_NORM => {
                    return Err(EvalError::MagnitudeTooLarge {
                        input,
                        row,
                        squared_norm: s,
                        limit: MAX_SQUARED_NORM,
                    });
                }
                Distance::Cosine if s == 0.0 => return Err(EvalError::ZeroNorm { input, row }),
                _ => {}
            }
            sq_norms.push(s);
        }
        Ok(match self {
            Distance::Euclidean => PreparedRows {
                data: Cow::Borrowed(emb.as_slice()),
                rows,
                dim,
                sq_norms: sq_norms.into_iter().map(|s| s as f32).collect(),
            },
            Distance::Cosine => {
                let mut data = Vec::with_capacity(rows * dim);
                for (x, &s) in emb.as_slice().chunks_exact(dim).zip(&sq_norms) {
                    let inv = 1.0 / s.sqrt();
                    data.extend(x.iter().map(|&v| (f64::from(v) * inv) as f32));
                }
                PreparedRows {
                    data: Cow::Owned(data),
                    rows,
                    dim,
                    sq_norms: vec![1.0; rows],
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cosine_normalises_and_rejects_zero_rows() {
        let data = [3.0, 4.0, 0.0, 0.0];
        let e = Embeddings::new(&data, 2, 2).unwrap();
        let err = Distance::Cosine.prepare(&e, "query").err().unwrap();
        assert_eq!(err, EvalError::ZeroNorm { input: "query", row: 1 });
        assert!(err.to_string().starts_with("query: row 1"), "{err}");
        let e = Embeddings::new(&data[..2], 1, 2).unwrap();
        let p = Distance::Cosine.prepare(&e, "query").unwrap();
        assert_eq!(p.row(0), &[0.6, 0.8]);
    }

    #[test]
    fn euclidean_keeps_rows_and_rejects_huge_norms() {
        let data = [3.0, 4.0, 1e19, 1e19];
        let e = Embeddings::new(&data[..2], 1, 2).unwrap();
        let p = Distance::Euclidean.prepare(&e, "reference").unwrap();
        assert_eq!(p.sq_norms, vec![25.0]);
        let e = Embeddings::new(&data, 2, 2).unwrap();
        let err = Distance::Euclidean.prepare(&e, "reference").err().unwrap();
        assert!(
            matches!(
                err,
                EvalError::MagnitudeTooLarge {
                    input: "reference",
                    row: 1,
                    ..
                }
            ),
            "{err:?}"
        );
    }

    #[test]
    fn report_converts_ranking_values() {
        // |q|² = 25, |r|² = 4, q·r = 6: squared distance 17.
        let rank = Distance::Euclidean.bias(4.0) + Distance::Euclidean.alpha() * 6.0;
        assert_eq!(Distance::Euclidean.report(rank, 25.0), 17f32.sqrt());
        let rank = Distance::Cosine.bias(1.0) + Distance::Cosine.alpha() * 0.25;
        assert_eq!(Distance::Cosine.report(rank, 1.0), 0.75);
    }
}
