//! `saliency_comparison` cases (Kobs et al., Sec. 3.1; numpy/scipy, as the authors'
//! `compare_gradients.py` and `create_stats_table.py`): two models' maps `[n, h, w]` of the same
//! images; per image the Pearson correlation, its Fisher z and the JSD (nats and bits); the
//! Fisher-z mean and spread (ddof 0) and the mean JSDs.

use dml_explain::analysis::{compare_maps, comparison_matrix};
use serde_json::Value;

use crate::analysis_common::{all_fields_handled, array, compare, get, scalar};

/// Checks one case; `tol` is `(rel, abs)`.
pub fn run_saliency_comparison(case: &Value, tol: (f64, f64)) -> Result<(), String> {
    let maps_a = maps(case, "inputs.maps_a")?;
    let maps_b = maps(case, "inputs.maps_b")?;
    let c = compare_maps(&maps_a, &maps_b).map_err(|e| e.to_string())?;
    let expected = get(case, "expected")?;
    all_fields_handled(
        expected,
        "expected",
        &[
            "pearson",
            "fisher_z",
            "fisher_mean",
            "fisher_std",
            "jsd_nats",
            "jsd_bits",
            "mean_jsd_nats",
            "mean_jsd_bits",
        ],
    )?;
    let nats: Vec<f64> = c.jsd.iter().map(|j| j.nats).collect();
    let bits: Vec<f64> = c.jsd.iter().map(|j| j.bits).collect();
    compare("pearson", &c.pearson, &array(case, "expected.pearson")?.0, tol)?;
    compare("fisher_z", &c.fisher_z, &array(case, "expected.fisher_z")?.0, tol)?;
    compare("jsd_nats", &nats, &array(case, "expected.jsd_nats")?.0, tol)?;
    compare("jsd_bits", &bits, &array(case, "expected.jsd_bits")?.0, tol)?;
    let scalars = [
        ("fisher_mean", c.correlation.mean),
        ("fisher_std", c.correlation.spread),
        ("mean_jsd_nats", c.mean_jsd.nats),
        ("mean_jsd_bits", c.mean_jsd.bits),
    ];
    for (key, got) in scalars {
        compare(key, &[got], &[scalar(case, &format!("expected.{key}"))?], tol)?;
    }
    // The matrix helper over the two "models" must give the same pair statistics off the
    // diagonal, and the self-comparison on it.
    let m = comparison_matrix(&[maps_a, maps_b]).map_err(|e| e.to_string())?;
    let (r01, j01) = (m.correlation_at(0, 1), m.mean_jsd_at(1, 0));
    compare(
        "matrix fisher_mean",
        &[r01.mean],
        &[scalar(case, "expected.fisher_mean")?],
        tol,
    )?;
    compare(
        "matrix fisher_std",
        &[r01.spread],
        &[scalar(case, "expected.fisher_std")?],
        tol,
    )?;
    compare(
        "matrix mean_jsd_nats",
        &[j01.nats],
        &[scalar(case, "expected.mean_jsd_nats")?],
        tol,
    )?;
    compare(
        "matrix diagonal",
        &[m.correlation_at(1, 1).mean, m.mean_jsd_at(0, 0).nats],
        &[1.0, 0.0],
        tol,
    )
}

/// `[n, h, w]` (or `[n, k]`) maps as `n` flat `f32` maps.
fn maps(case: &Value, path: &str) -> Result<Vec<Vec<f32>>, String> {
    let (data, shape) = array(case, path)?;
    let n = *shape
        .first()
        .ok_or_else(|| format!("{path} is a scalar, want [n, h, w]"))?;
    // An empty list (n = 0) gives no maps, which `compare_maps` reports.
    let per_map = data.len().checked_div(n).unwrap_or(0);
    Ok(data
        .chunks(per_map.max(1))
        .map(|m| m.iter().map(|&x| x as f32).collect())
        .collect())
}
