//! The unrolled Sinkhorn iteration on the host (`f64`, rayon over the items), recorded on a tape, and
//! its hand-written adjoint: the exact reverse-mode derivative of the `T` iterations, computed in one
//! pass instead of through one autodiff node per tensor operation.
//!
//! With `Z = -C / eps` and log-potentials `f` (rows) and `g` (columns), `f⁰ = 0`, iteration `t` is a
//! column step followed by a row step,
//!
//! ```text
//! gᵗ_j = log b_j - LSE_i (Z_ij + fᵗ⁻¹_i)        fᵗ_i = log a_i - LSE_j (Z_ij + gᵗ_j)
//! ```
//!
//! and the plan is `P = exp(Z + fᵀ ⊕ gᵀ)`: exactly the sequence of the tensor log-domain loop, so the
//! gradient is the one autodiff would give through it. The forward runs in the kernel space of a
//! stabilised kernel `K = exp(Z + f̃ ⊕ g̃)` with scalings `u = e^(f - f̃)`, `v = e^(g - g̃)` (two
//! matrix-vector products per iteration, no `exp`), absorbing the scalings into `f̃`, `g̃` and rebuilding
//! `K` (a new *epoch*) when they leave `[1e-50, 1e50]`, and redoing a half-step from exact log-domain
//! potentials when a sum underflows. Each half-step records its epoch, the scaling it read and the one it
//! wrote.
//!
//! The adjoint walks the half-steps backwards. For a column step the softmax weights are
//! `Q_ij = K_ij u_i v_j / b_j`, so with the incoming `ḡ` and `y_j = ḡ_j v_j / b_j`:
//!
//! ```text
//! (log b)‾ += ḡ,   Z̄ -= (u ⊗ y) ⊙ K,   f̄ -= u ⊙ (K y)
//! ```
//!
//! and symmetrically for a row step. The rank-one terms of one epoch are summed before they are
//! multiplied by that epoch's kernel. Finally `C̄ = -Z̄ / eps`, `ā = (log a)‾ / a`, `b̄ = (log b)‾ / b`;
//! zero-mass rows and columns carry a zero plan and zero gradient (they are dropped before solving).

use rayon::prelude::*;

use crate::host::{HostProblem, log_sum_exp, marginal_error};
use crate::types::{Convergence, UnrolledParams};

/// Scalings beyond `[1 / ABSORB, ABSORB]` are absorbed into the potentials.
const ABSORB: f64 = 1e50;

/// A sum of kernel entries at or below this (or not finite) is treated as underflow.
const TINY: f64 = 1e-280;

/// What the forward pass returns: the plans `[batch, n, m]`, per-item convergence and, when asked for,
/// the tape the adjoint needs.
#[derive(Debug)]
pub(crate) struct UnrolledSolution {
    pub plans: Vec<f64>,
    pub convergence: Vec<Convergence>,
    pub tape: Option<UnrolledTape>,
}

/// The recorded iterations of a whole batch.
#[derive(Debug)]
pub(crate) struct UnrolledTape {
    eps: f64,
    n: usize,
    m: usize,
    items: Vec<ItemTape>,
}

/// Gradients of a scalar loss with respect to the inputs of the unrolled solve, row-major like them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct UnrolledGrads {
    pub cost: Vec<f64>,
    pub a: Vec<f64>,
    pub b: Vec<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Half {
    /// Column step: reads `u` (`p` values), writes `v` (`q` values).
    Col,
    /// Row step: reads `v` (`q` values), writes `u` (`p` values).
    Row,
}

#[derive(Debug, Clone, Copy)]
struct Step {
    half: Half,
    epoch: usize,
    /// Offset of the read scaling in `ItemTape::scalings`; the written one follows it.
    offset: usize,
}

/// One item's tape, on its active (non-zero-mass) rows and columns.
#[derive(Debug, Default)]
struct ItemTape {
    rows: Vec<usize>,
    cols: Vec<usize>,
    a: Vec<f64>,
    b: Vec<f64>,
    /// One `p × q` kernel per epoch.
    kernels: Vec<Vec<f64>>,
    steps: Vec<Step>,
    scalings: Vec<f64>,
    /// The final scalings, in the last epoch.
    u: Vec<f64>,
    v: Vec<f64>,
    /// How many half-steps were redone from log-domain potentials after an underflow.
    restarts: usize,
}

/// Runs the unrolled iteration on every item (rayon), writing the plans; records the tape if `record`.
pub(crate) fn solve_unrolled(params: UnrolledParams, problem: &HostProblem<'_>, record: bool) -> UnrolledSolution {
    let HostProblem { batch, n, m, .. } = *problem;
    let mut plans = vec![0.0; batch * n * m];
    let results: Vec<(Convergence, ItemTape)> = plans
        .par_chunks_mut(n * m)
        .enumerate()
        .map(|(item, plan)| {
            let cost = &problem.cost[item * n * m..(item + 1) * n * m];
            let a = &problem.a[item * n..(item + 1) * n];
            let b = &problem.b[item * m..(item + 1) * m];
            let mut tape = forward_item(params, cost, a, b);
            tape.write_plan(plan, m);
            let err = marginal_error(plan, a, b);
            let iterations = tape.steps.len() / 2;
            let converged = err <= params.tolerance;
            if !record {
                // Only the plan is needed: drop the recorded scalings and kernels right away.
                tape = ItemTape::default();
            }
            (
                Convergence {
                    iterations,
                    marginal_error: err,
                    converged,
                },
                tape,
            )
        })
        .collect();
    let (convergence, items): (Vec<_>, Vec<_>) = results.into_iter().unzip();
    UnrolledSolution {
        plans,
        convergence,
        tape: record.then_some(UnrolledTape {
            eps: params.eps,
            n,
            m,
            items,
        }),
    }
}

impl UnrolledTape {
    /// The number of items.
    pub(crate) fn batch(&self) -> usize {
        self.items.len()
    }

    /// Back-propagates `grad_plan` (`∂L/∂P`, `[batch, n, m]`) through the recorded iterations.
    pub(crate) fn adjoint(&self, grad_plan: &[f64]) -> UnrolledGrads {
        let (n, m) = (self.n, self.m);
        let batch = self.batch();
        assert_eq!(
            grad_plan.len(),
            batch * n * m,
            "sinkhorn adjoint: gradient of the wrong size"
        );
        let mut cost = vec![0.0; batch * n * m];
        let mut a = vec![0.0; batch * n];
        let mut b = vec![0.0; batch * m];
        cost.par_chunks_mut(n * m)
            .zip(a.par_chunks_mut(n))
            .zip(b.par_chunks_mut(m))
            .enumerate()
            .for_each(|(item, ((gc, ga), gb))| {
                self.items[item].adjoint(self.eps, &grad_plan[item * n * m..(item + 1) * n * m], m, gc, ga, gb);
            });
        UnrolledGrads { cost, a, b }
    }
}

/// The forward iteration of one item; see the module documentation.
fn forward_item(params: UnrolledParams, cost: &[f64], a: &[f64], b: &[f64]) -> ItemTape {
    let m = b.len();
    let mut tape = ItemTape {
        rows: (0..a.len()).filter(|&i| a[i] > 0.0).collect(),
        cols: (0..m).filter(|&j| b[j] > 0.0).collect(),
        ..ItemTape::default()
    };
    tape.a = tape.rows.iter().map(|&i| a[i]).collect();
    tape.b = tape.cols.iter().map(|&j| b[j]).collect();
    let (p, q) = (tape.rows.len(), tape.cols.len());
    if p == 0 || q == 0 {
        return tape;
    }
    let inv = 1.0 / params.eps;
    let z: Vec<f64> = tape
        .rows
        .iter()
        .flat_map(|&i| tape.cols.iter().map(move |&j| -cost[i * m + j] * inv))
        .collect();
    let log_a: Vec<f64> = tape.a.iter().map(|x| x.ln()).collect();
    let log_b: Vec<f64> = tape.b.iter().map(|x| x.ln()).collect();
    let mut f = vec![0.0; p];
    // Shifting each column by its largest entry keeps the first kernel's column maxima at 1.
    let mut g: Vec<f64> = (0..q)
        .map(|j| -(0..p).map(|i| z[i * q + j]).fold(f64::NEG_INFINITY, f64::max))
        .collect();
    let mut kernel = build_kernel(&z, &f, &g);
    let mut u = vec![1.0; p];
    let mut v = vec![1.0; q];
    let mut sums_p = vec![0.0; p];
    let mut sums_q = vec![0.0; q];
    // Whether `sums_q` already holds Kᵀu for the current kernel and `u` (left by the tolerance check).
    let mut cols_ready = false;
    for t in 1..=params.max_iters {
        // Column step: v = b / Kᵀu.
        if !cols_ready {
            mat_t_vec(&kernel, &u, &mut sums_q);
        }
        cols_ready = false;
        if sums_q.iter().any(|&s| !(s > TINY && s.is_finite())) {
            absorb(&mut f, &mut u);
            absorb(&mut g, &mut v);
            for j in 0..q {
                g[j] = log_b[j] - log_sum_exp((0..p).map(|i| z[i * q + j] + f[i]));
            }
            tape.restarts += 1;
            tape.kernels
                .push(std::mem::replace(&mut kernel, build_kernel(&z, &f, &g)));
            mat_t_vec(&kernel, &u, &mut sums_q);
        }
        for ((vj, &bj), &s) in v.iter_mut().zip(&tape.b).zip(&sums_q) {
            *vj = bj / s;
        }
        tape.record(Half::Col, &u, &v);
        // Row step: u = a / K v.
        mat_vec(&kernel, &v, &mut sums_p);
        if sums_p.iter().any(|&s| !(s > TINY && s.is_finite())) {
            absorb(&mut f, &mut u);
            absorb(&mut g, &mut v);
            for i in 0..p {
                f[i] = log_a[i] - log_sum_exp((0..q).map(|j| z[i * q + j] + g[j]));
            }
            tape.restarts += 1;
            tape.kernels
                .push(std::mem::replace(&mut kernel, build_kernel(&z, &f, &g)));
            mat_vec(&kernel, &v, &mut sums_p);
        }
        for ((ui, &ai), &s) in u.iter_mut().zip(&tape.a).zip(&sums_p) {
            *ui = ai / s;
        }
        tape.record(Half::Row, &v, &u);
        if params.tolerance > 0.0 && t.is_multiple_of(params.check_every) {
            // The rows are exact after the row step; the columns tell how far the plan still is.
            mat_t_vec(&kernel, &u, &mut sums_q);
            let err = sums_q
                .iter()
                .zip(&v)
                .zip(&tape.b)
                .fold(0.0f64, |e, ((&s, &vj), &bj)| e.max((vj * s - bj).abs()));
            if err <= params.tolerance {
                break;
            }
            cols_ready = true;
        }
        let in_range = |x: &f64| (1.0 / ABSORB..=ABSORB).contains(x);
        if t < params.max_iters && !(u.iter().all(in_range) && v.iter().all(in_range)) {
            absorb(&mut f, &mut u);
            absorb(&mut g, &mut v);
            tape.kernels
                .push(std::mem::replace(&mut kernel, build_kernel(&z, &f, &g)));
            cols_ready = false;
        }
    }
    tape.kernels.push(kernel);
    tape.u = u;
    tape.v = v;
    tape
}

impl ItemTape {
    fn record(&mut self, half: Half, read: &[f64], wrote: &[f64]) {
        self.steps.push(Step {
            half,
            epoch: self.kernels.len(),
            offset: self.scalings.len(),
        });
        self.scalings.extend_from_slice(read);
        self.scalings.extend_from_slice(wrote);
    }

    fn p(&self) -> usize {
        self.rows.len()
    }

    fn q(&self) -> usize {
        self.cols.len()
    }

    /// The final plan on the active entries, `p × q`.
    fn active_plan(&self) -> Vec<f64> {
        let q = self.q();
        let Some(kernel) = self.kernels.last() else {
            return Vec::new();
        };
        let mut plan = kernel.clone();
        for (row, &ui) in plan.chunks_exact_mut(q).zip(&self.u) {
            for (x, &vj) in row.iter_mut().zip(&self.v) {
                *x *= ui * vj;
            }
        }
        plan
    }

    fn write_plan(&self, plan: &mut [f64], m: usize) {
        let q = self.q();
        let active = self.active_plan();
        for (ci, &i) in self.rows.iter().enumerate() {
            for (cj, &j) in self.cols.iter().enumerate() {
                plan[i * m + j] = active[ci * q + cj];
            }
        }
    }

    /// Writes `∂L/∂cost` (`n × m`), `∂L/∂a`, `∂L/∂b` of this item given `∂L/∂P` (`n × m`).
    fn adjoint(&self, eps: f64, grad_plan: &[f64], m: usize, gc: &mut [f64], ga: &mut [f64], gb: &mut [f64]) {
        let (p, q) = (self.p(), self.q());
        if p == 0 || q == 0 {
            return;
        }
        // Z̄ = W = ∂L/∂P ⊙ P, and the final potentials receive its row and column sums.
        let mut z_bar = self.active_plan();
        for (ci, &i) in self.rows.iter().enumerate() {
            for (cj, &j) in self.cols.iter().enumerate() {
                z_bar[ci * q + cj] *= grad_plan[i * m + j];
            }
        }
        let mut f_bar: Vec<f64> = z_bar.chunks_exact(q).map(|r| r.iter().sum()).collect();
        let mut g_bar = vec![0.0; q];
        for row in z_bar.chunks_exact(q) {
            for (g, &w) in g_bar.iter_mut().zip(row) {
                *g += w;
            }
        }
        let mut log_a_bar = vec![0.0; p];
        let mut log_b_bar = vec![0.0; q];
        // Σ of the rank-one terms of each epoch, multiplied by its kernel at the end.
        let mut outer: Vec<Vec<f64>> = vec![Vec::new(); self.kernels.len()];
        let mut y_p = vec![0.0; p];
        let mut y_q = vec![0.0; q];
        let mut tmp_p = vec![0.0; p];
        let mut tmp_q = vec![0.0; q];
        for step in self.steps.iter().rev() {
            let kernel = &self.kernels[step.epoch];
            let acc = &mut outer[step.epoch];
            if acc.is_empty() {
                acc.resize(p * q, 0.0);
            }
            match step.half {
                Half::Row => {
                    let v = &self.scalings[step.offset..step.offset + q];
                    let u = &self.scalings[step.offset + q..step.offset + q + p];
                    for i in 0..p {
                        log_a_bar[i] += f_bar[i];
                        y_p[i] = f_bar[i] * u[i] / self.a[i];
                        f_bar[i] = 0.0;
                    }
                    add_outer(acc, &y_p, v);
                    mat_t_vec(kernel, &y_p, &mut tmp_q);
                    for j in 0..q {
                        g_bar[j] -= v[j] * tmp_q[j];
                    }
                }
                Half::Col => {
                    let u = &self.scalings[step.offset..step.offset + p];
                    let v = &self.scalings[step.offset + p..step.offset + p + q];
                    for j in 0..q {
                        log_b_bar[j] += g_bar[j];
                        y_q[j] = g_bar[j] * v[j] / self.b[j];
                        g_bar[j] = 0.0;
                    }
                    add_outer(acc, u, &y_q);
                    mat_vec(kernel, &y_q, &mut tmp_p);
                    for i in 0..p {
                        f_bar[i] -= u[i] * tmp_p[i];
                    }
                }
            }
        }
        for (acc, kernel) in outer.iter().zip(&self.kernels) {
            if acc.is_empty() {
                continue;
            }
            for ((zb, &o), &k) in z_bar.iter_mut().zip(acc).zip(kernel) {
                *zb -= o * k;
            }
        }
        let scale = -1.0 / eps;
        for (ci, &i) in self.rows.iter().enumerate() {
            for (cj, &j) in self.cols.iter().enumerate() {
                gc[i * m + j] = scale * z_bar[ci * q + cj];
            }
            ga[i] = log_a_bar[ci] / self.a[ci];
        }
        for (cj, &j) in self.cols.iter().enumerate() {
            gb[j] = log_b_bar[cj] / self.b[cj];
        }
    }
}

/// `K_ij = exp(Z_ij + f_i + g_j)`, row-major `p × q`.
fn build_kernel(z: &[f64], f: &[f64], g: &[f64]) -> Vec<f64> {
    let q = g.len();
    let mut k = Vec::with_capacity(z.len());
    for (row, &fi) in z.chunks_exact(q).zip(f) {
        k.extend(row.iter().zip(g).map(|(&zij, &gj)| (zij + fi + gj).exp()));
    }
    k
}

/// Moves the scalings into the log-potentials: `pot += ln s`, `s = 1`.
fn absorb(pot: &mut [f64], s: &mut [f64]) {
    for (x, si) in pot.iter_mut().zip(s.iter_mut()) {
        *x += si.ln();
        *si = 1.0;
    }
}

/// `out = K x` for a row-major `p × q` kernel.
fn mat_vec(k: &[f64], x: &[f64], out: &mut [f64]) {
    for (o, row) in out.iter_mut().zip(k.chunks_exact(x.len())) {
        *o = row.iter().zip(x).map(|(a, b)| a * b).sum();
    }
}

/// `out = Kᵀ x` for a row-major `p × q` kernel.
fn mat_t_vec(k: &[f64], x: &[f64], out: &mut [f64]) {
    out.iter_mut().for_each(|o| *o = 0.0);
    for (row, &xi) in k.chunks_exact(out.len()).zip(x) {
        for (o, &kij) in out.iter_mut().zip(row) {
            *o += xi * kij;
        }
    }
}

/// `acc += x ⊗ y` for a row-major `|x| × |y|` matrix.
fn add_outer(acc: &mut [f64], x: &[f64], y: &[f64]) {
    for (row, &xi) in acc.chunks_exact_mut(y.len()).zip(x) {
        for (a, &yj) in row.iter_mut().zip(y) {
            *a += xi * yj;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem_values(batch: usize, n: usize, m: usize, seed: u64) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
        // A small deterministic generator keeps the test free of a random-number dependency.
        let mut state = seed;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        let cost: Vec<f64> = (0..batch * n * m).map(|_| 2.0 * next()).collect();
        let mut a: Vec<f64> = (0..batch * n).map(|_| 0.2 + next()).collect();
        let mut b: Vec<f64> = (0..batch * m).map(|_| 0.2 + next()).collect();
        for item in 0..batch {
            let sa: f64 = a[item * n..(item + 1) * n].iter().sum();
            a[item * n..(item + 1) * n].iter_mut().for_each(|x| *x /= sa);
            let sb: f64 = b[item * m..(item + 1) * m].iter().sum();
            b[item * m..(item + 1) * m].iter_mut().for_each(|x| *x /= sb);
        }
        (cost, a, b)
    }

    /// The plain log-domain loop of the module documentation, as a reference for the forward values.
    fn log_domain(cost: &[f64], a: &[f64], b: &[f64], eps: f64, iters: usize) -> Vec<f64> {
        let (n, m) = (a.len(), b.len());
        let z: Vec<f64> = cost.iter().map(|c| -c / eps).collect();
        let mut f = vec![0.0; n];
        let mut g = vec![0.0; m];
        for _ in 0..iters {
            for j in 0..m {
                g[j] = b[j].ln() - log_sum_exp((0..n).map(|i| z[i * m + j] + f[i]));
            }
            for i in 0..n {
                f[i] = a[i].ln() - log_sum_exp((0..m).map(|j| z[i * m + j] + g[j]));
            }
        }
        (0..n * m).map(|k| (z[k] + f[k / m] + g[k % m]).exp()).collect()
    }

    fn loss(plan: &[f64], weights: &[f64]) -> f64 {
        plan.iter().zip(weights).map(|(p, w)| p * w).sum()
    }

    fn params(eps: f64, iters: usize) -> UnrolledParams {
        UnrolledParams {
            eps,
            max_iters: iters,
            tolerance: 0.0,
            check_every: 10,
        }
    }

    #[test]
    fn forward_matches_the_log_domain_iteration_even_across_absorptions() {
        let (batch, n, m) = (3, 5, 4);
        let (cost, a, b) = problem_values(batch, n, m, 7);
        // eps = 0.005 drives the scalings out of range, so several epochs are exercised.
        for (eps, iters) in [(0.5, 7), (0.05, 30), (0.005, 40)] {
            let problem = HostProblem {
                cost: &cost,
                a: &a,
                b: &b,
                batch,
                n,
                m,
            };
            let out = solve_unrolled(params(eps, iters), &problem, true);
            for item in 0..batch {
                let want = log_domain(
                    &cost[item * n * m..(item + 1) * n * m],
                    &a[item * n..(item + 1) * n],
                    &b[item * m..(item + 1) * m],
                    eps,
                    iters,
                );
                for (k, w) in want.iter().enumerate() {
                    let got = out.plans[item * n * m + k];
                    assert!(
                        (got - w).abs() <= 1e-10 * (1.0 + w.abs()),
                        "eps {eps} item {item} entry {k}: {got} vs {w}"
                    );
                }
                assert_eq!(out.convergence[item].iterations, iters);
            }
        }
    }

    #[test]
    fn adjoint_matches_finite_differences_for_cost_and_marginals() {
        let (batch, n, m) = (2, 4, 3);
        let (cost, mut a, mut b) = problem_values(batch, n, m, 11);
        // Item 1 has a zero-mass row and column: they must neither move the plan nor get gradient.
        a[n] += a[n + 2];
        a[n + 2] = 0.0;
        b[m] += b[m + 1];
        b[m + 1] = 0.0;
        let inactive = |name: &str, k: usize| (name == "a" && k == n + 2) || (name == "b" && k == m + 1);
        let (weights, _, _) = problem_values(batch, n, m, 13);
        for (eps, iters) in [(0.3, 6), (0.02, 25)] {
            let p = params(eps, iters);
            let solve = |cost: &[f64], a: &[f64], b: &[f64]| {
                let problem = HostProblem {
                    cost,
                    a,
                    b,
                    batch,
                    n,
                    m,
                };
                solve_unrolled(p, &problem, true)
            };
            let out = solve(&cost, &a, &b);
            let grads = out.tape.as_ref().expect("recorded").adjoint(&weights);
            let h = 1e-6;
            let check = |name: &str, analytic: &[f64], perturb: &dyn Fn(usize, f64) -> f64| {
                for (k, &g) in analytic.iter().enumerate() {
                    if inactive(name, k) {
                        // Moving a zero mass away from 0 changes the support: no derivative exists.
                        assert_eq!(g, 0.0);
                        continue;
                    }
                    let numeric = (perturb(k, h) - perturb(k, -h)) / (2.0 * h);
                    assert!(
                        (g - numeric).abs() <= 1e-5 * (1.0 + numeric.abs()),
                        "eps {eps}: d/d{name}[{k}] analytic {g} vs numeric {numeric}"
                    );
                }
            };
            check("cost", &grads.cost, &|k, d| {
                let mut c = cost.clone();
                c[k] += d;
                loss(&solve(&c, &a, &b).plans, &weights)
            });
            check("a", &grads.a, &|k, d| {
                let mut x = a.clone();
                x[k] += d;
                loss(&solve(&cost, &x, &b).plans, &weights)
            });
            check("b", &grads.b, &|k, d| {
                let mut x = b.clone();
                x[k] += d;
                loss(&solve(&cost, &a, &x).plans, &weights)
            });
        }
    }

    #[test]
    fn adjoint_is_exact_across_epochs_and_underflow_restarts() {
        let (batch, n, m) = (1, 4, 4);
        let (mut cost, a, b) = problem_values(batch, n, m, 3);
        // Row 0 costs about 1.9 more than every other row in every column: with eps = 0.002 its
        // kernel entries are exp(-950), zero in f64, so its first row sum underflows.
        for (k, c) in cost.iter_mut().enumerate() {
            *c = if k < m { 1.9 + 0.05 * *c } else { 0.15 * *c };
        }
        let (weights, _, _) = problem_values(batch, n, m, 5);
        let p = params(0.002, 12);
        let solve = |cost: &[f64]| {
            let problem = HostProblem {
                cost,
                a: &a,
                b: &b,
                batch,
                n,
                m,
            };
            solve_unrolled(p, &problem, true)
        };
        let out = solve(&cost);
        let tape = out.tape.as_ref().expect("recorded");
        assert!(tape.items[0].restarts > 0, "the test should restart a half-step");
        assert!(tape.items[0].kernels.len() > 1, "the test should cross epochs");
        let grads = tape.adjoint(&weights);
        let h = 1e-7;
        for k in 0..cost.len() {
            let mut up = cost.clone();
            up[k] += h;
            let mut down = cost.clone();
            down[k] -= h;
            let numeric = (loss(&solve(&up).plans, &weights) - loss(&solve(&down).plans, &weights)) / (2.0 * h);
            let g = grads.cost[k];
            assert!(
                (g - numeric).abs() <= 1e-4 * (1.0 + numeric.abs()),
                "d/dcost[{k}]: {g} vs {numeric}"
            );
        }
    }

    #[test]
    fn zero_mass_entries_get_zero_plan_and_gradient() {
        let (n, m) = (4, 3);
        let (cost, mut a, mut b) = problem_values(1, n, m, 17);
        a[1] = 0.0;
        let s: f64 = a.iter().sum();
        a.iter_mut().for_each(|x| *x /= s);
        b[2] = 0.0;
        let s: f64 = b.iter().sum();
        b.iter_mut().for_each(|x| *x /= s);
        let problem = HostProblem {
            cost: &cost,
            a: &a,
            b: &b,
            batch: 1,
            n,
            m,
        };
        let out = solve_unrolled(params(0.1, 50), &problem, true);
        let grads = out.tape.as_ref().expect("recorded").adjoint(&vec![1.0; n * m]);
        for j in 0..m {
            assert_eq!(out.plans[m + j], 0.0);
            assert_eq!(grads.cost[m + j], 0.0);
        }
        for i in 0..n {
            assert_eq!(out.plans[i * m + 2], 0.0);
            assert_eq!(grads.cost[i * m + 2], 0.0);
        }
        assert_eq!(grads.a[1], 0.0);
        assert_eq!(grads.b[2], 0.0);
        assert!(out.plans.iter().chain(&grads.cost).all(|x| x.is_finite()));
        assert!(out.convergence[0].marginal_error < 1e-6);
    }

    #[test]
    fn early_stopping_reports_the_iteration_it_stopped_at() {
        let (cost, a, b) = problem_values(2, 5, 5, 23);
        let problem = HostProblem {
            cost: &cost,
            a: &a,
            b: &b,
            batch: 2,
            n: 5,
            m: 5,
        };
        let p = UnrolledParams {
            eps: 0.5,
            max_iters: 500,
            tolerance: 1e-9,
            check_every: 5,
        };
        let out = solve_unrolled(p, &problem, false);
        for c in &out.convergence {
            assert!(c.converged, "{c:?}");
            assert!(c.iterations < 500 && c.iterations.is_multiple_of(5), "{c:?}");
        }
        assert!(out.tape.is_none());
    }
}
