//! `map_similarity` cases (SciPy's `spearmanr` and scikit-image's `structural_similarity` at
//! their defaults on pairs of signed maps): Spearman of the maps and of their magnitudes, and
//! SSIM, one value per pair, against `dml_explain::metrics`.

use dml_explain::metrics;
use serde_json::Value;

use crate::analysis_common::{all_fields_handled, array, compare, get};

/// Checks one case; `tol` is `(rel, abs)`.
pub fn run_map_similarity(case: &Value, tol: (f64, f64)) -> Result<(), String> {
    let (a, shape) = array(case, "inputs.a")?;
    let (b, b_shape) = array(case, "inputs.b")?;
    if shape.len() != 3 || shape != b_shape {
        return Err(format!("a {shape:?} and b {b_shape:?} must both be [B, H, W]"));
    }
    let (n, h, w) = (shape[0], shape[1], shape[2]);
    let (mut signed, mut magnitude, mut ssim) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..n {
        let (x, y) = (&a[i * h * w..(i + 1) * h * w], &b[i * h * w..(i + 1) * h * w]);
        let err = |e: dml_explain::faithfulness::FaithError| format!("pair {i}: {e}");
        signed.push(metrics::spearman(x, y, h, w, false).map_err(err)?);
        magnitude.push(metrics::spearman(x, y, h, w, true).map_err(err)?);
        ssim.push(metrics::ssim(x, y, h, w).map_err(err)?);
    }
    all_fields_handled(
        get(case, "expected")?,
        "expected",
        &["spearman", "spearman_abs", "ssim"],
    )?;
    compare("spearman", &signed, &array(case, "expected.spearman")?.0, tol)?;
    compare(
        "spearman_abs",
        &magnitude,
        &array(case, "expected.spearman_abs")?.0,
        tol,
    )?;
    compare("ssim", &ssim, &array(case, "expected.ssim")?.0, tol)
}
