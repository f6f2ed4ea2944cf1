//! `nr_precision` cases (Kobs et al., Eq. 4–5 as the authors' `3D_cars/evaluate.py`):
//! embeddings `[n, d]` and several integer-coded properties; per property and query `R`, `p`,
//! the hits `X` among the `R` nearest other embeddings and `(X - R p) / sqrt(R p (1 - p))`;
//! NR-Precision (their mean) and R-Precision (mean `X / R`).

use dml_explain::analysis::nr_precision_many;
use serde_json::Value;

use crate::analysis_common::{all_fields_handled, array, compare, get, scalar};

/// Checks one case; `tol` is `(rel, abs)`.
pub fn run_nr_precision(case: &Value, tol: (f64, f64)) -> Result<(), String> {
    let (embeddings, shape) = array(case, "inputs.embeddings")?;
    let [_, dim] = shape[..] else {
        return Err(format!("inputs.embeddings has shape {shape:?}, want [n, d]"));
    };
    let embeddings: Vec<f32> = embeddings.iter().map(|&x| x as f32).collect();
    let properties = get(case, "inputs.properties")?
        .as_object()
        .ok_or("inputs.properties is not an object")?;
    let names: Vec<&String> = properties.keys().collect();
    let codes = names
        .iter()
        .map(|name| {
            let path = format!("inputs.properties.{name}");
            array(case, &path)?
                .0
                .iter()
                .map(|&v| {
                    // Integer codes stored as JSON numbers; anything else is a broken case.
                    (v >= 0.0 && v.fract() == 0.0 && v <= f64::from(u32::MAX))
                        .then_some(v as u32)
                        .ok_or_else(|| format!("{path}: {v} is not a u32 code"))
                })
                .collect::<Result<Vec<u32>, String>>()
        })
        .collect::<Result<Vec<_>, _>>()?;
    let refs: Vec<&[u32]> = codes.iter().map(Vec::as_slice).collect();
    let results = nr_precision_many(&embeddings, dim, &refs).map_err(|e| e.to_string())?;
    let expected = get(case, "expected")?;
    let handled: Vec<&str> = names.iter().map(|n| n.as_str()).collect();
    all_fields_handled(expected, "expected", &handled)?;
    for (name, m) in names.iter().zip(&results) {
        let path = |key: &str| format!("expected.{name}.{key}");
        if get(case, &format!("expected.{name}")).is_err() {
            return Err(format!("no expected values for property {name}"));
        }
        all_fields_handled(
            get(case, &format!("expected.{name}"))?,
            &format!("expected.{name}"),
            &[
                "nr_precision",
                "r_precision",
                "per_query_nr_precision",
                "per_query_hits",
                "per_query_R",
                "per_query_p",
            ],
        )?;
        // Every query of these cases has R ≥ 1; a skipped one would be NaN here and fail.
        let nr: Vec<f64> = m.per_query_nr_precision.iter().map(|z| z.unwrap_or(f64::NAN)).collect();
        let hits: Vec<f64> = m.per_query_hits.iter().map(|&x| x as f64).collect();
        let r: Vec<f64> = m.per_query_r.iter().map(|&x| x as f64).collect();
        let what = |key: &str| format!("{name}.{key}");
        compare(
            &what("per_query_nr_precision"),
            &nr,
            &array(case, &path("per_query_nr_precision"))?.0,
            tol,
        )?;
        compare(
            &what("per_query_hits"),
            &hits,
            &array(case, &path("per_query_hits"))?.0,
            tol,
        )?;
        compare(&what("per_query_R"), &r, &array(case, &path("per_query_R"))?.0, tol)?;
        compare(
            &what("per_query_p"),
            &m.per_query_p,
            &array(case, &path("per_query_p"))?.0,
            tol,
        )?;
        compare(
            &what("nr_precision"),
            &[m.nr_precision],
            &[scalar(case, &path("nr_precision"))?],
            tol,
        )?;
        compare(
            &what("r_precision"),
            &[m.r_precision],
            &[scalar(case, &path("r_precision"))?],
            tol,
        )?;
    }
    Ok(())
}
