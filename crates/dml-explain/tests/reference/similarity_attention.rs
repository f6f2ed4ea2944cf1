//! `similarity_attention` cases: similarity attention against PyTorch (Zheng et al., Eq. 1–3): every `similarity_attention`
//! case in `$DML_REFERENCE_DIR` (default: the workspace's `tests/fixtures/reference`).
//!
//! A case carries a tiny torchvision ResNet-18 (a `.pth` beside the case, in `../weights/`, or in
//! the workspace's `tests/fixtures/weights`), a head `f = normalize(W GAP(layer4) + b)`, images,
//! and PyTorch's embeddings, weight vector, scores, Grad-CAM weights `α` (the gradient of `s`,
//! `torch.autograd.grad`), the attention and its upsampling (`F.interpolate(mode="bilinear",
//! align_corners=False)`). Triplet cases add similarity mining: the normalised attention, the
//! masked images' embeddings, `L_sm`, `L = L_ml + γ L_sm` and `dL/dW`, `dL/db`, `dL/dx` through
//! the second-order path (`create_graph=True`). Every failing case is named.

use std::path::{Path, PathBuf};

use burn::tensor::{Device, Tensor, TensorData};
use dml_explain::{
    AlphaMethod, MiningTuples, SimilarityMiningConfig, TupleKind, min_max_normalize, similarity_attention,
    upsample_bilinear,
};
use dml_models::{Backbone, BlockKind, EmbeddingHead, EmbeddingModel, Pooling, ResNetConfig};
use dml_testkit::{Array, Case, Tolerance, get};
use serde_json::Value;

pub fn values<const D: usize>(t: Tensor<D>) -> Vec<f64> {
    t.into_data().iter::<f64>().collect()
}

pub fn array(v: &Value, path: &str) -> Result<Array, String> {
    Array::from_json(get(v, path)?, path)
}

pub fn tensor<const D: usize>(a: &Array, device: &Device) -> Result<Tensor<D>, String> {
    let shape: [usize; D] = a
        .shape
        .clone()
        .try_into()
        .map_err(|_| format!("expected {D} dimensions, got shape {:?}", a.shape))?;
    Ok(Tensor::from_data(TensorData::new(a.to_f32(), shape), device))
}

/// The weight file named by the case: beside it, in a sibling `weights/` folder (the layout of
/// the shared reference folder), or in the workspace's fixtures.
fn weights_path(case: &Case, name: &str) -> Result<PathBuf, String> {
    let dir = case.path.parent().unwrap_or(Path::new("."));
    let candidates = [
        dir.join(name),
        dir.join("../weights").join(name),
        dml_testkit::workspace_root().join("tests/fixtures/weights").join(name),
    ];
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .ok_or_else(|| format!("weights {name} not found in {candidates:?}"))
}

/// The tiny torchvision ResNet-18 of a case with its head `f = normalize(W GAP(layer4) + b)`, in eval mode.
pub fn model(case: &Case, device: &Device) -> Result<EmbeddingModel, String> {
    let c = get(&case.json, "config.backbone")?;
    if c["block"].as_str() != Some("BasicBlock") {
        return Err(format!("unsupported block {}", c["block"]));
    }
    let four = |key: &str| -> Result<[usize; 4], String> {
        let v: Vec<usize> =
            serde_json::from_value(c[key].clone()).map_err(|e| format!("config.backbone.{key}: {e}"))?;
        v.try_into()
            .map_err(|_| format!("config.backbone.{key} must have 4 entries"))
    };
    let mut resnet = ResNetConfig {
        block: BlockKind::Basic,
        layers: four("layers")?,
        widths: four("widths")?,
        num_classes: None,
    }
    .init(device)
    .map_err(|e| e.to_string())?;
    let file = c["weights_file"]
        .as_str()
        .ok_or("config.backbone.weights_file missing")?;
    resnet
        .load_weights(&weights_path(case, file)?, false)
        .map_err(|e| e.to_string())?;
    let inputs = case.field("inputs")?;
    let head = EmbeddingHead::from_weights(
        tensor(&array(inputs, "W")?, device)?,
        tensor(&array(inputs, "b")?, device)?,
        Pooling::Avg,
        true,
    )
    .map_err(|e| e.to_string())?;
    // Eval mode, as the case: batch norm with its running statistics.
    Ok(EmbeddingModel {
        backbone: Backbone::ResNet(resnet).freeze_batchnorm(),
        head,
    })
}

fn compare<const D: usize>(tol: &Tolerance, exp: &Value, key: &str, got: Tensor<D>) -> Result<(), String> {
    tol.compare(key, &values(got), &array(exp, key)?.data)
}

fn scalar(exp: &Value, key: &str) -> Result<f64, String> {
    get(exp, key)?.as_f64().ok_or(format!("expected.{key} is not a number"))
}

/// Checks one `similarity_attention` case.
pub fn run(case: &Case) -> Result<(), String> {
    let device = Device::flex().autodiff();
    let tol = case.tolerance()?;
    let exp = case.field("expected")?;
    let config = case.field("config")?;
    let kind = TupleKind::from_name(get(config, "mode")?.as_str().ok_or("config.mode")?).map_err(|e| e.to_string())?;
    let stage = get(config, "stage")?.as_str().ok_or("config.stage")?;
    let model = model(case, &device)?;
    let images: Tensor<4> = tensor(&array(case.field("inputs")?, "images")?, &device)?;
    let [_, _, height, width] = images.dims();

    let att =
        similarity_attention(&model, images.clone(), kind, stage, AlphaMethod::Autodiff).map_err(|e| e.to_string())?;
    compare(&tol, exp, "embeddings", att.embeddings.clone())?;
    compare(&tol, exp, "weight_vector", att.weights.clone())?;
    compare(&tol, exp, "scores", att.scores.clone())?;
    compare(&tol, exp, "alpha", att.alpha.clone())?;
    let want_shape: Vec<usize> =
        serde_json::from_value(get(exp, "attention_shape")?.clone()).map_err(|e| e.to_string())?;
    if att.maps.dims().to_vec() != want_shape {
        return Err(format!("attention shape {:?}, want {want_shape:?}", att.maps.dims()));
    }
    compare(&tol, exp, "attention", att.maps.clone())?;
    compare(
        &tol,
        exp,
        "attention_upsampled",
        upsample_bilinear(att.maps.clone(), height, width),
    )?;

    // At the last stage the closed form must reproduce PyTorch's gradient as well.
    let last = model.backbone.stage_names().last().copied().unwrap_or_default();
    if stage == last {
        let closed = similarity_attention(&model, images.clone(), kind, stage, AlphaMethod::ClosedForm)
            .map_err(|e| e.to_string())?;
        compare(&tol, exp, "alpha", closed.alpha).map_err(|e| format!("closed form: {e}"))?;
        compare(&tol, exp, "attention", closed.maps).map_err(|e| format!("closed form: {e}"))?;
    }

    if kind == TupleKind::Triplet {
        compare(&tol, exp, "attention_normalized", min_max_normalize(att.maps))?;
        mining(case, &model, images, stage, &tol, exp)?;
    }
    Ok(())
}

/// Similarity mining of the triplet: `L = relu(d_ap − d_an + margin) + γ L_sm` and its gradients
/// through the second-order path.
fn mining(
    case: &Case,
    model: &EmbeddingModel,
    images: Tensor<4>,
    stage: &str,
    tol: &Tolerance,
    exp: &Value,
) -> Result<(), String> {
    let config = case.field("config")?;
    let num = |path: &str| {
        get(config, path)?
            .as_f64()
            .ok_or(format!("config.{path} is not a number"))
    };
    let mining = SimilarityMiningConfig {
        enabled: true,
        gamma: num("loss.gamma")?,
        a: num("mining.a")?,
        b: num("mining.b")?,
        ..SimilarityMiningConfig::default()
    }
    .init(&images.device())
    .map_err(|e| e.to_string())?;
    let margin = num("loss.margin")?;
    let images = images.require_grad();
    let stage_index = model.backbone.stage_index(stage).map_err(|e| e.to_string())?;
    let (embeddings, maps) = model.forward_with_features(images.clone());
    let tuples = MiningTuples {
        kind: TupleKind::Triplet,
        indices: vec![0, 1, 2],
    };
    let out = mining
        .forward_at_stage(model, images.clone(), embeddings.clone(), &maps, stage_index, &tuples)
        .map_err(|e| e.to_string())?;
    compare(tol, exp, "masked_embeddings", out.masked_embeddings.clone())?;
    let row = |t: &Tensor<2>, i: usize| t.clone().narrow(0, i, 1);
    let dist = |t: &Tensor<2>, i: usize, j: usize| (row(t, i) - row(t, j)).square().sum().sqrt();
    let (d_ap, d_an) = (dist(&embeddings, 0, 1), dist(&embeddings, 0, 2));
    let fs = &out.masked_embeddings;
    for (key, got) in [
        ("d_ap", d_ap.clone()),
        ("d_an", d_an.clone()),
        ("masked_d_ap", dist(fs, 0, 1)),
        ("masked_d_an", dist(fs, 0, 2)),
        ("loss_sm", out.loss.clone()),
    ] {
        tol.compare(key, &values(got), &[scalar(exp, key)?])?;
    }
    let loss_ml = burn::tensor::activation::relu((d_ap - d_an).add_scalar(margin));
    tol.compare("loss_ml", &values(loss_ml.clone()), &[scalar(exp, "loss_ml")?])?;
    let loss = loss_ml + out.loss.mul_scalar(mining.gamma());
    tol.compare("loss", &values(loss.clone()), &[scalar(exp, "loss")?])?;

    let grads = loss.backward();
    let grad_w = model.head.weight().grad(&grads).ok_or("no gradient for W")?;
    // Burn's [C, D] layout is the transpose of PyTorch's W [D, C].
    compare(tol, exp, "grad.W", grad_w.transpose())?;
    let grad_b = model
        .head
        .bias()
        .ok_or("head without bias")?
        .grad(&grads)
        .ok_or("no gradient for b")?;
    compare(tol, exp, "grad.b", grad_b)?;
    let gx = images.grad(&grads).ok_or("no gradient for the images")?;
    let [n, c, h, w] = gx.dims();
    let sub: Tensor<4> = gx.clone().slice([0..n, 0..c, 1..h, 2..w]);
    let sub_values = values(sub.clone());
    // Every third row from 1 and every third column from 2: [:, :, 1::3, 2::3].
    let [_, _, sh, sw] = sub.dims();
    let mut picked = Vec::new();
    for nc in 0..n * c {
        for y in (0..sh).step_by(3) {
            for x in (0..sw).step_by(3) {
                picked.push(sub_values[(nc * sh + y) * sw + x]);
            }
        }
    }
    tol.compare("grad.images_subgrid", &picked, &array(exp, "grad.images_subgrid")?.data)?;
    compare(
        tol,
        exp,
        "grad.images_sum",
        gx.clone().sum_dim(3).sum_dim(2).reshape([n, c]),
    )?;
    compare(
        tol,
        exp,
        "grad.images_sumsq",
        gx.square().sum_dim(3).sum_dim(2).reshape([n, c]),
    )?;
    Ok(())
}
