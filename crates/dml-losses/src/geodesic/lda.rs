//! Linear discriminant analysis (LDA) of the vectorised tangent vectors, the eigenpairs
//! `(λ, e)` of PPGML's Stiefel discriminant analysis (Kim & Song 2022, Sec. II-A, III-A-2):
//! `Σ_b e = λ Σ_w e`, `λ_1 ≥ … ≥ λ_m`.
//!
//! The eigenvalues that enter a loss are differentiable through the Rayleigh quotient of the
//! detached eigenvectors: with `e` held fixed, `λ = eᵀΣ_b e / eᵀΣ_w e` is a smooth function of
//! the vectors, and at an eigenvector its gradient is the eigenvalue's gradient (the
//! eigenvector's own variation does not change a stationary Rayleigh quotient to first order).
//! [`rayleigh_quotient`] gives that value and gradient.

use nalgebra::{DMatrix, DVector, SymmetricEigen};

/// The shrinkage `γ` applied to a singular within-class scatter:
/// `Σ_w ← (1 - γ) Σ_w + γ (tr Σ_w / m) I`. Choice: a singular `Σ_w` would send some eigenvalues
/// to infinity; shrinking towards the scaled identity (Friedman's regularised discriminant
/// analysis) keeps them finite while leaving a regular `Σ_w` untouched. The rank test is
/// relative, 1e-10. Note that PPGML's vectors are always rank-deficient: a tangent vector `V` at
/// `W ∈ St(k, p)` satisfies `WᵀV + VᵀW = 0`, so `vec V` spans at most `kp - p(p+1)/2` of the `kp`
/// dimensions, and every batch is shrunk (training counts them as `shrunk_scatter`), besides
/// batches with fewer samples than dimensions (`N - C < kp`).
pub const SHRINKAGE: f64 = 0.1;

/// The discriminant eigenpairs of one batch.
#[derive(Clone, Debug)]
pub struct Lda {
    /// The `m` generalised eigenvalues `λ_1 ≥ … ≥ λ_m ≥ 0` of `Σ_b e = λ Σ_w e`.
    pub eigenvalues: Vec<f64>,
    /// The eigenvectors `[m, m]`, one unit column per eigenvalue in the same order.
    pub eigenvectors: DMatrix<f64>,
    /// The shrinkage `γ` used (0, or [`SHRINKAGE`] when `Σ_w` was singular).
    pub shrinkage: f64,
}

/// The within-class and between-class scatter matrices `[m, m]` of `vectors` `[N, m]` (one
/// sample per row) with `labels` (length N), as sums (not averages; the eigenvalues are ratios
/// and do not depend on the scale): `Σ_w = Σ_i (v_i - μ_{y_i})(v_i - μ_{y_i})ᵀ`,
/// `Σ_b = Σ_c n_c (μ_c - μ)(μ_c - μ)ᵀ = Σ_t - Σ_w`. Also the class means `[C, m]` and
/// each row's class index into them.
fn scatter(vectors: &DMatrix<f64>, labels: &[u32]) -> (DMatrix<f64>, DMatrix<f64>, DMatrix<f64>, Vec<usize>) {
    let (n, m) = vectors.shape();
    assert_eq!(labels.len(), n, "{n} vectors but {} labels", labels.len());
    let mut classes: Vec<u32> = labels.to_vec();
    classes.sort_unstable();
    classes.dedup();
    let class_of: Vec<usize> = labels
        .iter()
        .map(|l| classes.binary_search(l).expect("every label is a class"))
        .collect();
    let mut means = DMatrix::zeros(classes.len(), m);
    let mut counts = vec![0usize; classes.len()];
    for (i, &c) in class_of.iter().enumerate() {
        counts[c] += 1;
        let row = means.row(c) + vectors.row(i);
        means.set_row(c, &row);
    }
    for (c, &count) in counts.iter().enumerate() {
        let row = means.row(c) / count as f64;
        means.set_row(c, &row);
    }
    let overall = vectors.row_sum() / n as f64;
    let mut within = DMatrix::zeros(m, m);
    for (i, &c) in class_of.iter().enumerate() {
        let d = (vectors.row(i) - means.row(c)).transpose();
        within += &d * d.transpose();
    }
    let mut between = DMatrix::zeros(m, m);
    for (c, &count) in counts.iter().enumerate() {
        let d = (means.row(c) - &overall).transpose();
        between += (&d * d.transpose()) * count as f64;
    }
    (within, between, means, class_of)
}

/// The shrunk within-class scatter `(1 - γ) Σ_w + γ (tr Σ_w / m) I`.
fn shrink(within: &DMatrix<f64>, gamma: f64) -> DMatrix<f64> {
    let m = within.nrows();
    within * (1.0 - gamma) + DMatrix::identity(m, m) * (gamma * within.trace() / m as f64)
}

/// LDA of `vectors` `[N, m]` (one vectorised tangent vector per row) with `labels`.
///
/// Solved through the Cholesky factor `Σ_w = L Lᵀ`: the symmetric eigenproblem of
/// `L⁻¹ Σ_b L⁻ᵀ` gives `u`, and `e = L⁻ᵀ u` normalised to unit length. Returns `None` for a
/// batch without discriminant structure: fewer than two classes (`Σ_b = 0`) or no within-class
/// scatter (`tr Σ_w ≤ 1e-12 tr Σ_t`: every class collapsed to one point up to rounding).
pub fn lda(vectors: &DMatrix<f64>, labels: &[u32]) -> Option<Lda> {
    let m = vectors.ncols();
    let (within, between, means, _) = scatter(vectors, labels);
    let trace = within.trace();
    let total = trace + between.trace();
    let scattered = trace > 1e-12 * total;
    if means.nrows() < 2 || !scattered || m == 0 {
        return None;
    }
    let spectrum = SymmetricEigen::new(within.clone()).eigenvalues;
    let gamma = if spectrum.min() > 1e-10 * spectrum.max() {
        0.0
    } else {
        SHRINKAGE
    };
    let within = shrink(&within, gamma);
    let l = within.clone().cholesky()?.l();
    let l_inv = l.solve_lower_triangular(&DMatrix::identity(m, m))?;
    let a = &l_inv * &between * l_inv.transpose();
    let eigen = SymmetricEigen::new((&a + a.transpose()) * 0.5);
    let mut pairs: Vec<(f64, DVector<f64>)> = (0..m)
        .map(|j| {
            let e = l_inv.transpose() * eigen.eigenvectors.column(j);
            let e = &e / e.norm();
            // The Rayleigh quotient of the unit eigenvector: the eigenvalue, without the
            // rounding of the transformed problem, and never below 0.
            let lambda = (e.dot(&(&between * &e)) / e.dot(&(&within * &e))).max(0.0);
            (lambda, e)
        })
        .collect();
    pairs.sort_by(|a, b| b.0.total_cmp(&a.0));
    let mut eigenvectors = DMatrix::zeros(m, m);
    for (j, (_, e)) in pairs.iter().enumerate() {
        eigenvectors.set_column(j, e);
    }
    Some(Lda {
        eigenvalues: pairs.iter().map(|p| p.0).collect(),
        eigenvectors,
        shrinkage: gamma,
    })
}

/// The Rayleigh quotient `λ(V) = eᵀΣ_b e / eᵀΣ'_w e` of a fixed (detached) direction `e`
/// (length m) for `vectors` `[N, m]` with `labels`, and its gradient `∂λ/∂V` `[N, m]`, where
/// `Σ'_w` is the within-class scatter shrunk by `shrinkage` (as [`lda`] used it).
///
/// With `d_j = v_j - μ_{y_j}` and `b_j = μ_{y_j} - μ`: `∂(eᵀΣ_w e)/∂v_j = 2 (eᵀd_j) e`,
/// `∂(eᵀΣ_b e)/∂v_j = 2 (eᵀb_j) e` (the terms through the means cancel, since deviations sum
/// to zero) and `∂ tr Σ_w / ∂v_j = 2 d_j`.
pub fn rayleigh_quotient(
    vectors: &DMatrix<f64>,
    labels: &[u32],
    e: &DVector<f64>,
    shrinkage: f64,
) -> (f64, DMatrix<f64>) {
    let (n, m) = vectors.shape();
    assert_eq!(
        e.len(),
        m,
        "direction has length {} but vectors are [{n}, {m}]",
        e.len()
    );
    let (within, between, means, class_of) = scatter(vectors, labels);
    let num = e.dot(&(&between * e));
    let ew = e.dot(&(&within * e));
    let ee = e.norm_squared();
    let den = (1.0 - shrinkage) * ew + shrinkage * ee / m as f64 * within.trace();
    let lambda = num / den;
    let overall = vectors.row_sum() / n as f64;
    let mut grad = DMatrix::zeros(n, m);
    for (j, &c) in class_of.iter().enumerate() {
        let d = (vectors.row(j) - means.row(c)).transpose();
        let b = (means.row(c) - &overall).transpose();
        let d_num = e * (2.0 * e.dot(&b));
        let d_den = e * (2.0 * (1.0 - shrinkage) * e.dot(&d)) + &d * (2.0 * shrinkage * ee / m as f64);
        grad.set_row(j, &((d_num - d_den * lambda) / den).transpose());
    }
    (lambda, grad)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(n: usize, m: usize, seed: usize) -> DMatrix<f64> {
        DMatrix::from_fn(n, m, |i, j| {
            ((seed * 13 + i * m + j) as f64 * 0.77).sin() + (i % 3) as f64 * 0.5
        })
    }

    #[test]
    fn eigenpairs_solve_the_generalised_problem() {
        let labels = [0, 0, 0, 1, 1, 1, 2, 2, 2, 2];
        let v = sample(10, 3, 1);
        let lda = lda(&v, &labels).unwrap();
        assert_eq!(lda.shrinkage, 0.0);
        let (within, between, _, _) = scatter(&v, &labels);
        for j in 0..3 {
            let e = lda.eigenvectors.column(j);
            let resid = &between * e - (&within * e) * lda.eigenvalues[j];
            assert!(resid.amax() < 1e-9, "{resid}");
        }
        assert!(lda.eigenvalues.windows(2).all(|w| w[0] >= w[1]));
        // Three classes: Σ_b has rank 2, so the last eigenvalue vanishes.
        assert!(lda.eigenvalues[2] < 1e-9);
    }

    #[test]
    fn rayleigh_gradient_matches_finite_differences() {
        let labels = [0, 0, 1, 1, 1, 2, 2];
        for (m, gamma) in [(3, 0.0), (4, SHRINKAGE)] {
            let v = sample(7, m, 2);
            let e = DVector::from_fn(m, |i, _| 0.3 + i as f64 * 0.2);
            let (_, grad) = rayleigh_quotient(&v, &labels, &e, gamma);
            let h = 1e-6;
            for i in 0..7 {
                for j in 0..m {
                    let (mut plus, mut minus) = (v.clone(), v.clone());
                    plus[(i, j)] += h;
                    minus[(i, j)] -= h;
                    let fd = (rayleigh_quotient(&plus, &labels, &e, gamma).0
                        - rayleigh_quotient(&minus, &labels, &e, gamma).0)
                        / (2.0 * h);
                    assert!(
                        (fd - grad[(i, j)]).abs() < 1e-7 * (1.0 + fd.abs()),
                        "{fd} vs {}",
                        grad[(i, j)]
                    );
                }
            }
        }
    }

    #[test]
    fn singular_scatter_is_shrunk_and_structureless_batches_are_none() {
        // Two samples per class in four dimensions: N - C = 2 < 4.
        let labels = [0, 0, 1, 1];
        let lda = lda(&sample(4, 4, 3), &labels).unwrap();
        assert_eq!(lda.shrinkage, SHRINKAGE);
        assert!(lda.eigenvalues.iter().all(|l| l.is_finite()));
        assert!(super::lda(&sample(4, 2, 3), &[0, 0, 0, 0]).is_none());
        assert!(super::lda(&sample(3, 2, 3), &[0, 1, 2]).is_none());
    }
}
