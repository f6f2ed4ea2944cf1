//! The Stiefel manifold `St(k, p) = {W ∈ R^{k×p} : WᵀW = I_p}` (Kim & Song 2022, Eq. 2–3, 6):
//! the polar retraction, its inverse (the lifting map of Eq. 6), the intrinsic mean that the
//! lifting is taken at, and the vectorisation of tangent vectors.
//!
//! Matrices are nalgebra `DMatrix<f64>`, stored column-major, so [`vectorize`] is `vec(V)`.

use nalgebra::{DMatrix, SymmetricEigen};

/// The result of lifting a point `Q` to the tangent space at `W` (Eq. 6).
#[derive(Clone, Debug)]
pub struct Lifting {
    /// `M = WᵀQ`, `[p, p]`.
    pub m: DMatrix<f64>,
    /// `S`, `[p, p]`, the solution of `M S + S Mᵀ = 2 I_p`.
    pub s: DMatrix<f64>,
    /// `V = Q S - W`, `[k, p]`, a tangent vector at `W`: `WᵀV + VᵀW = 0`.
    pub v: DMatrix<f64>,
}

/// The Kronecker matrix `I_p ⊗ M + M ⊗ I_p` (`[p², p²]`) of the equation `M S + S Mᵀ = 2 I`
/// in column-major `vec` form: `vec(M S) = (I ⊗ M) vec S` and `vec(S Mᵀ) = (M ⊗ I) vec S`.
pub fn kron_system(m: &DMatrix<f64>) -> DMatrix<f64> {
    let p = m.nrows();
    let eye = DMatrix::<f64>::identity(p, p);
    eye.kronecker(m) + m.kronecker(&eye)
}

/// The condition number above which the Kronecker system counts as singular: `M S + S Mᵀ`
/// has the eigenvalues `μ_i + μ_j` of `M`'s eigenvalues, and one of them near zero means that
/// `Q` is (nearly) opposite to `W`, where the retraction has no inverse.
const SINGULAR_CONDITION: f64 = 1e12;

/// The lifting map `RP_W⁻¹(Q) = Q S - W` (Eq. 6), the inverse of the polar retraction
/// [`retract`] (Kaneko et al. 2013): `M = WᵀQ`, `S` solving `M S + S Mᵀ = 2 I_p`, `V = Q S - W`.
///
/// The paper calls `(-M) S + S (-Mᵀ) + 2 I = 0` a continuous-time algebraic Riccati equation
/// (CARE), but it has no quadratic term in `S`: it is a Lyapunov (Sylvester) equation, linear
/// in `S`, and is solved exactly as the `p² × p²` linear system
/// `(I_p ⊗ M + M ⊗ I_p) vec S = vec(2 I_p)` (see [`kron_system`]) by LU with partial pivoting.
/// (The authors' code calls `scipy.linalg.solve_continuous_are`, a quadratic equation; this
/// follows the paper's equation.) `W` `[k, p]` and `Q` `[k, p]` must lie on `St(k, p)`.
///
/// Returns `None` when the system is singular or too ill-conditioned to trust (condition number
/// above 1e12), i.e. when `Q` has no preimage under the retraction.
pub fn lift(w: &DMatrix<f64>, q: &DMatrix<f64>) -> Option<Lifting> {
    assert_eq!(
        w.shape(),
        q.shape(),
        "W and Q must both be [k, p], got {:?} and {:?}",
        w.shape(),
        q.shape()
    );
    let p = w.ncols();
    let m = w.transpose() * q;
    let kron = kron_system(&m);
    let sv = kron.clone().singular_values();
    let (top, bottom) = (sv.max(), sv.min());
    if !(bottom > 0.0 && top / bottom < SINGULAR_CONDITION) {
        return None;
    }
    let rhs = DMatrix::<f64>::identity(p, p) * 2.0;
    let vec_s = kron.lu().solve(&nalgebra::DVector::from_column_slice(rhs.as_slice()))?;
    let s = DMatrix::from_column_slice(p, p, vec_s.as_slice());
    if s.iter().any(|x| !x.is_finite()) {
        return None;
    }
    let v = q * &s - w;
    Some(Lifting { m, s, v })
}

/// The orthogonal projection of `x` `[k, p]` onto the tangent space at `W` (Eq. 3):
/// `x - W sym(Wᵀx)`. The fallback of [`lift`] where the lifting does not exist: it maps
/// `Q - W` to the nearest tangent vector, which agrees with the lifting to first order.
pub fn project_tangent(w: &DMatrix<f64>, x: &DMatrix<f64>) -> DMatrix<f64> {
    let wx = w.transpose() * x;
    x - w * ((&wx + wx.transpose()) * 0.5)
}

/// `max |WᵀV + VᵀW|`: how far `V` is from the tangent space at `W` (0 for a tangent vector).
pub fn tangent_residual(w: &DMatrix<f64>, v: &DMatrix<f64>) -> f64 {
    let wv = w.transpose() * v;
    (&wv + wv.transpose()).amax()
}

/// `A^{-1/2}` of a symmetric positive definite `A` (through its eigendecomposition); `None`
/// when an eigenvalue is not positive.
fn inverse_sqrt(a: DMatrix<f64>) -> Option<DMatrix<f64>> {
    let eigen = SymmetricEigen::new(a);
    if eigen.eigenvalues.iter().any(|&l| l.is_nan() || l <= 0.0) {
        return None;
    }
    let scaled = DMatrix::from_fn(eigen.eigenvectors.nrows(), eigen.eigenvectors.ncols(), |i, j| {
        eigen.eigenvectors[(i, j)] / eigen.eigenvalues[j].sqrt()
    });
    Some(scaled * eigen.eigenvectors.transpose())
}

/// The polar retraction `RP_W(V) = (W + V)(I_p + VᵀV)^{-1/2}` `[k, p]` of a tangent vector `V`
/// at `W`; its inverse is [`lift`].
pub fn retract(w: &DMatrix<f64>, v: &DMatrix<f64>) -> DMatrix<f64> {
    let p = w.ncols();
    let gram = DMatrix::<f64>::identity(p, p) + v.transpose() * v;
    // I + VᵀV is positive definite for every V, so the inverse square root exists.
    let root = inverse_sqrt(gram).expect("I + VᵀV is positive definite");
    (w + v) * root
}

/// The point of `St(k, p)` nearest to `x` `[k, p]` in the Frobenius norm, the polar factor
/// `U Vᵀ` of `x = U Σ Vᵀ`. `None` when `x` is rank-deficient (or not finite): the nearest point
/// is then not unique.
pub fn polar_projection(x: &DMatrix<f64>) -> Option<DMatrix<f64>> {
    if x.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let svd = x.clone().svd(true, true);
    let (top, bottom) = (svd.singular_values.max(), svd.singular_values.min());
    let full_rank = bottom > 1e-10 * top.max(f64::MIN_POSITIVE);
    if !full_rank {
        return None;
    }
    Some(svd.u? * svd.v_t?)
}

/// `[I_p; 0]` `[k, p]`: the point of `St(k, p)` used where a batch gives none.
pub fn canonical_point(k: usize, p: usize) -> DMatrix<f64> {
    DMatrix::from_fn(k, p, |i, j| if i == j { 1.0 } else { 0.0 })
}

/// The lifting of `q` at `w`, or the tangent projection of `q - w` where the lifting does not
/// exist (see [`lift`]); the flag says whether the fallback was taken.
pub fn lift_or_project(w: &DMatrix<f64>, q: &DMatrix<f64>) -> (DMatrix<f64>, bool) {
    match lift(w, q) {
        Some(l) => (l.v, false),
        None => (project_tangent(w, &(q - w)), true),
    }
}

/// The intrinsic mean of `points` on `St(k, p)`, as found by the fixed-point iteration.
#[derive(Clone, Debug)]
pub struct IntrinsicMean {
    /// The mean `W` `[k, p]`.
    pub w: DMatrix<f64>,
    /// The number of iterations done.
    pub iterations: usize,
    /// Whether the mean tangent vector fell below the tolerance.
    pub converged: bool,
}

/// The intrinsic (Karcher-type) mean of `points` (all `[k, p]` on `St(k, p)`, at least one):
/// the `W` at which the lifted points average to zero, `(1/N) Σ RP_W⁻¹(Q_i) = 0`.
///
/// Choice: the paper cites Fletcher et al.'s intrinsic mean, defined with the Riemannian
/// logarithm, which has no closed form on `St(k, p)`; with the lifting map of Eq. 6 in its
/// place (as the paper itself does for the tangent vectors), the fixed-point iteration
/// `W ← RP_W((1/N) Σ RP_W⁻¹(Q_i))` starts from the polar projection of the Euclidean mean and
/// stops when `‖(1/N) Σ V_i‖_F < tolerance` or after `max_iterations`. Points whose lifting does
/// not exist enter through [`project_tangent`].
pub fn intrinsic_mean(points: &[DMatrix<f64>], max_iterations: usize, tolerance: f64) -> IntrinsicMean {
    assert!(!points.is_empty(), "the intrinsic mean needs at least one point");
    let (k, p) = points[0].shape();
    let euclidean = points.iter().fold(DMatrix::zeros(k, p), |acc, q| acc + q) / points.len() as f64;
    let mut w = polar_projection(&euclidean).unwrap_or_else(|| points[0].clone());
    for iteration in 0..max_iterations {
        let mean = points
            .iter()
            .fold(DMatrix::zeros(k, p), |acc, q| acc + lift_or_project(&w, q).0)
            / points.len() as f64;
        if mean.norm() < tolerance {
            return IntrinsicMean {
                w,
                iterations: iteration,
                converged: true,
            };
        }
        w = retract(&w, &mean);
    }
    IntrinsicMean {
        w,
        iterations: max_iterations,
        converged: false,
    }
}

/// `vec(V)`: the `k·p` entries of `v` `[k, p]` column by column, the vectorisation that maps
/// `T_W St(k, p)` to `R^{kp}` before discriminant analysis (Sec. III-A-2).
pub fn vectorize(v: &DMatrix<f64>) -> Vec<f64> {
    v.as_slice().to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(k: usize, p: usize, seed: usize) -> DMatrix<f64> {
        // Squared indices: a plain sine of a linear index would give a matrix of rank ≤ 2.
        let x = DMatrix::from_fn(k, p, |i, j| (((seed * 31 + i * 7 + j * 3).pow(2)) as f64 * 0.61).sin());
        polar_projection(&x).unwrap()
    }

    #[test]
    fn lifting_gives_a_tangent_vector_that_retracts_to_the_point() {
        for (k, p) in [(3, 2), (4, 2), (5, 3), (4, 1)] {
            let w = point(k, p, 1);
            assert!((w.transpose() * &w - DMatrix::identity(p, p)).amax() < 1e-12);
            // A point near W (the retraction of a small tangent vector) is recovered exactly.
            let v0 = project_tangent(&w, &(DMatrix::from_fn(k, p, |i, j| ((i + 2 * j) as f64).cos()) * 0.3));
            let q = retract(&w, &v0);
            let l = lift(&w, &q).unwrap();
            assert!(
                tangent_residual(&w, &l.v) < 1e-12,
                "WᵀV + VᵀW = {}",
                tangent_residual(&w, &l.v)
            );
            assert!((&l.v - &v0).amax() < 1e-10, "k {k} p {p}");
            assert!((retract(&w, &l.v) - &q).amax() < 1e-10);
            // The Lyapunov equation holds.
            let resid = &l.m * &l.s + &l.s * l.m.transpose() - DMatrix::identity(p, p) * 2.0;
            assert!(resid.amax() < 1e-12);
            // An arbitrary point of St(k, p) gives a tangent vector too.
            let other = point(k, p, 9);
            if let Some(l) = lift(&w, &other) {
                assert!(tangent_residual(&w, &l.v) < 1e-10);
            }
        }
    }

    #[test]
    fn a_singular_system_has_no_lifting_and_falls_back_to_the_projection() {
        // Q = W diag(1, -1): M has the eigenvalues 1 and -1, whose sum 0 makes the system singular.
        let w = canonical_point(3, 2);
        let q = &w * DMatrix::from_row_slice(2, 2, &[1.0, 0.0, 0.0, -1.0]);
        assert!(lift(&w, &q).is_none());
        let (v, fell_back) = lift_or_project(&w, &q);
        assert!(fell_back);
        assert!(tangent_residual(&w, &v) < 1e-12);
        // The opposite point is solvable (S = -I, not positive definite) but lifts to V = 0.
        let l = lift(&w, &(-&w)).unwrap();
        assert!(l.v.amax() < 1e-12);
        assert!(polar_projection(&DMatrix::zeros(3, 2)).is_none());
    }

    #[test]
    fn the_intrinsic_mean_of_symmetric_points_is_their_centre() {
        let w = point(4, 2, 3);
        let v = project_tangent(&w, &DMatrix::from_fn(4, 2, |i, j| (i as f64 - j as f64) * 0.2));
        let points = [retract(&w, &v), retract(&w, &(-&v))];
        let mean = intrinsic_mean(&points, 100, 1e-12);
        assert!(mean.converged, "{mean:?}");
        assert!((&mean.w - &w).amax() < 1e-8, "{} vs {w}", mean.w);
        assert_eq!(
            vectorize(&DMatrix::from_row_slice(2, 2, &[1.0, 2.0, 3.0, 4.0])),
            vec![1.0, 3.0, 2.0, 4.0]
        );
    }
}
