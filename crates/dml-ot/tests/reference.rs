//! Every `sinkhorn` and `structural_similarity` reference case of `$DML_REFERENCE_DIR` (default: the
//! workspace's copied cases), run through every solver path of the crate.
//!
//! * `sinkhorn` (POT `ot.bregman.sinkhorn_log`, converged to 1e-13 in float64): the plan, transport
//!   cost and marginals from the host solver, the stabilised tensor solver, the pure log-domain tensor
//!   solver and the implicit path, all in `f64` on flex.
//! * `structural_similarity` (DIML Eq. 5–9 with a converged POT plan): the similarity matrix, both
//!   marginals, the plan, `s_struct` and the global cosine from [`Structural::forward`] (f64 tensors)
//!   and from [`Structural::decompose`] (host, from `f32` features).
//!
//! Everything is driven by each case's `config` and `inputs`, never by its file name.

use burn::tensor::{DType, Device, Tensor, TensorData};
use dml_ot::{Marginals, PlanGradient, SinkhornConfig, StructuralConfig};
use dml_testkit::{Array, Case, Report, Tolerance, cases_or_panic, get};

/// The solvers are run far below the cases' tolerance: POT stopped at 1e-13; our marginal error
/// target of 1e-12 keeps the plan error orders of magnitude under `abs 1e-6 + rel 1e-4`.
const SOLVER_TOLERANCE: f64 = 1e-12;

fn array(case: &Case, path: &str) -> Result<Array, String> {
    Array::from_json(get(&case.json, path)?, path)
}

fn number(case: &Case, path: &str) -> Result<f64, String> {
    get(&case.json, path)?
        .as_f64()
        .ok_or_else(|| format!("\"{path}\" is not a number"))
}

fn tensor<const D: usize>(values: &[f64], shape: [usize; D], device: &Device) -> Tensor<D> {
    Tensor::from_data(TensorData::new(values.to_vec(), shape), (device, DType::F64))
}

fn host(t: Tensor<3>) -> Vec<f64> {
    t.into_data().try_into_vec_as::<f64>().unwrap()
}

fn host1(t: Tensor<1>) -> Vec<f64> {
    t.into_data().try_into_vec_as::<f64>().unwrap()
}

fn host2(t: Tensor<2>) -> Vec<f64> {
    t.into_data().try_into_vec_as::<f64>().unwrap()
}

fn solver(eps: f64, absorb_every: usize, gradient: PlanGradient) -> SinkhornConfig {
    SinkhornConfig {
        eps,
        max_iters: 200_000,
        tolerance: SOLVER_TOLERANCE,
        check_every: 10,
        absorb_every,
        gradient,
        ..SinkhornConfig::default()
    }
}

fn run_sinkhorn(case: &Case) -> Result<(), String> {
    let tol = case.tolerance()?;
    let eps = number(case, "config.eps")?;
    let (a, b, cost) = (
        array(case, "inputs.a")?,
        array(case, "inputs.b")?,
        array(case, "inputs.cost")?,
    );
    let (n, m) = (a.data.len(), b.data.len());
    if cost.shape != [n, m] {
        return Err(format!("inputs.cost has shape {:?}, want [{n}, {m}]", cost.shape));
    }
    let want_plan = array(case, "expected.plan")?;
    let want_cost = number(case, "expected.transport_cost")?;
    let check = |what: &str, plan: &[f64], iterations: usize| -> Result<(), String> {
        tol.compare(&format!("{what} plan ({iterations} iterations)"), plan, &want_plan.data)?;
        let got_cost: f64 = plan.iter().zip(&cost.data).map(|(t, c)| t * c).sum();
        tol.compare(&format!("{what} transport_cost"), &[got_cost], &[want_cost])?;
        marginals_hold(what, plan, &a.data, &b.data, &tol)
    };

    let host_solver = solver(eps, 10, PlanGradient::Detached)
        .init()
        .map_err(|e| e.to_string())?;
    let solved = host_solver
        .solve_host(&cost.data, &a.data, &b.data, [1, n, m])
        .map_err(|e| format!("host: {e}"))?;
    check("host", solved.plan(0), solved.convergence[0].iterations)?;

    let device = Device::flex();
    for (what, absorb, gradient) in [
        ("stabilised tensor", 10, PlanGradient::Unrolled),
        ("log-domain tensor", 1, PlanGradient::Detached),
        ("implicit", 10, PlanGradient::Implicit),
    ] {
        let sinkhorn = solver(eps, absorb, gradient).init().map_err(|e| e.to_string())?;
        let out = sinkhorn.forward(
            tensor(&cost.data, [1, n, m], &device),
            tensor(&a.data, [1, n], &device),
            tensor(&b.data, [1, m], &device),
        );
        // Convergence is not required: nearly-permutation plans converge slowly, and the plan values
        // against the case's tolerance are the criterion. The message reports how far it got.
        let what = format!("{what} (marginal error {:.1e})", out.convergence[0].marginal_error);
        check(&what, &host(out.plan), out.iterations)?;
    }
    Ok(())
}

/// Row and column sums against the marginals, under the case's tolerance.
fn marginals_hold(what: &str, plan: &[f64], a: &[f64], b: &[f64], tol: &Tolerance) -> Result<(), String> {
    let m = b.len();
    let rows: Vec<f64> = plan.chunks_exact(m).map(|r| r.iter().sum()).collect();
    let cols: Vec<f64> = (0..m).map(|j| plan.chunks_exact(m).map(|r| r[j]).sum()).collect();
    tol.compare(&format!("{what} row marginal"), &rows, a)?;
    tol.compare(&format!("{what} column marginal"), &cols, b)
}

fn run_structural(case: &Case) -> Result<(), String> {
    let tol = case.tolerance()?;
    let eps = number(case, "config.eps")?;
    let marginals = match get(&case.json, "config.marginals")?.as_str() {
        Some("uniform") => Marginals::Uniform,
        Some("cross_correlation") => Marginals::CrossCorrelation,
        other => return Err(format!("unknown config.marginals {other:?}")),
    };
    let (source, target) = (array(case, "inputs.source")?, array(case, "inputs.target")?);
    let (&[n, d], &[m, d_t]) = (source.shape.as_slice(), target.shape.as_slice()) else {
        return Err(format!(
            "inputs must be [locations, channels], got {:?} and {:?}",
            source.shape, target.shape
        ));
    };
    if d != d_t {
        return Err(format!("channels differ: {d} vs {d_t}"));
    }
    let want_s = array(case, "expected.similarity_matrix")?;
    let want_mu_s = array(case, "expected.mu_source")?;
    let want_mu_t = array(case, "expected.mu_target")?;
    let want_plan = array(case, "expected.plan")?;
    let want_struct = number(case, "expected.structural_similarity")?;
    let want_global = number(case, "expected.global_cosine")?;

    let config = StructuralConfig {
        sinkhorn: solver(eps, 10, PlanGradient::Unrolled),
        marginals,
    };
    let structural = config.init().map_err(|e| e.to_string())?;

    let device = Device::flex();
    let out = structural.forward(
        tensor(&source.data, [1, n, d], &device),
        tensor(&target.data, [1, m, d], &device),
    );
    let tensor_what = format!("tensor (marginal error {:.1e})", out.convergence[0].marginal_error);
    let tensor_what = tensor_what.as_str();
    tol.compare(
        &format!("{tensor_what} similarity_matrix"),
        &host(out.similarity_matrix),
        &want_s.data,
    )?;
    tol.compare(
        &format!("{tensor_what} mu_source"),
        &host2(out.mu_source),
        &want_mu_s.data,
    )?;
    tol.compare(
        &format!("{tensor_what} mu_target"),
        &host2(out.mu_target),
        &want_mu_t.data,
    )?;
    tol.compare(&format!("{tensor_what} plan"), &host(out.plan), &want_plan.data)?;
    tol.compare(
        &format!("{tensor_what} structural_similarity"),
        &host1(out.similarity),
        &[want_struct],
    )?;
    tol.compare(
        &format!("{tensor_what} global_cosine"),
        &host1(out.global_cosine),
        &[want_global],
    )?;

    let decomposition = structural
        .decompose(&source.to_f32(), [1, n], &target.to_f32(), [1, m], d, 3)
        .map_err(|e| format!("decompose: {e}"))?;
    tol.compare(
        "decompose similarity_matrix",
        &decomposition.similarity_matrix,
        &want_s.data,
    )?;
    tol.compare("decompose mu_source", &decomposition.mu_source, &want_mu_s.data)?;
    tol.compare("decompose mu_target", &decomposition.mu_target, &want_mu_t.data)?;
    tol.compare("decompose plan", &decomposition.plan, &want_plan.data)?;
    tol.compare(
        "decompose structural_similarity",
        &[decomposition.structural_similarity],
        &[want_struct],
    )?;
    tol.compare(
        "decompose global_cosine",
        &[decomposition.global_cosine],
        &[want_global],
    )?;
    Ok(())
}

#[test]
fn every_reference_case_reproduces() {
    let cases = cases_or_panic("reference", &["sinkhorn", "structural_similarity"]);
    let mut report = Report::new();
    for case in &cases {
        let outcome = match case.kind() {
            "sinkhorn" => run_sinkhorn(case),
            _ => run_structural(case),
        };
        report.record(case, outcome);
    }
    let passed = report.passed();
    report.finish("dml-ot sinkhorn/structural_similarity");
    assert_eq!(passed, cases.len());
}
