//! `explanation_metric` cases (Quantus 0.6 on fixed maps and masks, `normalise=False`): one score
//! per map for the metric `config.metric` names, against `dml_explain::metrics`.

use dml_explain::metrics;
use serde_json::Value;

use crate::analysis_common::{all_fields_handled, array, compare, get, scalar};

/// Checks one case; `tol` is `(rel, abs)`.
pub fn run_explanation_metric(case: &Value, tol: (f64, f64)) -> Result<(), String> {
    let (maps, shape) = array(case, "inputs.maps")?;
    let (masks, mask_shape) = array(case, "inputs.masks")?;
    if shape.len() != 3 || shape != mask_shape {
        return Err(format!(
            "maps {shape:?} and masks {mask_shape:?} must both be [B, H, W]"
        ));
    }
    let (b, h, w) = (shape[0], shape[1], shape[2]);
    let metric = get(case, "config.metric")?
        .as_str()
        .ok_or("config.metric is not a string")?;
    let mut scores = Vec::with_capacity(b);
    for i in 0..b {
        let map = &maps[i * h * w..(i + 1) * h * w];
        let mask: Vec<bool> = masks[i * h * w..(i + 1) * h * w].iter().map(|&m| m > 0.5).collect();
        let score = match metric {
            "pointing_game" => metrics::pointing_game(map, &mask, h, w),
            "attribution_localisation" | "relevance_mass_accuracy" => {
                metrics::relevance_mass_accuracy(map, &mask, h, w)
            }
            "top_k_intersection" => {
                let k = scalar(case, "config.k")? as usize;
                metrics::top_k_intersection(map, &mask, h, w, k)
            }
            "relevance_rank_accuracy" => metrics::relevance_rank_accuracy(map, &mask, h, w),
            "auc" => metrics::roc_auc(map, &mask, h, w),
            "sparseness" => metrics::sparseness(map, h, w),
            "complexity" => metrics::complexity(map, h, w),
            "effective_complexity" => metrics::effective_complexity(map, h, w, scalar(case, "config.eps")?),
            other => return Err(format!("no metric named {other:?}")),
        };
        scores.push(score.map_err(|e| format!("map {i}: {e}"))?);
    }
    all_fields_handled(get(case, "expected")?, "expected", &["scores"])?;
    compare(metric, &scores, &array(case, "expected.scores")?.0, tol)
}
