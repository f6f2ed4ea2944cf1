//! `train explain attention`: similarity attention (Zheng et al.) of a trained run's checkpoint for
//! the images of a pair, triplet or quadruplet, as PNG overlays and a JSON of the scores.

use std::path::PathBuf;

use burn::module::Module;
use burn::tensor::{Tensor, TensorData};
use dml_data::Pipeline;
use dml_explain::render::{PanelItem, PanelStyle, ValueRange, panel, save_png_atomic};
use dml_explain::{AlphaMethod, TupleKind, similarity_attention, upsample_bilinear};
use dml_models::EmbeddingModel;
use dml_train::{Progress, RunRef, TrainError, data};
use serde::Serialize;

use crate::error::InspectError;
use crate::io::{existing_images, load_images, values, write_json};

/// What `train explain attention` is asked to do.
#[derive(Debug, Clone)]
pub struct AttentionRequest {
    /// The run, its checkpoint and the device.
    pub run: RunRef,
    /// 2 (a pair), 3 (anchor, positive, negative) or 4 (plus a second negative) image files.
    pub images: Vec<PathBuf>,
    /// For two images: explain them as a different-class pair (`|f¹ − f²|`) instead of a
    /// same-class one.
    pub different: bool,
    /// The backbone stage (default: the last).
    pub stage: Option<String>,
    /// The output directory.
    pub out: PathBuf,
}

/// The JSON written next to the overlays (`attention.json`).
#[derive(Debug, Clone, Serialize)]
pub struct AttentionReport {
    /// The checkpoint explained.
    pub checkpoint: PathBuf,
    /// `siamese_same`, `siamese_different`, `triplet` or `quadruplet`.
    pub kind: TupleKind,
    /// The explained stage.
    pub stage: String,
    /// One entry per image, in the tuple's order.
    pub images: Vec<ImageReport>,
    /// The weight vector `w` (Zheng et al., Sec. 3.1).
    pub weight_vector: Vec<f32>,
    /// Euclidean distances of the first image's embedding to each other image's.
    pub distances_to_first: Vec<f32>,
    /// The attention maps' resolution `[h, w]` before upsampling.
    pub map_shape: [usize; 2],
    /// The files written.
    pub files: Vec<PathBuf>,
}

/// One image of an [`AttentionReport`].
#[derive(Debug, Clone, Serialize)]
pub struct ImageReport {
    /// Its role (`anchor`, `positive`, …).
    pub role: String,
    /// The file.
    pub path: PathBuf,
    /// Its score `sⁱ = wᵀfⁱ`.
    pub score: f32,
    /// The attention map `Mⁱ` at the stage's resolution, row-major.
    pub attention: Vec<f32>,
}

/// The tuple kind of `count` images (`different`: a different-class pair).
fn kind_for(count: usize, different: bool) -> Result<TupleKind, InspectError> {
    match (count, different) {
        (2, false) => Ok(TupleKind::SiameseSame),
        (2, true) => Ok(TupleKind::SiameseDifferent),
        (3, false) => Ok(TupleKind::Triplet),
        (4, false) => Ok(TupleKind::Quadruplet),
        (n @ (3 | 4), true) => Err(InspectError::Argument(format!(
            "--different applies to two images, not {n}: a triplet or quadruplet already says which images differ"
        ))),
        (n, _) => Err(InspectError::Argument(format!(
            "{n} images given; explain attention takes 2 (a pair), 3 (anchor positive negative) or 4 (anchor positive \
             negative negative2)"
        ))),
    }
}

/// Explains why the images of `req` are (dis)similar for the run's model: writes
/// `attention.png` (every image above its overlay, one colour bar for all maps, whose values are the
/// attention `M` upsampled to the input size, so images compare on one scale),
/// `attention_<i>_<role>.png` per image (the same with one image) and `attention.json` ([`AttentionReport`]) into `req.out`.
pub fn explain_attention(req: &AttentionRequest, progress: &dyn Progress) -> Result<AttentionReport, InspectError> {
    let kind = kind_for(req.images.len(), req.different)?;
    existing_images(req.images.iter().map(PathBuf::as_path))?;
    let run = req.run.load(progress)?;
    let stage = explained_stage(&run.model, req.stage.as_deref())?;
    let transform = data::eval_transform(&run.config.data);
    let tuple = load_images(&req.images, &Pipeline::new(transform)?)?;
    // Grad-CAM through autodiff works at every stage of every backbone.
    let device = run.device.clone().autodiff();
    let model = run.model.clone().fork(&device);
    let images = Tensor::<4>::from_data(
        TensorData::new(tuple.values.clone(), [tuple.n, 3, tuple.height, tuple.width]),
        &device,
    );
    let att = similarity_attention(&model, images, kind, &stage, AlphaMethod::Autodiff)?;
    let [_, h, w] = att.maps.dims();
    let upsampled = values(upsample_bilinear(att.maps.clone(), tuple.height, tuple.width));
    std::fs::create_dir_all(&req.out).map_err(|e| InspectError::io(&req.out, e))?;

    let plane = tuple.height * tuple.width;
    let rgb = tuple.rgb(&run.config)?;
    let scores = values(att.scores.clone());
    let captions: Vec<String> = kind
        .roles()
        .iter()
        .zip(&scores)
        .map(|(role, s)| format!("{role}  s={s:.3}"))
        .collect();
    let maps: Vec<&[f32]> = upsampled.chunks(plane).collect();
    let items: Vec<PanelItem> = (0..tuple.n)
        .map(|i| PanelItem {
            image: &rgb[i],
            map: maps[i],
            map_h: tuple.height,
            map_w: tuple.width,
            caption: &captions[i],
        })
        .collect();
    let style = PanelStyle {
        range: Some(ValueRange::of(&maps)),
        ..PanelStyle::default()
    };
    let figure = panel(&items, &style)?;
    let mut files = vec![req.out.join("attention.png")];
    save_png_atomic(&figure, &files[0])?;
    // One figure per image as well (the image above its overlay, the same colour bar), for use
    // on its own.
    for (i, role) in kind.roles().iter().enumerate() {
        let single = panel(&items[i..=i], &style)?;
        let path = req.out.join(format!("attention_{i}_{role}.png"));
        save_png_atomic(&single, &path)?;
        files.push(path);
    }
    let embeddings = values(att.embeddings.clone());
    let dim = embeddings.len() / tuple.n;
    let first = &embeddings[..dim];
    let distances_to_first = embeddings
        .chunks(dim)
        .skip(1)
        .map(|e| e.iter().zip(first).map(|(a, b)| (a - b) * (a - b)).sum::<f32>().sqrt())
        .collect();
    let attention = values(att.maps.clone());
    let report = AttentionReport {
        checkpoint: run.checkpoint.clone(),
        kind,
        stage,
        images: (0..tuple.n)
            .map(|i| ImageReport {
                role: kind.roles()[i].to_string(),
                path: req.images[i].clone(),
                score: scores[i],
                attention: attention[i * h * w..(i + 1) * h * w].to_vec(),
            })
            .collect(),
        weight_vector: values(att.weights.clone()),
        distances_to_first,
        map_shape: [h, w],
        files: files.clone(),
    };
    let json = req.out.join("attention.json");
    write_json(&json, &report)?;
    Ok(report)
}

/// The backbone stage an explanation asks for (`requested`), or the last; an unknown name is an
/// error listing the model's stages.
pub fn explained_stage(model: &EmbeddingModel, requested: Option<&str>) -> Result<String, InspectError> {
    let stage = match requested {
        Some(name) => name.to_string(),
        None => model
            .backbone
            .stage_names()
            .last()
            .copied()
            .unwrap_or_default()
            .to_string(),
    };
    model.backbone.stage_index(&stage).map_err(TrainError::from)?;
    Ok(stage)
}

/// How the similarity-attention weights `α` are computed at `stage`: in closed form where the
/// stage allows it (the last stage, every ResNet stage), else through autodiff.
pub fn similarity_method(model: &EmbeddingModel, stage: &str) -> AlphaMethod {
    let names = model.backbone.stage_names();
    let last = names.last().copied() == Some(stage);
    if last || matches!(model.backbone, dml_models::Backbone::ResNet(_)) {
        AlphaMethod::ClosedForm
    } else {
        AlphaMethod::Autodiff
    }
}
