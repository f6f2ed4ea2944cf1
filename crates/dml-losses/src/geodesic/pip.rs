//! The pairwise-inner-product (PIP) criterion that picks the dimension of PPGML's
//! low-dimensional space (Kim & Song 2022, Eq. 5, after Yin & Shen 2018):
//!
//! `‖Z Zᵀ - Ẑ Ẑᵀ‖² = d - k + 2 ‖Ẑᵀ Z⊥‖²`
//!
//! for `Z` `[N, d]` and `Ẑ` `[N, k]` with orthonormal columns (the identity holds exactly then:
//! both products are orthogonal projections). `d - k` is the bias of dropping dimensions and
//! `2 ‖Ẑᵀ Z⊥‖²` the variance: the part of the LDS that leaves the embeddings' own span.
//!
//! Choice (the paper leaves it open): `Z` is an orthonormal basis of the span of the centred,
//! L2-normalised embeddings (rank `r` in place of `d`) and `Ẑ` the orthonormal basis of the
//! `k`-dimensional Isomap configuration. Both are centred, because MDS coordinates are; the
//! embeddings' span is read from the classical MDS of their Euclidean distances, which is the
//! centred Gram matrix, so that the criterion needs only the distance matrix.

use nalgebra::DMatrix;

/// `r - k + 2 ‖Ẑᵀ Z⊥‖²` (Eq. 5) for `embedding_basis` `Z` `[N, r]` and `lds_basis` `Ẑ`
/// `[N, k]`, both with orthonormal columns; `‖Ẑᵀ Z⊥‖² = k - ‖Ẑᵀ Z‖²` because the columns of
/// `Ẑ` are unit vectors split between the span of `Z` and its complement.
pub fn pip_loss(embedding_basis: &DMatrix<f64>, lds_basis: &DMatrix<f64>) -> f64 {
    assert_eq!(
        embedding_basis.nrows(),
        lds_basis.nrows(),
        "both bases must have N rows: [{}, {}] vs [{}, {}]",
        embedding_basis.nrows(),
        embedding_basis.ncols(),
        lds_basis.nrows(),
        lds_basis.ncols()
    );
    let (r, k) = (embedding_basis.ncols() as f64, lds_basis.ncols() as f64);
    let overlap = (lds_basis.transpose() * embedding_basis).norm_squared();
    r - k + 2.0 * (k - overlap).max(0.0)
}

/// The candidate `k` of smallest PIP loss (Eq. 5) and every candidate's loss, in the order
/// given; `lds_basis(k)` returns the `[N, k]` basis of the `k`-dimensional LDS. Ties go to the
/// smaller `k` (fewer parameters for the same criterion). `None` when there is no candidate.
pub fn choose_dimension(
    candidates: &[usize],
    embedding_basis: &DMatrix<f64>,
    lds_basis: impl Fn(usize) -> DMatrix<f64>,
) -> Option<(usize, Vec<f64>)> {
    let losses: Vec<f64> = candidates
        .iter()
        .map(|&k| pip_loss(embedding_basis, &lds_basis(k)))
        .collect();
    let best = (0..candidates.len())
        .min_by(|&a, &b| losses[a].total_cmp(&losses[b]).then(candidates[a].cmp(&candidates[b])))?;
    Some((candidates[best], losses))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The closed form equals the squared Frobenius distance of the two projections.
    #[test]
    fn closed_form_matches_the_projection_distance() {
        let a = DMatrix::from_fn(7, 3, |i, j| ((i * 3 + j) as f64 * 0.7).sin());
        let b = DMatrix::from_fn(7, 2, |i, j| ((i + 5 * j) as f64 * 1.3).cos());
        let (u, v) = (a.qr().q(), b.qr().q());
        let direct = (&u * u.transpose() - &v * v.transpose()).norm_squared();
        assert!(
            (pip_loss(&u, &v) - direct).abs() < 1e-12,
            "{} vs {direct}",
            pip_loss(&u, &v)
        );
    }

    #[test]
    fn a_subspace_of_the_span_prefers_more_dimensions_and_ties_go_to_the_smaller() {
        let u = DMatrix::from_fn(8, 5, |i, j| ((i * 5 + j) as f64 * 0.37).sin())
            .qr()
            .q();
        // Ẑ inside span(Z): the variance is 0 and the bias falls with k.
        let (k, losses) = choose_dimension(&[3, 4, 5], &u, |k| u.columns(0, k).into_owned()).unwrap();
        assert_eq!(k, 5);
        assert!((losses[0] - 2.0).abs() < 1e-12);
        // The same basis for every candidate: equal losses, the smallest k wins.
        let (k, _) = choose_dimension(&[4, 3], &u, |_| u.columns(0, 3).into_owned()).unwrap();
        assert_eq!(k, 3);
    }
}
