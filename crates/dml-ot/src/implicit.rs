//! Implicit differentiation of the converged entropic plan, expressed with a few tensor operations so
//! that Burn's autodiff carries it without a custom backward pass.
//!
//! At the optimum `T = exp((f ⊕ g - C) / eps)` with `T 1 = a`, `Tᵀ 1 = b`. Perturbing `C`, `a`, `b` gives
//! `dT = T ⊙ (df ⊕ dg - dC) / eps`, where `(df, dg)` solves the linearised marginal constraints
//!
//! ```text
//! a ⊙ df + T dg  = eps da + r,    r = (T ⊙ dC) 1
//! Tᵀ df + b ⊙ dg = eps db + c,    c = (T ⊙ dC)ᵀ 1
//! ```
//!
//! Eliminating `df = (eps da + r - T dg) / a` leaves the `m × m` Schur complement
//! `S = diag(b) - Tᵀ diag(1/a) T`, which is singular along the gauge `(df, dg) → (df + t, dg - t)`; the
//! last active column's `dg` is pinned to 0 and the rest of `S` inverted on the host (Cholesky, `f64`).
//! The plan handed to autodiff is then `T + dT` evaluated at `dC = C - C.detach()`,
//! `da = a - a.detach()`, `db = b - b.detach()`: every one of those is exactly zero, so the value is the
//! host plan, while the gradient is that of the converged solution. Gradients with respect to the
//! marginals are exact for mass-preserving perturbations (the problem is undefined otherwise) and are
//! determined up to a constant shift.

use burn::tensor::Tensor;
use dml_backend::float_tensor;

use crate::host::HostSolution;

/// The host plans of `solution` as a tensor whose gradient with respect to `cost`, `a` and `b` is the
/// implicit-function derivative of the entropic OT plan (see the module documentation).
pub(crate) fn implicit_plan(
    cost: Tensor<3>,
    a: Tensor<2>,
    b: Tensor<2>,
    eps: f64,
    solution: &HostSolution,
) -> Tensor<3> {
    let HostSolution { batch, n, m, .. } = *solution;
    let (inv_a, schur_inv) = linearisation(solution);
    // The host values enter the graph as constants on the cost's device, in its dtype.
    let (device, dtype) = (cost.device(), cost.dtype());
    let plan = float_tensor(solution.plans.clone(), [batch, n, m], &device, dtype);
    let inv_a = float_tensor(inv_a, [batch, n, 1], &device, dtype);
    let schur_inv = float_tensor(schur_inv, [batch, m, m], &device, dtype);

    let d_cost = cost.clone() - cost.detach();
    let d_a = (a.clone() - a.detach()).unsqueeze_dim::<3>(2).mul_scalar(eps);
    let d_b = (b.clone() - b.detach()).unsqueeze_dim::<3>(2).mul_scalar(eps);
    let weighted = plan.clone() * d_cost.clone();
    let rhs_rows = d_a + weighted.clone().sum_dim(2);
    let rhs_cols = d_b + weighted.sum_dim(1).swap_dims(1, 2);
    // dg = S⁻¹ (rhs_c - Tᵀ (rhs_r / a)), df = (rhs_r - T dg) / a.
    let scaled_rows = rhs_rows.clone() * inv_a.clone();
    let t_scaled = (plan.clone() * scaled_rows).sum_dim(1).swap_dims(1, 2);
    let d_g = schur_inv.matmul(rhs_cols - t_scaled).swap_dims(1, 2);
    let t_dg = (plan.clone() * d_g.clone()).sum_dim(2);
    let d_f = (rhs_rows - t_dg) * inv_a;
    let d_plan = plan.clone() * (d_f + d_g - d_cost).mul_scalar(1.0 / eps);
    plan + d_plan
}

/// Per item: `1/a` (0 on zero-mass rows) `[n]` and the pseudo-inverse of the Schur complement `[m, m]`
/// (zero on zero-mass columns and on the pinned gauge column), all flattened over the batch.
fn linearisation(solution: &HostSolution) -> (Vec<f64>, Vec<f64>) {
    let HostSolution { batch, n, m, .. } = *solution;
    let mut inv_a = vec![0.0; batch * n];
    let mut schur_inv = vec![0.0; batch * m * m];
    for item in 0..batch {
        let plan = solution.plan(item);
        let ia = &mut inv_a[item * n..(item + 1) * n];
        for (i, x) in ia.iter_mut().enumerate() {
            let ai: f64 = plan[i * m..(i + 1) * m].iter().sum();
            *x = if ai > 0.0 { 1.0 / ai } else { 0.0 };
        }
        let mut b = vec![0.0; m];
        for row in plan.chunks_exact(m) {
            for (bj, &t) in b.iter_mut().zip(row) {
                *bj += t;
            }
        }
        // Active columns except the last, whose dg is pinned to zero.
        let mut cols: Vec<usize> = (0..m).filter(|&j| b[j] > 0.0).collect();
        cols.pop();
        let k = cols.len();
        if k == 0 {
            continue;
        }
        let mut s = vec![0.0; k * k];
        for (p, &j) in cols.iter().enumerate() {
            for (q, &l) in cols.iter().enumerate().skip(p) {
                let mut v: f64 = (0..n).map(|i| plan[i * m + j] * ia[i] * plan[i * m + l]).sum();
                v = -v;
                if p == q {
                    v += b[j];
                }
                s[p * k + q] = v;
                s[q * k + p] = v;
            }
        }
        let inv = spd_inverse(&s, k);
        let out = &mut schur_inv[item * m * m..(item + 1) * m * m];
        for (p, &j) in cols.iter().enumerate() {
            for (q, &l) in cols.iter().enumerate() {
                out[j * m + l] = inv[p * k + q];
            }
        }
    }
    (inv_a, schur_inv)
}

/// Inverse of a symmetric positive-definite `k × k` matrix by Cholesky. A tiny ridge is added when
/// rounding makes a pivot non-positive (a plan whose support splits into disconnected blocks).
fn spd_inverse(s: &[f64], k: usize) -> Vec<f64> {
    let scale = (0..k)
        .map(|i| s[i * k + i].abs())
        .fold(0.0, f64::max)
        .max(f64::MIN_POSITIVE);
    let mut ridge = 0.0;
    loop {
        if let Some(l) = cholesky(s, k, ridge) {
            return invert_from_cholesky(&l, k);
        }
        ridge = if ridge == 0.0 { 1e-12 * scale } else { ridge * 100.0 };
    }
}

/// Lower-triangular `L` with `L Lᵀ = s + ridge I`, or `None` on a non-positive pivot.
fn cholesky(s: &[f64], k: usize, ridge: f64) -> Option<Vec<f64>> {
    let mut l = vec![0.0; k * k];
    for i in 0..k {
        for j in 0..=i {
            let mut v = s[i * k + j] - (0..j).map(|p| l[i * k + p] * l[j * k + p]).sum::<f64>();
            if i == j {
                v += ridge;
                if v.is_nan() || v <= 0.0 {
                    return None;
                }
                l[i * k + i] = v.sqrt();
            } else {
                l[i * k + j] = v / l[j * k + j];
            }
        }
    }
    Some(l)
}

/// `(L Lᵀ)⁻¹` by solving `L Lᵀ X = I` column by column.
fn invert_from_cholesky(l: &[f64], k: usize) -> Vec<f64> {
    let mut inv = vec![0.0; k * k];
    let mut y = vec![0.0; k];
    for col in 0..k {
        for i in 0..k {
            let rhs = if i == col { 1.0 } else { 0.0 };
            y[i] = (rhs - (0..i).map(|p| l[i * k + p] * y[p]).sum::<f64>()) / l[i * k + i];
        }
        for i in (0..k).rev() {
            let x = (y[i] - (i + 1..k).map(|p| l[p * k + i] * inv[p * k + col]).sum::<f64>()) / l[i * k + i];
            inv[i * k + col] = x;
        }
    }
    inv
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spd_inverse_times_matrix_is_identity() {
        let s = [4.0, 1.0, 0.5, 1.0, 3.0, 0.2, 0.5, 0.2, 2.0];
        let inv = spd_inverse(&s, 3);
        for i in 0..3 {
            for j in 0..3 {
                let v: f64 = (0..3).map(|p| s[i * 3 + p] * inv[p * 3 + j]).sum();
                let want = if i == j { 1.0 } else { 0.0 };
                assert!((v - want).abs() < 1e-12, "({i},{j}) = {v}");
            }
        }
    }
}
