//! Helpers of the analysis kinds' checkers (`saliency_comparison`, `nr_precision`,
//! `mann_whitney`): thin adapters over `dml_testkit`'s JSON lookup, array parsing and tolerance rule,
//! and a check that every expected field was compared (a case with a field no checker reads must
//! not pass silently).

use dml_testkit::{Array, Case, Tolerance};
use serde_json::Value;

pub use dml_testkit::get;

/// Checks one case with its `(rel, abs)` tolerance; the error says what differs.
pub type Runner = fn(&Value, (f64, f64)) -> Result<(), String>;

/// Runs `runner` on `case` with the case's tolerance.
pub fn run_with(case: &Case, runner: Runner) -> Result<(), String> {
    let tol = case.tolerance()?;
    runner(&case.json, (tol.rel, tol.abs))
}

/// A number or a rectangular nested array of numbers at `path`, flattened row-major, with its
/// shape.
pub fn array(v: &Value, path: &str) -> Result<(Vec<f64>, Vec<usize>), String> {
    let a = Array::from_json(get(v, path)?, path)?;
    Ok((a.data, a.shape))
}

/// A scalar number at `path`.
pub fn scalar(v: &Value, path: &str) -> Result<f64, String> {
    get(v, path)?.as_f64().ok_or_else(|| format!("{path} is not a number"))
}

/// Compares equally long arrays elementwise with the reference rule (`Tolerance::compare`).
pub fn compare(what: &str, got: &[f64], want: &[f64], (rel, abs): (f64, f64)) -> Result<(), String> {
    Tolerance { rel, abs }.compare(what, got, want)
}

/// Fails when `expected` holds a field that `handled` does not list, so that no expected value
/// goes unchecked.
pub fn all_fields_handled(expected: &Value, what: &str, handled: &[&str]) -> Result<(), String> {
    let object = expected.as_object().ok_or_else(|| format!("{what} is not an object"))?;
    match object.keys().find(|k| !handled.contains(&k.as_str())) {
        Some(k) => Err(format!("{what}.{k} is not compared by this harness")),
        None => Ok(()),
    }
}
