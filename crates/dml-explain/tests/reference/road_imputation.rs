//! `road_imputation` cases (pytorch-grad-cam's copy of ROAD's `NoisyLinearImputer`, noise 0,
//! float32): the image with its removed pixels imputed, against
//! `dml_explain::metrics::noisy_linear_imputation`.

use dml_explain::metrics;
use serde_json::Value;

use crate::analysis_common::{all_fields_handled, array, compare, get, scalar};

/// Checks one case; `tol` is `(rel, abs)`.
pub fn run_road_imputation(case: &Value, tol: (f64, f64)) -> Result<(), String> {
    let (image, shape) = array(case, "inputs.image")?;
    let (removed, removed_shape) = array(case, "inputs.removed")?;
    if shape.len() != 3 || removed_shape != shape[1..] {
        return Err(format!(
            "image {shape:?} must be [C, H, W] and removed {removed_shape:?} [H, W]"
        ));
    }
    let (c, h, w) = (shape[0], shape[1], shape[2]);
    let image: Vec<f32> = image.iter().map(|&v| v as f32).collect();
    let removed: Vec<bool> = removed.iter().map(|&v| v > 0.5).collect();
    let noise = scalar(case, "config.noise")? as f32;
    let out = metrics::noisy_linear_imputation(&image, &removed, c, h, w, noise, 0).map_err(|e| e.to_string())?;
    all_fields_handled(get(case, "expected")?, "expected", &["image"])?;
    let got: Vec<f64> = out.iter().map(|&v| f64::from(v)).collect();
    compare("image", &got, &array(case, "expected.image")?.0, tol)
}
