//! `smoothgrad` cases: SmoothGrad saliency against a black base image (Kobs et al., Eq. 1–2) with
//! the case's noise, against the authors' explainer (PyTorch): the noise scale, each noisy copy's
//! distance, the mean gradient, the paper's and the code's raw maps, their 99th percentiles and the
//! normalised maps.

use burn::tensor::{Device, Tensor};
use dml_explain::saliency::smoothgrad::{MapOrder, smoothgrad_with_noise};
use dml_losses::Distance;
use dml_testkit::{Case, get};

use crate::similarity_attention::{array, model, tensor};

/// Checks one `smoothgrad` case.
pub fn run(case: &Case) -> Result<(), String> {
    let device = Device::flex().autodiff();
    let tol = case.tolerance()?;
    let inputs = case.field("inputs")?;
    let exp = case.field("expected")?;
    let distance = match get(case.field("config")?, "distance")?.as_str() {
        Some("euclidean") => Distance::euclidean(),
        Some("cosine") => Distance::Cosine { power: 1.0 },
        other => return Err(format!("unknown config.distance {other:?}")),
    };
    let model = model(case, &device)?;
    let image: Tensor<3> = tensor(&array(inputs, "image")?, &device)?;
    let base: Tensor<3> = tensor(&array(inputs, "base_image")?, &device)?;
    let noise: Tensor<4> = tensor(&array(inputs, "noise")?, &device)?;
    let sg = smoothgrad_with_noise(&model, image, base, noise, 0.15, &distance).map_err(|e| e.to_string())?;
    let scalar = |key: &str| get(exp, key)?.as_f64().ok_or(format!("expected.{key} is not a number"));
    let f64s = |v: &[f32]| v.iter().map(|&x| f64::from(x)).collect::<Vec<_>>();
    tol.compare("sigma", &[sg.sigma], &[scalar("sigma")?])?;
    tol.compare("distances", &f64s(&sg.distances), &array(exp, "distances")?.data)?;
    tol.compare("grad_mean", &f64s(&sg.grad_mean), &array(exp, "grad_mean")?.data)?;
    tol.compare(
        "paper_map_raw",
        &f64s(&sg.paper_map_raw),
        &array(exp, "paper_map_raw")?.data,
    )?;
    tol.compare(
        "code_map_raw",
        &f64s(&sg.code_map_raw),
        &array(exp, "code_map_raw")?.data,
    )?;
    for (order, key) in [(MapOrder::Paper, "paper"), (MapOrder::Code, "code")] {
        let (map, p99) = sg.map(order).map_err(|e| e.to_string())?;
        tol.compare(&format!("{key}_p99"), &[p99], &[scalar(&format!("{key}_p99"))?])?;
        tol.compare(
            &format!("{key}_map"),
            &f64s(&map),
            &array(exp, &format!("{key}_map"))?.data,
        )?;
    }
    Ok(())
}
