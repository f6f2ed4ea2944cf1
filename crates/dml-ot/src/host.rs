//! The host-side (plain `f64` Rust) Sinkhorn solver for evaluation, re-ranking and implicit
//! differentiation, where no tape is needed and problems are small.
//!
//! On a 16 × 16 problem a tensor operation costs far more in dispatch than in arithmetic, and the
//! log-domain update needs an `exp` per entry and iteration. This solver instead iterates in the
//! kernel space of a *stabilised* kernel `K = exp((f ⊕ g - C) / eps)` (Schmitzer's absorption scheme):
//! each iteration is two matrix-vector products without any `exp`, and whenever the scalings `u`, `v`
//! leave `[1e-50, 1e50]` (or a sum underflows) they are absorbed into the log-domain potentials `f`, `g`
//! and `K` is rebuilt. The plan is the same as that of the log-domain iteration, without its underflow
//! at small `eps` and without the cost of the plain kernel iteration's `exp(-C / eps)` underflowing to 0.

use rayon::prelude::*;

use crate::error::OtError;
use crate::types::{Convergence, Params};

/// Scalings outside `[1 / ABSORB, ABSORB]` are absorbed into the potentials.
const ABSORB: f64 = 1e50;

/// A cost range above this many `eps` could underflow `exp(-C / eps)` in `f64` (whose smallest normal
/// is `exp(-708)`), so the potentials are first initialised by exact log-domain steps.
const CHEAP_INIT_RANGE: f64 = 600.0;

/// A batch of problems held on the host, row-major.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HostProblem<'a> {
    /// `[batch, n, m]` costs.
    pub cost: &'a [f64],
    /// `[batch, n]` row marginals.
    pub a: &'a [f64],
    /// `[batch, m]` column marginals.
    pub b: &'a [f64],
    /// Items.
    pub batch: usize,
    /// Rows per item.
    pub n: usize,
    /// Columns per item.
    pub m: usize,
}

/// Plans of a batch solved on the host.
#[derive(Debug, Clone, PartialEq)]
pub struct HostSolution {
    /// `[batch, n, m]` plans, row-major.
    pub plans: Vec<f64>,
    /// Items.
    pub batch: usize,
    /// Rows per item.
    pub n: usize,
    /// Columns per item.
    pub m: usize,
    /// One entry per item.
    pub convergence: Vec<Convergence>,
}

impl HostSolution {
    /// The `[n, m]` plan of one item.
    pub fn plan(&self, item: usize) -> &[f64] {
        let nm = self.n * self.m;
        &self.plans[item * nm..(item + 1) * nm]
    }
}

/// Validates a batch of host problems (the inputs of `Sinkhorn::solve_host`) and views
/// them as a [`HostProblem`].
///
/// * `cost`: `[batch, n, m]` row-major costs; `a`: `[batch, n]`; `b`: `[batch, m]`.
///
/// # Errors
/// [`OtError::Length`] when an array does not match `[batch, n, m]`, [`OtError::Zero`] for a zero
/// size, [`OtError::NotFinite`] for a non-finite cost, [`OtError::MarginalEntry`] for a negative or
/// non-finite marginal entry, [`OtError::ZeroMass`] and [`OtError::MassMismatch`] (relative mass
/// difference above 1e-4).
pub(crate) fn check_problem<'a>(
    cost: &'a [f64],
    a: &'a [f64],
    b: &'a [f64],
    [batch, n, m]: [usize; 3],
) -> Result<HostProblem<'a>, OtError> {
    for (input, v) in [("batch", batch), ("n", n), ("m", m)] {
        if v == 0 {
            return Err(OtError::Zero { input });
        }
    }
    let shape = format!("[batch, n, m] = [{batch}, {n}, {m}]");
    for (input, len, expected) in [
        ("cost", cost.len(), batch * n * m),
        ("a", a.len(), batch * n),
        ("b", b.len(), batch * m),
    ] {
        if len != expected {
            return Err(OtError::Length {
                input,
                shape: shape.clone(),
                expected,
                got: len,
            });
        }
    }
    if let Some((index, &value)) = cost.iter().enumerate().find(|(_, v)| !v.is_finite()) {
        return Err(OtError::NotFinite {
            input: "cost",
            index,
            value,
        });
    }
    for item in 0..batch {
        check_marginals(item, &a[item * n..(item + 1) * n], &b[item * m..(item + 1) * m])?;
    }
    Ok(HostProblem {
        cost,
        a,
        b,
        batch,
        n,
        m,
    })
}

/// Checks one item's marginals: finite, non-negative, positive and equal mass.
pub(crate) fn check_marginals(item: usize, a: &[f64], b: &[f64]) -> Result<(), OtError> {
    for (input, x) in [("a", a), ("b", b)] {
        if let Some((index, &value)) = x.iter().enumerate().find(|(_, v)| !(v.is_finite() && **v >= 0.0)) {
            return Err(OtError::MarginalEntry {
                input,
                item,
                index,
                value,
            });
        }
        if x.iter().sum::<f64>() <= 0.0 {
            return Err(OtError::ZeroMass { input, item });
        }
    }
    let (mass_a, mass_b) = (a.iter().sum::<f64>(), b.iter().sum::<f64>());
    if (mass_a - mass_b).abs() > 1e-4 * mass_a.max(mass_b) {
        return Err(OtError::MassMismatch { item, mass_a, mass_b });
    }
    Ok(())
}

/// Solves every item of `problem` (unchecked), in parallel when asked.
pub(crate) fn solve_batch(params: Params, problem: &HostProblem<'_>, parallel: bool) -> HostSolution {
    let HostProblem { batch, n, m, .. } = *problem;
    let mut plans = vec![0.0; batch * n * m];
    let solve = |ws: &mut Workspace, (item, plan): (usize, &mut [f64])| {
        params.solve(
            &problem.cost[item * n * m..(item + 1) * n * m],
            &problem.a[item * n..(item + 1) * n],
            &problem.b[item * m..(item + 1) * m],
            plan,
            ws,
        )
    };
    let convergence: Vec<Convergence> = if parallel {
        plans
            .par_chunks_mut(n * m)
            .enumerate()
            .map_init(Workspace::default, solve)
            .collect()
    } else {
        let mut ws = Workspace::default();
        plans.chunks_mut(n * m).enumerate().map(|x| solve(&mut ws, x)).collect()
    };
    HostSolution {
        plans,
        batch,
        n,
        m,
        convergence,
    }
}

impl Params {
    /// Solves one `[n, m]` problem into `plan` (zero-mass rows and columns are zero) and reports its
    /// convergence. `a` and `b` must be valid marginals (see [`check_marginals`]).
    pub(crate) fn solve(
        &self,
        cost: &[f64],
        a: &[f64],
        b: &[f64],
        plan: &mut [f64],
        ws: &mut Workspace,
    ) -> Convergence {
        let (n, m) = (a.len(), b.len());
        debug_assert_eq!(cost.len(), n * m);
        ws.compact(cost, a, b);
        let (p, q) = (ws.rows.len(), ws.cols.len());
        let mut state = State::new(ws, self.eps, p, q);
        state.init();
        let mut iterations = 0;
        let mut reached = None;
        loop {
            // Row sums of the current plan: its columns are exact after the last column step.
            let err = state.row_step(self.tolerance);
            if err <= self.tolerance {
                reached = Some(iterations);
                break;
            }
            if iterations == self.max_iters {
                break;
            }
            state.col_step();
            iterations += 1;
        }
        plan.iter_mut().for_each(|x| *x = 0.0);
        state.write_plan(plan, m);
        let err = marginal_error(plan, a, b);
        Convergence {
            iterations: reached.unwrap_or(iterations),
            marginal_error: err,
            converged: err <= self.tolerance,
        }
    }
}

/// `max(|T 1 - a|∞, |Tᵀ 1 - b|∞)` of an `[n, m]` plan; NaN when the plan holds NaN.
pub(crate) fn marginal_error(plan: &[f64], a: &[f64], b: &[f64]) -> f64 {
    let m = b.len();
    let mut cols = vec![0.0; m];
    let mut err: f64 = 0.0;
    for (row, &ai) in plan.chunks_exact(m).zip(a) {
        let mut s = 0.0;
        for (c, &t) in cols.iter_mut().zip(row) {
            s += t;
            *c += t;
        }
        err = nan_max(err, (s - ai).abs());
    }
    for (c, &bj) in cols.iter().zip(b) {
        err = nan_max(err, (c - bj).abs());
    }
    err
}

fn nan_max(acc: f64, d: f64) -> f64 {
    if d > acc || d.is_nan() { d } else { acc }
}

/// Buffers reused across the items a thread solves.
#[derive(Debug, Default)]
pub(crate) struct Workspace {
    /// Indices of the rows with positive mass.
    rows: Vec<usize>,
    /// Indices of the columns with positive mass.
    cols: Vec<usize>,
    /// Compacted `[p, q]` cost.
    cost: Vec<f64>,
    /// Compacted row marginal.
    a: Vec<f64>,
    /// Compacted column marginal.
    b: Vec<f64>,
    /// Stabilised kernel `[p, q]`.
    kernel: Vec<f64>,
    /// Row potential.
    f: Vec<f64>,
    /// Column potential.
    g: Vec<f64>,
    /// Row scaling.
    u: Vec<f64>,
    /// Column scaling.
    v: Vec<f64>,
    /// Column accumulator.
    acc: Vec<f64>,
    /// Row sums `K v`.
    sums: Vec<f64>,
}

impl Workspace {
    /// Copies the rows and columns with positive mass.
    fn compact(&mut self, cost: &[f64], a: &[f64], b: &[f64]) {
        let m = b.len();
        self.rows.clear();
        self.rows.extend((0..a.len()).filter(|&i| a[i] > 0.0));
        self.cols.clear();
        self.cols.extend((0..m).filter(|&j| b[j] > 0.0));
        self.a.clear();
        self.a.extend(self.rows.iter().map(|&i| a[i]));
        self.b.clear();
        self.b.extend(self.cols.iter().map(|&j| b[j]));
        self.cost.clear();
        if self.cols.len() == m {
            for &i in &self.rows {
                self.cost.extend_from_slice(&cost[i * m..(i + 1) * m]);
            }
        } else {
            for &i in &self.rows {
                self.cost.extend(self.cols.iter().map(|&j| cost[i * m + j]));
            }
        }
    }
}

/// The iteration state over a compacted `[p, q]` problem.
struct State<'w> {
    ws: &'w mut Workspace,
    eps: f64,
    p: usize,
    q: usize,
}

impl<'w> State<'w> {
    fn new(ws: &'w mut Workspace, eps: f64, p: usize, q: usize) -> Self {
        for buf in [&mut ws.f, &mut ws.u, &mut ws.sums] {
            buf.clear();
            buf.resize(p, 0.0);
        }
        for buf in [&mut ws.g, &mut ws.v, &mut ws.acc] {
            buf.clear();
            buf.resize(q, 0.0);
        }
        ws.kernel.clear();
        ws.kernel.resize(p * q, 0.0);
        Self { ws, eps, p, q }
    }

    /// Potentials whose kernel has exact column sums `b` and no column that underflows.
    fn init(&mut self) {
        let (lo, hi) = self
            .ws
            .cost
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &c| {
                (lo.min(c), hi.max(c))
            });
        if (hi - lo) / self.eps <= CHEAP_INIT_RANGE {
            // Shifting each column by its smallest cost keeps every kernel entry in
            // [exp(-600), 1]: no underflow, and a single exp per entry.
            self.ws.f.iter_mut().for_each(|x| *x = 0.0);
            for j in 0..self.q {
                self.ws.g[j] = (0..self.p)
                    .map(|i| self.ws.cost[i * self.q + j])
                    .fold(f64::INFINITY, f64::min);
            }
            self.rebuild();
            self.fit_cols_exactly();
        } else {
            self.ws.g.iter_mut().for_each(|x| *x = 0.0);
            self.log_row_step();
            self.log_col_step();
            self.rebuild();
        }
    }

    /// Scales the kernel's columns to sum to `b` (used after the cheap initialisation, where every
    /// column sum is at least 1, so the scalings `b_j / sum_j` stay far inside the absorption range).
    fn fit_cols_exactly(&mut self) {
        let ws = &mut *self.ws;
        ws.acc.iter_mut().for_each(|x| *x = 0.0);
        for row in ws.kernel.chunks_exact(self.q) {
            for (c, &k) in ws.acc.iter_mut().zip(row) {
                *c += k;
            }
        }
        for j in 0..self.q {
            ws.v[j] = ws.b[j] / ws.acc[j];
        }
    }

    /// `K = exp((f ⊕ g - C) / eps)` with unit scalings.
    fn rebuild(&mut self) {
        let ws = &mut *self.ws;
        let inv = 1.0 / self.eps;
        for i in 0..self.p {
            let fi = ws.f[i];
            let krow = &mut ws.kernel[i * self.q..(i + 1) * self.q];
            let crow = &ws.cost[i * self.q..(i + 1) * self.q];
            for ((k, &c), &gj) in krow.iter_mut().zip(crow).zip(&ws.g) {
                *k = ((fi + gj - c) * inv).exp();
            }
        }
        ws.u.iter_mut().for_each(|x| *x = 1.0);
        ws.v.iter_mut().for_each(|x| *x = 1.0);
    }

    /// Moves the scalings into the potentials.
    fn absorb(&mut self) {
        let ws = &mut *self.ws;
        for (f, &u) in ws.f.iter_mut().zip(&ws.u) {
            *f += self.eps * u.ln();
        }
        for (g, &v) in ws.g.iter_mut().zip(&ws.v) {
            *g += self.eps * v.ln();
        }
    }

    /// Exact log-domain row step `f_i = eps (log a_i - LSE_j((g_j - C_ij) / eps))`.
    fn log_row_step(&mut self) {
        let ws = &mut *self.ws;
        let inv = 1.0 / self.eps;
        for i in 0..self.p {
            let crow = &ws.cost[i * self.q..(i + 1) * self.q];
            let lse = log_sum_exp(crow.iter().zip(&ws.g).map(|(&c, &g)| (g - c) * inv));
            ws.f[i] = self.eps * (ws.a[i].ln() - lse);
        }
    }

    /// Exact log-domain column step `g_j = eps (log b_j - LSE_i((f_i - C_ij) / eps))`.
    fn log_col_step(&mut self) {
        let ws = &mut *self.ws;
        let inv = 1.0 / self.eps;
        for j in 0..self.q {
            let lse = log_sum_exp((0..self.p).map(|i| (ws.f[i] - ws.cost[i * self.q + j]) * inv));
            ws.g[j] = self.eps * (ws.b[j].ln() - lse);
        }
    }

    /// Row step `u = a / (K v)`. Returns the row marginal error of the plan *before* the step (its
    /// columns are exact), which is the convergence test; when that already meets `tolerance` the step
    /// is skipped so that the returned plan is the one that was tested.
    fn row_step(&mut self, tolerance: f64) -> f64 {
        let mut err: f64 = 0.0;
        let mut bad = false;
        {
            let ws = &mut *self.ws;
            for i in 0..self.p {
                let s = dot(&ws.kernel[i * self.q..(i + 1) * self.q], &ws.v);
                ws.sums[i] = s;
                err = nan_max(err, (ws.u[i] * s - ws.a[i]).abs());
                bad |= !(s > 0.0 && s.is_finite());
            }
        }
        if err <= tolerance && !bad {
            return err;
        }
        if bad {
            // A row sum underflowed: restart this step from exact log-domain potentials.
            self.absorb();
            self.log_row_step();
            self.rebuild();
            return f64::INFINITY;
        }
        let ws = &mut *self.ws;
        let mut out_of_range = false;
        for i in 0..self.p {
            let u = ws.a[i] / ws.sums[i];
            ws.u[i] = u;
            out_of_range |= !(1.0 / ABSORB..=ABSORB).contains(&u);
        }
        if out_of_range {
            self.absorb();
            self.rebuild();
        }
        err
    }

    /// Column step `v = b / (Kᵀ u)`.
    fn col_step(&mut self) {
        let ws = &mut *self.ws;
        ws.acc.iter_mut().for_each(|x| *x = 0.0);
        for (row, &u) in ws.kernel.chunks_exact(self.q).zip(&ws.u) {
            for (c, &k) in ws.acc.iter_mut().zip(row) {
                *c += u * k;
            }
        }
        let mut bad = false;
        let mut out_of_range = false;
        for j in 0..self.q {
            let t = ws.acc[j];
            bad |= !(t > 0.0 && t.is_finite());
            let v = ws.b[j] / t;
            ws.v[j] = v;
            out_of_range |= !(1.0 / ABSORB..=ABSORB).contains(&v);
        }
        if bad {
            // A column sum underflowed: redo this step from exact log-domain potentials.
            ws.v.iter_mut().for_each(|x| *x = 1.0);
            self.absorb();
            self.log_col_step();
            self.rebuild();
        } else if out_of_range {
            self.absorb();
            self.rebuild();
        }
    }

    /// Scatters `u_i K_ij v_j` into the full `[n, m]` plan (zero elsewhere).
    fn write_plan(&self, plan: &mut [f64], m: usize) {
        let ws = &*self.ws;
        for (ci, &i) in ws.rows.iter().enumerate() {
            let krow = &ws.kernel[ci * self.q..(ci + 1) * self.q];
            let u = ws.u[ci];
            for (cj, &j) in ws.cols.iter().enumerate() {
                plan[i * m + j] = u * krow[cj] * ws.v[cj];
            }
        }
    }
}

/// `log Σ exp(x)`, shifted by the maximum.
pub(crate) fn log_sum_exp(x: impl Iterator<Item = f64> + Clone) -> f64 {
    let mx = x.clone().fold(f64::NEG_INFINITY, f64::max);
    if mx == f64::NEG_INFINITY {
        return mx;
    }
    mx + x.map(|v| (v - mx).exp()).sum::<f64>().ln()
}

/// Dot product with four independent accumulators, so that the compiler can vectorise it (a single
/// accumulator imposes a sequential order on the floating-point additions).
#[inline]
pub(crate) fn dot(x: &[f64], y: &[f64]) -> f64 {
    let mut acc = [0.0f64; 4];
    let (xc, yc) = (x.chunks_exact(4), y.chunks_exact(4));
    let (xr, yr) = (xc.remainder(), yc.remainder());
    for (p, q) in xc.zip(yc) {
        for k in 0..4 {
            acc[k] += p[k] * q[k];
        }
    }
    let mut s = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    for (p, q) in xr.iter().zip(yr) {
        s += p * q;
    }
    s
}
