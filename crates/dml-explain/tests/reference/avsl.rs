//! `avsl` cases: the AVSL graph against a transcription of the authors' code (zbr17/AVSL @
//! 9436af5): per batch the embeddings, normalised embeddings, CAMs (whose spatial mean is the
//! embedding), certainty and batch links; the moving average over two batches; then on batch 2
//! the top-k edges and mask, reliability, nodes, per-level distances, the rectified top level,
//! `d̂`, the attribution `λ` with `Σλ = r`, and `d̂` of batch 1 under the first links.

use burn::tensor::{Device, Tensor, TensorData};
use dml_explain::avsl::certainty::{Certainty, certainty};
use dml_explain::avsl::graph::{LevelInput, Reliability, infer};
use dml_explain::avsl::link_star::link_star;
use dml_explain::avsl::links::{LinkMemory, batch_links};
use dml_models::{AvslLevel, AvslLevelOutput};
use dml_testkit::{Array, Case, Tolerance, get};
use serde_json::Value;

fn values<const D: usize>(t: Tensor<D>) -> Vec<f64> {
    t.into_data().iter::<f64>().collect()
}

fn tensor<const D: usize>(v: &Value, what: &str, device: &Device) -> Result<Tensor<D>, String> {
    let a = Array::from_json(v, what)?;
    let shape: [usize; D] = a
        .shape
        .clone()
        .try_into()
        .map_err(|_| format!("{what}: expected {D} dimensions, got {:?}", a.shape))?;
    Ok(Tensor::from_data(TensorData::new(a.to_f32(), shape), device))
}

/// The entries of a per-level JSON list (levels may differ in shape, so each is parsed alone).
fn levels(v: &Value, what: &str) -> Result<Vec<Value>, String> {
    v.as_array().cloned().ok_or(format!("{what} is not a list of levels"))
}

fn compare_levels<const D: usize>(tol: &Tolerance, exp: &Value, key: &str, got: &[Tensor<D>]) -> Result<(), String> {
    let want = levels(get(exp, key)?, key)?;
    if want.len() != got.len() {
        return Err(format!("{key}: {} levels, want {}", got.len(), want.len()));
    }
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let w = Array::from_json(w, key)?;
        tol.compare(&format!("{key}[{i}]"), &values(g.clone()), &w.data)?;
    }
    Ok(())
}

struct Batch {
    outputs: Vec<AvslLevelOutput>,
    certainty: Vec<Tensor<2>>,
    links: Vec<Tensor<2>>,
}

fn batch(levels_in: &[AvslLevel], features: &Value, device: &Device) -> Result<Batch, String> {
    let maps = levels(features, "features")?;
    let outputs: Vec<AvslLevelOutput> = maps
        .iter()
        .zip(levels_in)
        .map(|(z, level)| Ok(level.forward(tensor::<4>(z, "features", device)?)))
        .collect::<Result<_, String>>()?;
    let certainty = outputs
        .iter()
        .map(|o| certainty(o.cam.clone(), Certainty::Code))
        .collect();
    let links = outputs
        .windows(2)
        .map(|w| batch_links(w[0].cam.clone(), w[1].cam.clone()).map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    Ok(Batch {
        outputs,
        certainty,
        links,
    })
}

fn check_batch(tol: &Tolerance, exp: &Value, b: &Batch) -> Result<(), String> {
    let embeddings: Vec<Tensor<2>> = b.outputs.iter().map(|o| o.embedding.clone()).collect();
    compare_levels(tol, exp, "embeddings", &embeddings)?;
    let normalized: Vec<Tensor<2>> = embeddings
        .iter()
        .map(|e| e.clone() / e.clone().square().sum_dim(1).sqrt())
        .collect();
    compare_levels(tol, exp, "embeddings_normalized", &normalized)?;
    let cams: Vec<Tensor<4>> = b.outputs.iter().map(|o| o.cam.clone()).collect();
    compare_levels(tol, exp, "cams", &cams)?;
    // The invariant of Eq. 21: the CAM's spatial mean is the embedding.
    for (i, o) in b.outputs.iter().enumerate() {
        let [n, r, _, _] = o.cam.dims();
        let mean = values(o.cam.clone().mean_dim(3).mean_dim(2).reshape([n, r]));
        tol.compare(
            &format!("spatial mean of cams[{i}]"),
            &mean,
            &values(o.embedding.clone()),
        )?;
    }
    compare_levels(tol, exp, "certainty", &b.certainty)?;
    compare_levels(tol, exp, "links_batch", &b.links)
}

fn graph_levels(b: &Batch) -> Vec<LevelInput> {
    b.outputs
        .iter()
        .zip(&b.certainty)
        .map(|(o, c)| LevelInput {
            query: o.embedding.clone(),
            reference: o.embedding.clone(),
            query_certainty: c.clone(),
            reference_certainty: c.clone(),
        })
        .collect()
}

/// Checks one `avsl` case.
pub fn run(case: &Case) -> Result<(), String> {
    let device = Device::flex();
    let tol = case.tolerance()?;
    let inputs = case.field("inputs")?;
    let exp = case.field("expected")?;
    let config = case.field("config")?;
    let topk = get(config, "topk")?.as_u64().ok_or("config.topk")? as usize;
    let momentum = get(config, "momentum_m")?.as_f64().ok_or("config.momentum_m")?;
    let gamma = get(config, "prob_gamma")?.as_f64().ok_or("config.prob_gamma")?;
    let weights = levels(get(inputs, "conv_weight")?, "conv_weight")?;
    let biases = levels(get(inputs, "conv_bias")?, "conv_bias")?;
    let level_modules: Vec<AvslLevel> = weights
        .iter()
        .zip(&biases)
        .map(|(w, b)| {
            AvslLevel::from_weights(tensor(w, "conv_weight", &device)?, tensor(b, "conv_bias", &device)?)
                .map_err(|e| e.to_string())
        })
        .collect::<Result<_, String>>()?;
    let b1 = batch(&level_modules, get(inputs, "features_batch1")?, &device)?;
    let b2 = batch(&level_modules, get(inputs, "features_batch2")?, &device)?;
    check_batch(&tol, get(exp, "batch1")?, &b1).map_err(|e| format!("batch1: {e}"))?;
    check_batch(&tol, get(exp, "batch2")?, &b2).map_err(|e| format!("batch2: {e}"))?;

    let dims: Vec<usize> = b1.outputs.iter().map(|o| o.embedding.dims()[1]).collect();
    let mut memory = LinkMemory::new(&dims, momentum, &device).map_err(|e| e.to_string())?;
    memory.update(&b1.links).map_err(|e| e.to_string())?;
    compare_levels(&tol, exp, "links_after_step1", &memory.values())?;
    let step1 = memory.values();
    memory.update(&b2.links).map_err(|e| e.to_string())?;
    compare_levels(&tol, exp, "links_after_step2", &memory.values())?;

    let coefs = levels(get(inputs, "prob_coef")?, "prob_coef")?;
    let prob_biases = levels(get(inputs, "prob_bias")?, "prob_bias")?;
    let reliability: Vec<Reliability> = coefs
        .iter()
        .zip(&prob_biases)
        .skip(1)
        .map(|(c, b)| {
            Ok(Reliability {
                coef: tensor(c, "prob_coef", &device)?,
                bias: tensor(b, "prob_bias", &device)?,
            })
        })
        .collect::<Result<_, String>>()?;
    let star = |links: &[Tensor<2>]| -> Result<(Vec<Tensor<2>>, Vec<Tensor<2>>), String> {
        let pairs: Vec<(Tensor<2>, Tensor<2>)> = links
            .iter()
            .map(|l| link_star(l.clone(), topk).map_err(|e| e.to_string()))
            .collect::<Result<_, _>>()?;
        Ok(pairs.into_iter().unzip())
    };
    let (stars, masks) = star(&memory.values())?;
    compare_levels(&tol, exp, "link_star", &stars)?;
    compare_levels(&tol, exp, "topk_mask", &masks)?;
    let graph = infer(&graph_levels(&b2), &stars, &reliability, gamma).map_err(|e| e.to_string())?;
    compare_levels(&tol, exp, "reliability", &graph.reliability)?;
    compare_levels(&tol, exp, "nodes", &graph.nodes)?;
    compare_levels(&tol, exp, "level_distances", &graph.level_distances)?;
    tol.compare(
        "rectified_nodes_top",
        &values(graph.rectified_top.clone()),
        &Array::from_json(get(exp, "rectified_nodes_top")?, "rectified_nodes_top")?.data,
    )?;
    tol.compare(
        "d_hat",
        &values(graph.distance.clone()),
        &Array::from_json(get(exp, "d_hat")?, "d_hat")?.data,
    )?;
    let attribution = graph.attribution(&stars);
    compare_levels(&tol, exp, "attribution", &attribution)?;
    let sum = attribution
        .iter()
        .map(|a| a.clone().sum_dim(2).squeeze_dim::<2>(2))
        .reduce(|a, b| a + b)
        .ok_or("no level")?;
    tol.compare(
        "attribution_sum",
        &values(sum),
        &Array::from_json(get(exp, "attribution_sum")?, "attribution_sum")?.data,
    )?;
    // Property 1: d̂ = Σ_l Σ_r λ^l ⊙ δ^l.
    let recomposed = attribution
        .iter()
        .zip(&graph.nodes)
        .map(|(a, d)| (a.clone() * d.clone()).sum_dim(2).squeeze_dim::<2>(2))
        .reduce(|a, b| a + b)
        .ok_or("no level")?;
    tol.compare("Σ λ ⊙ δ", &values(recomposed), &values(graph.distance.clone()))?;

    let (stars1, _) = star(&step1)?;
    let graph1 = infer(&graph_levels(&b1), &stars1, &reliability, gamma).map_err(|e| e.to_string())?;
    tol.compare(
        "d_hat_step1_batch1",
        &values(graph1.distance),
        &Array::from_json(get(exp, "d_hat_step1_batch1")?, "d_hat_step1_batch1")?.data,
    )
}
