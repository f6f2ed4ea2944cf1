//! Reference harness: checks `evaluate` against values computed by pytorch-metric-learning.
//!
//! Reads every `*.json` file in `$DML_REFERENCE_DIR` (default: the workspace's
//! `tests/fixtures/reference`), keeps the cases whose `"kind"` is `"accuracy"` and compares every expected
//! metric with `|got - want| <= abs + rel * |want|` from the case's `tolerance`. All failures are collected
//! and reported together (file, metric, got, want); the test also fails when no accuracy case is found, so
//! a wrong directory cannot pass silently.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use dml_eval::{AccuracyConfig, Distance, Embeddings, EvalSets, KPolicy, Metric, evaluate};
use serde_json::Value;

/// The fixture directory: `$DML_REFERENCE_DIR` or the workspace default.
fn reference_dir() -> PathBuf {
    dml_testkit::reference_dir("reference")
}

/// A `rows × dim` matrix from a JSON array of equally long number arrays, as `f32` (PML evaluated float32
/// embeddings).
fn matrix(v: &Value, what: &str) -> Result<(Vec<f32>, usize, usize), String> {
    let rows = v.as_array().ok_or_else(|| format!("inputs.{what} is not an array"))?;
    let dim = rows.first().and_then(Value::as_array).map_or(0, Vec::len);
    let mut data = Vec::with_capacity(rows.len() * dim);
    for (i, r) in rows.iter().enumerate() {
        let r = r
            .as_array()
            .ok_or_else(|| format!("inputs.{what}[{i}] is not an array"))?;
        if r.len() != dim {
            return Err(format!("inputs.{what}[{i}] has {} values, row 0 has {dim}", r.len()));
        }
        for (j, x) in r.iter().enumerate() {
            data.push(
                x.as_f64()
                    .ok_or_else(|| format!("inputs.{what}[{i}][{j}] is not a number"))? as f32,
            );
        }
    }
    Ok((data, rows.len(), dim))
}

/// Integer labels mapped to dense `u32` ids (only equality matters), shared across query and reference.
fn labels(v: &Value, what: &str, ids: &mut HashMap<i64, u32>) -> Result<Vec<u32>, String> {
    let arr = v.as_array().ok_or_else(|| format!("inputs.{what} is not an array"))?;
    arr.iter()
        .enumerate()
        .map(|(i, l)| {
            let l = l
                .as_i64()
                .ok_or_else(|| format!("inputs.{what}[{i}] is not an integer"))?;
            let next = ids.len() as u32;
            Ok(*ids.entry(l).or_insert(next))
        })
        .collect()
}

/// The metric of an expected key (PML's metric names).
fn metric_of(name: &str) -> Option<Metric> {
    Some(match name {
        "precision_at_1" => Metric::PrecisionAt1,
        "r_precision" => Metric::RPrecision,
        "mean_average_precision_at_r" => Metric::MeanAveragePrecisionAtR,
        "mean_average_precision" => Metric::MeanAveragePrecision,
        "mean_reciprocal_rank" => Metric::MeanReciprocalRank,
        _ => {
            let k = name.strip_prefix("recall_at_")?.parse().ok()?;
            Metric::RecallAt(k)
        }
    })
}

/// Runs one accuracy case; returns per-metric failures, or `Err` when the case itself is unusable.
fn run_case(case: &Value) -> Result<Vec<String>, String> {
    let config = case.get("config").ok_or("missing \"config\"")?;
    let distance = match config.get("distance").and_then(Value::as_str) {
        Some("euclidean") => Distance::Euclidean,
        Some("cosine") => Distance::Cosine,
        other => {
            return Err(format!(
                "unsupported config.distance {other:?} (expected \"euclidean\" or \"cosine\")"
            ));
        }
    };
    let same = config
        .get("query_is_reference")
        .and_then(Value::as_bool)
        .ok_or("config.query_is_reference must be true or false")?;
    let k = match config.get("k") {
        Some(Value::String(s)) if s == "max_bin_count" => KPolicy::MaxBinCount,
        Some(Value::Number(n)) if n.as_u64().is_some_and(|k| k > 0) => KPolicy::Fixed(n.as_u64().unwrap_or(0) as usize),
        Some(Value::Null) => KPolicy::All,
        other => {
            return Err(format!(
                "unsupported config.k {other:?} (expected \"max_bin_count\", a positive integer or null)"
            ));
        }
    };
    let expected = case
        .get("expected")
        .and_then(Value::as_object)
        .ok_or("missing \"expected\" object")?;
    let tol = case.get("tolerance").ok_or("missing \"tolerance\"")?;
    let (rel, abs) = match (
        tol.get("rel").and_then(Value::as_f64),
        tol.get("abs").and_then(Value::as_f64),
    ) {
        (Some(r), Some(a)) => (r, a),
        _ => return Err(format!("tolerance must have numeric \"rel\" and \"abs\", got {tol}")),
    };
    let mut metrics = Vec::new();
    for name in expected.keys() {
        metrics.push(metric_of(name).ok_or_else(|| format!("unknown expected metric {name:?}"))?);
    }
    let inputs = case.get("inputs").ok_or("missing \"inputs\"")?;
    let field = |name: &str| {
        inputs.get(name).ok_or_else(|| {
            let keys: Vec<&String> = inputs.as_object().map(|o| o.keys().collect()).unwrap_or_default();
            format!("inputs.{name} missing (inputs has {keys:?})")
        })
    };
    let mut ids = HashMap::new();
    let cfg = AccuracyConfig::new(distance).with_k(k).with_metrics(metrics);
    let report = if same {
        let (data, rows, dim) = matrix(field("embeddings")?, "embeddings")?;
        let l = labels(field("labels")?, "labels", &mut ids)?;
        let e = Embeddings::new(&data, rows, dim).map_err(|e| e.to_string())?;
        evaluate(
            &EvalSets::QueryIsReference {
                embeddings: e,
                labels: &l,
            },
            &cfg,
        )
    } else {
        let (qd, qr, qdim) = matrix(field("query")?, "query")?;
        let (rd, rr, rdim) = matrix(field("reference")?, "reference")?;
        let ql = labels(field("query_labels")?, "query_labels", &mut ids)?;
        let rl = labels(field("reference_labels")?, "reference_labels", &mut ids)?;
        let q = Embeddings::new(&qd, qr, qdim).map_err(|e| e.to_string())?;
        let g = Embeddings::new(&rd, rr, rdim).map_err(|e| e.to_string())?;
        evaluate(
            &EvalSets::QueryGallery {
                query: q,
                query_labels: &ql,
                gallery: g,
                gallery_labels: &rl,
            },
            &cfg,
        )
    }
    .map_err(|e| format!("evaluate failed: {e}"))?;

    let mut failures = Vec::new();
    for (name, want) in expected {
        let got = match metric_of(name) {
            Some(Metric::PrecisionAt1) => report.precision_at_1,
            Some(Metric::RPrecision) => report.r_precision,
            Some(Metric::MeanAveragePrecisionAtR) => report.mean_average_precision_at_r,
            Some(Metric::MeanAveragePrecision) => report.mean_average_precision,
            Some(Metric::MeanReciprocalRank) => report.mean_reciprocal_rank,
            Some(Metric::RecallAt(k)) => report.recall_at_k.get(&k).copied(),
            _ => None,
        };
        let Some(got) = got else {
            failures.push(format!("{name}: not computed"));
            continue;
        };
        // PML reports NaN (serialised as null) when every query is lone.
        let ok = match want.as_f64() {
            Some(w) => (got - w).abs() <= abs + rel * w.abs(),
            None => want.is_null() && got.is_nan(),
        };
        if !ok {
            failures.push(format!(
                "{name}: got {got} want {want} (tolerance abs {abs} + rel {rel})"
            ));
        }
    }
    Ok(failures)
}

#[test]
fn accuracy_matches_pytorch_metric_learning() {
    let dir = reference_dir();
    let mut files: Vec<PathBuf> = match std::fs::read_dir(&dir) {
        Ok(rd) => rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect(),
        Err(e) => panic!("cannot read reference directory {}: {e}", dir.display()),
    };
    files.sort();
    let name = |p: &Path| {
        p.file_name()
            .map_or_else(|| p.display().to_string(), |n| n.to_string_lossy().into_owned())
    };
    let mut failures = Vec::new();
    let mut cases = 0;
    for path in &files {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) => {
                failures.push(format!("{}: unreadable: {e}", name(path)));
                continue;
            }
        };
        let case: Value = match serde_json::from_str(&text) {
            Ok(v) => v,
            Err(e) => {
                failures.push(format!("{}: invalid JSON: {e}", name(path)));
                continue;
            }
        };
        if case.get("kind").and_then(Value::as_str) != Some("accuracy") {
            continue;
        }
        cases += 1;
        match run_case(&case) {
            Ok(f) => failures.extend(f.into_iter().map(|m| format!("{}: {m}", name(path)))),
            Err(e) => failures.push(format!("{}: {e}", name(path))),
        }
    }
    eprintln!(
        "reference: {cases} accuracy case(s) of {} JSON file(s) in {}",
        files.len(),
        dir.display()
    );
    assert!(
        cases > 0,
        "no \"kind\": \"accuracy\" case found in {} ({} JSON files)",
        dir.display(),
        files.len()
    );
    assert!(
        failures.is_empty(),
        "{} failure(s) in {cases} accuracy case(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
}
