//! `mann_whitney` cases (scipy `mannwhitneyu(x, y, use_continuity=True,
//! method="asymptotic")`, the test of Kobs et al., Sec. 4.2): samples with ties; `U1`, `U2`,
//! the null mean and tie-corrected deviation of `U`, the tie-group sizes and the two-sided,
//! "greater" and "less" p-values.

use dml_explain::analysis::mann_whitney_u;
use serde_json::Value;

use crate::analysis_common::{all_fields_handled, array, compare, get, scalar};

/// Checks one case; `tol` is `(rel, abs)`.
pub fn run_mann_whitney(case: &Value, tol: (f64, f64)) -> Result<(), String> {
    let x = array(case, "inputs.x")?.0;
    let y = array(case, "inputs.y")?.0;
    let t = mann_whitney_u(&x, &y).map_err(|e| e.to_string())?;
    let scalars = [
        ("U1", t.u1),
        ("U2", t.u2),
        ("mean_U", t.mean_u),
        ("sd_U_tie_corrected", t.sd_u),
        ("p_two_sided", t.p_two_sided),
        ("p_greater", t.p_greater),
        ("p_less", t.p_less),
    ];
    let mut handled: Vec<&str> = scalars.iter().map(|(k, _)| *k).collect();
    handled.push("tie_group_sizes");
    all_fields_handled(get(case, "expected")?, "expected", &handled)?;
    for (key, got) in scalars {
        compare(key, &[got], &[scalar(case, &format!("expected.{key}"))?], tol)?;
    }
    // Only the multiset of sizes enters the tie correction; the oracle lists the sizes sorted,
    // the function in the order of the tied values, so both are compared sorted.
    let mut ties: Vec<f64> = t.tie_group_sizes.iter().map(|&s| s as f64).collect();
    let mut want = array(case, "expected.tie_group_sizes")?.0;
    ties.sort_by(f64::total_cmp);
    want.sort_by(f64::total_cmp);
    compare("tie_group_sizes (sorted)", &ties, &want, tol)
}
