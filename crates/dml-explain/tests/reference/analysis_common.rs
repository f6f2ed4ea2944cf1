//! Helpers of the analysis kinds' checkers (`saliency_comparison`, `nr_precision`,
//! `mann_whitney`): JSON lookups, a comparison that records the worst margin, and a check that
//! every expected field was compared (a case with a field no checker reads must not pass silently).

use std::cell::Cell;

use serde_json::Value;

/// Checks one case with its `(rel, abs)` tolerance; the error says what differs.
pub type Runner = fn(&Value, (f64, f64)) -> Result<(), String>;

thread_local! {
    /// The largest `|got - want| / (abs + rel |want|)` of the case being checked (1 is the edge
    /// of the tolerance), reported beside each passing case to show the margin.
    pub static WORST_RATIO: Cell<f64> = const { Cell::new(0.0) };
}

/// Runs `runner` on `case` with the case's tolerance.
pub fn run_with(case: &Value, runner: Runner) -> Result<(), String> {
    WORST_RATIO.set(0.0);
    tolerance(case).and_then(|tol| runner(case, tol))
}

/// The case's `{"rel": r, "abs": a}` as `(rel, abs)`.
fn tolerance(case: &Value) -> Result<(f64, f64), String> {
    let t = get(case, "tolerance")?;
    match (
        t.get("rel").and_then(Value::as_f64),
        t.get("abs").and_then(Value::as_f64),
    ) {
        (Some(rel), Some(abs)) => Ok((rel, abs)),
        _ => Err(format!("tolerance must have numeric \"rel\" and \"abs\", got {t}")),
    }
}

/// A JSON path lookup `a.b.c`, with an error naming the missing key.
pub fn get<'a>(v: &'a Value, path: &str) -> Result<&'a Value, String> {
    path.split('.').try_fold(v, |cur, key| {
        cur.get(key).ok_or_else(|| format!("missing \"{path}\" (no \"{key}\")"))
    })
}

/// A number or a rectangular nested array of numbers, flattened row-major, with its shape.
pub fn array(v: &Value, path: &str) -> Result<(Vec<f64>, Vec<usize>), String> {
    fn flatten(v: &Value, path: &str, depth: usize, shape: &mut Vec<usize>, out: &mut Vec<f64>) -> Result<(), String> {
        match v {
            Value::Array(items) => {
                if shape.len() == depth {
                    shape.push(items.len());
                } else if shape.get(depth) != Some(&items.len()) {
                    return Err(format!("{path} is not rectangular at depth {depth}"));
                }
                items
                    .iter()
                    .try_for_each(|item| flatten(item, path, depth + 1, shape, out))
            }
            Value::Number(n) if depth == shape.len() => {
                out.push(
                    n.as_f64()
                        .ok_or_else(|| format!("{path}: {n} is not a finite number"))?,
                );
                Ok(())
            }
            other => Err(format!("{path}: unexpected {other} at depth {depth}")),
        }
    }
    let (mut data, mut shape) = (Vec::new(), Vec::new());
    flatten(get(v, path)?, path, 0, &mut shape, &mut data)?;
    Ok((data, shape))
}

/// A scalar number at `path`.
pub fn scalar(v: &Value, path: &str) -> Result<f64, String> {
    get(v, path)?.as_f64().ok_or_else(|| format!("{path} is not a number"))
}

/// Compares equally long arrays elementwise with `|got - want| <= abs + rel |want|` (NaN never
/// passes); on failure names `what`, the number of bad elements and the worst one.
pub fn compare(what: &str, got: &[f64], want: &[f64], (rel, abs): (f64, f64)) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(format!("{what}: got {} values, want {}", got.len(), want.len()));
    }
    // How far outside the tolerance a value is (≤ 0 inside); NaN counts as infinitely far.
    let excess = |g: f64, w: f64| {
        let e = (g - w).abs() - abs - rel * w.abs();
        if e.is_nan() { f64::INFINITY } else { e }
    };
    let ratio = |i: usize| (got[i] - want[i]).abs() / (abs + rel * want[i].abs());
    let worst = (0..got.len()).map(ratio).fold(0.0, f64::max);
    WORST_RATIO.set(WORST_RATIO.get().max(worst));
    let bad: Vec<usize> = (0..got.len()).filter(|&i| excess(got[i], want[i]) > 0.0).collect();
    match bad
        .iter()
        .copied()
        .max_by(|&i, &j| excess(got[i], want[i]).total_cmp(&excess(got[j], want[j])))
    {
        None => Ok(()),
        Some(i) => Err(format!(
            "{what}: {} of {} values outside abs {abs} + rel {rel}; worst at flat index {i}: got {} want {}",
            bad.len(),
            got.len(),
            got[i],
            want[i]
        )),
    }
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
