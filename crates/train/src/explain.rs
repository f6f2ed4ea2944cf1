//! `train explain …`: similarity attention of a trained run's checkpoint for images given on the
//! command line (PNG overlays and a JSON of the scores), and its faithfulness and localisation on
//! the synthetic set, whose object masks are known.

use std::path::{Path, PathBuf};

use burn::module::Module;
use burn::tensor::{Device, Tensor, TensorData};
use dml_data::{Manifest, Pipeline, Split, TransformConfig, decode_rgb};
use dml_explain::faithfulness::{
    DeletionError, FaithfulnessAccumulator, FaithfulnessParams, FaithfulnessSummary, ImageFaithfulness, deletion_curve,
    localisation, random_deletion_curve,
};
use dml_explain::render::{PanelItem, PanelStyle, ValueRange, denormalize, panel, save_png_atomic};
use dml_explain::{AlphaMethod, SimilarityAttention, TupleKind, similarity_attention, upsample_bilinear};
use dml_models::EmbeddingModel;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use crate::checkpoint;
use crate::config::TrainConfig;
use crate::data;
use crate::device::parse_device;
use crate::error::TrainError;
use crate::evaluate::checkpoint_dir;
use crate::trainer::build_model;

/// A run's model restored from one of its checkpoints, in inference mode.
pub struct RunModel {
    /// The run's resolved configuration (with the device override applied).
    pub config: TrainConfig,
    /// The checkpoint directory the weights came from.
    pub checkpoint: PathBuf,
    /// The model on [`RunModel::device`], `valid()` (batch norm with its running statistics).
    pub model: EmbeddingModel,
    /// The inference device.
    pub device: Device,
    /// AVSL's embedder, reliability and edges, `valid()`, for runs trained with `[avsl]`.
    pub avsl: Option<crate::avsl::AvslModule>,
}

/// Loads `run`'s configuration and the weights of its `checkpoint` (`best`, `latest` or a
/// checkpoint directory) on `device` (default: the run's). Weights of another architecture are an
/// error naming the checkpoint.
pub fn load_run_model(run: &Path, which: &str, device: Option<&str>) -> Result<RunModel, TrainError> {
    let mut config = TrainConfig::read(&run.join("config.toml"))?;
    if let Some(d) = device {
        config.device = d.to_string();
    }
    let dir = checkpoint_dir(run, which)?;
    let device = parse_device(&config.device)?;
    // Weights only: pretrained files are not needed, the checkpoint holds every tensor.
    config.model.pretrained.clear();
    let model = build_model(&config, &device)?;
    let record =
        burn::store::ModuleRecord::load(dir.join(checkpoint::MODEL_FILE)).map_err(|e| TrainError::Checkpoint {
            path: dir.clone(),
            message: format!("{}: {e}", checkpoint::MODEL_FILE),
        })?;
    let model = model.try_load_record(record).map_err(|e| TrainError::Checkpoint {
        path: dir.clone(),
        message: format!(
            "the weights do not fit the run's model ({} backbone): {e}",
            config.model.backbone
        ),
    })?;
    let avsl = if config.avsl.enabled {
        let fresh = crate::avsl::AvslModule::new(&config.avsl, &model.backbone, &device)?;
        Some(crate::avsl::load_module(fresh, &dir)?.valid())
    } else {
        None
    };
    Ok(RunModel {
        config,
        checkpoint: dir,
        model: model.valid(),
        device,
        avsl,
    })
}

/// The images of one tuple, decoded and transformed as evaluation transforms them.
pub(crate) struct TupleImages {
    /// `[n, 3, H, W]` normalised, row-major.
    pub values: Vec<f32>,
    /// Number of images.
    pub n: usize,
    /// Rows of every image.
    pub height: usize,
    /// Columns of every image.
    pub width: usize,
}

impl TupleImages {
    /// Every image as shown to a person: the run's normalisation undone.
    pub(crate) fn display(&self, config: &TrainConfig) -> Result<Vec<image::RgbImage>, TrainError> {
        let plane = 3 * self.height * self.width;
        self.values
            .chunks(plane)
            .map(|chw| denormalize(chw, self.height, self.width, config.data.mean, config.data.std))
            .collect::<Result<_, _>>()
            .map_err(render_error)
    }
}

pub(crate) fn load_images(paths: &[PathBuf], pipeline: &Pipeline) -> Result<TupleImages, TrainError> {
    let mut values = Vec::new();
    let mut size = None;
    for path in paths {
        let image = decode_rgb(path)?;
        let (h, w) = pipeline.output_size(image.width(), image.height());
        // The evaluation transform has no random choice; the generator is only its argument.
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
        values.extend(pipeline.apply(&image, &mut rng));
        match size {
            None => size = Some((h as usize, w as usize)),
            Some(s) if s != (h as usize, w as usize) => {
                return Err(TrainError::Config(format!(
                    "{}: transforms to {h}x{w}, but the first image to {}x{}; the run's data.image_size should make them equal",
                    path.display(),
                    s.0,
                    s.1
                )));
            }
            Some(_) => {}
        }
    }
    let (height, width) = size.ok_or_else(|| TrainError::Config("no image given".into()))?;
    Ok(TupleImages {
        values,
        n: paths.len(),
        height,
        width,
    })
}

/// What `train explain attention` is asked to do.
#[derive(Debug, Clone)]
pub struct AttentionRequest {
    /// The run directory.
    pub run: PathBuf,
    /// `best`, `latest` or a checkpoint directory.
    pub checkpoint: String,
    /// 2 (a pair), 3 (anchor, positive, negative) or 4 (plus a second negative) image files.
    pub images: Vec<PathBuf>,
    /// For two images: explain them as a different-class pair (`|f¹ − f²|`) instead of a
    /// same-class one.
    pub different: bool,
    /// The backbone stage (default: the last).
    pub stage: Option<String>,
    /// Device override.
    pub device: Option<String>,
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

fn kind_for(count: usize, different: bool) -> Result<TupleKind, TrainError> {
    match (count, different) {
        (2, false) => Ok(TupleKind::SiameseSame),
        (2, true) => Ok(TupleKind::SiameseDifferent),
        (3, false) => Ok(TupleKind::Triplet),
        (4, false) => Ok(TupleKind::Quadruplet),
        (n @ (3 | 4), true) => Err(TrainError::Config(format!(
            "--different applies to two images, not {n}: a triplet or quadruplet already says which images differ"
        ))),
        (n, _) => Err(TrainError::Config(format!(
            "{n} images given; explain attention takes 2 (a pair), 3 (anchor positive negative) or 4 (anchor positive \
             negative negative2)"
        ))),
    }
}

pub(crate) fn values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data().iter::<f32>().collect()
}

pub(crate) fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), TrainError> {
    let text = serde_json::to_string_pretty(value).map_err(|e| TrainError::io(path, e))?;
    dml_data::write_atomic(path, text.as_bytes())?;
    Ok(())
}

pub(crate) fn render_error(e: dml_explain::render::RenderError) -> TrainError {
    TrainError::Config(format!("rendering: {e}"))
}

/// Explains why the images of `req` are (dis)similar for the run's model: writes
/// `attention.png` (every image above its overlay, one colour bar for all maps, whose values are the
/// attention `M` upsampled to the input size, so images compare on one scale),
/// `attention_<i>_<role>.png` per image (the same with one image) and `attention.json` ([`AttentionReport`]) into `req.out`.
pub fn explain_attention(req: &AttentionRequest) -> Result<AttentionReport, TrainError> {
    let kind = kind_for(req.images.len(), req.different)?;
    for path in &req.images {
        if !path.is_file() {
            return Err(TrainError::Config(format!("image {}: no such file", path.display())));
        }
    }
    let run = load_run_model(&req.run, &req.checkpoint, req.device.as_deref())?;
    let stages = run.model.backbone.stage_names();
    let stage = req
        .stage
        .clone()
        .unwrap_or_else(|| stages[stages.len() - 1].to_string());
    run.model.backbone.stage_index(&stage)?;
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
    std::fs::create_dir_all(&req.out).map_err(|e| TrainError::io(&req.out, e))?;

    let plane = tuple.height * tuple.width;
    let rgb = tuple.display(&run.config)?;
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
    let figure = panel(&items, &style).map_err(render_error)?;
    let mut files = vec![req.out.join("attention.png")];
    save_png_atomic(&figure, &files[0]).map_err(render_error)?;
    // One figure per image as well (the image above its overlay, the same colour bar), for use
    // on its own.
    for (i, role) in kind.roles().iter().enumerate() {
        let single = panel(&items[i..=i], &style).map_err(render_error)?;
        let path = req.out.join(format!("attention_{i}_{role}.png"));
        save_png_atomic(&single, &path).map_err(render_error)?;
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

/// What `train explain faithfulness` is asked to do.
#[derive(Debug, Clone)]
pub struct FaithfulnessRequest {
    /// The run directory (trained on the synthetic set, or evaluated on it via `dataset`).
    pub run: PathBuf,
    /// `best`, `latest` or a checkpoint directory.
    pub checkpoint: String,
    /// Another dataset (name or manifest) than the run's; it must have object masks.
    pub dataset: Option<String>,
    /// The split the triplets are drawn from.
    pub split: Split,
    /// How many triplets (each explains its three images).
    pub triplets: usize,
    /// The backbone stage (default: the last).
    pub stage: Option<String>,
    /// Seed of the triplets and of the random deletion curves.
    pub seed: u64,
    /// Device override.
    pub device: Option<String>,
    /// Write `faithfulness.json` (summary and per-image records) here.
    pub out: Option<PathBuf>,
}

/// The JSON `train explain faithfulness` writes.
#[derive(Debug, Clone, Serialize)]
pub struct FaithfulnessReport {
    /// The checkpoint evaluated.
    pub checkpoint: PathBuf,
    /// The explained stage.
    pub stage: String,
    /// The split the triplets came from.
    pub split: String,
    /// Triplets explained.
    pub triplets: usize,
    /// What the deletion curves score: each image's own similarity score `sⁱ = wᵀf(x̂ⁱ)` with `w`
    /// held at the unerased tuple's value, erased pixels set to the dataset mean (0 after
    /// normalisation).
    pub deletion_score: String,
    /// Means and standard deviations over every explained image.
    pub summary: FaithfulnessSummary,
    /// One record per image, triplet after triplet.
    pub images: Vec<ImageFaithfulness>,
}

/// The object mask of `record` through the evaluation transform's geometry, as a boolean map of the
/// network input's size.
fn transformed_mask(
    manifest: &Manifest,
    record: &dml_data::Record,
    geometry: &Pipeline,
) -> Result<Vec<bool>, TrainError> {
    let path = dml_datasets::synth::mask_path(&manifest.root, &record.path);
    let mask = dml_datasets::synth::read_mask(&path).map_err(|e| TrainError::Config(e.to_string()))?;
    let rgb = image::DynamicImage::ImageLuma8(mask).to_rgb8();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
    let values = geometry.apply(&rgb, &mut rng);
    let plane = values.len() / 3;
    // Resampling blends the mask's edge; a pixel is object when most of it was.
    Ok(values[..plane].iter().map(|&v| v >= 0.5).collect())
}

/// Pointing game and IoU of the attention against the synthetic set's object masks (next to the
/// centre prior), and deletion curves against random erasure, over `req.triplets` random test
/// triplets (Zheng et al., Sec. 4.4, in the form this data allows).
pub fn faithfulness(req: &FaithfulnessRequest) -> Result<FaithfulnessReport, TrainError> {
    if req.triplets == 0 {
        return Err(TrainError::Config("--triplets: must be at least 1".into()));
    }
    let mut run = load_run_model(&req.run, &req.checkpoint, req.device.as_deref())?;
    if let Some(d) = &req.dataset {
        run.config.data.dataset = d.clone();
    }
    let stages = run.model.backbone.stage_names();
    let stage = req
        .stage
        .clone()
        .unwrap_or_else(|| stages[stages.len() - 1].to_string());
    run.model.backbone.stage_index(&stage)?;
    let manifest = data::load_manifest(&run.config.data)?;
    let transform = data::eval_transform(&run.config.data);
    let pipeline = Pipeline::new(transform.clone())?;
    let geometry = Pipeline::new(TransformConfig {
        mean: [0.0; 3],
        std: [1.0; 3],
        ..transform
    })?;
    let indices = manifest.indices_of(req.split);
    let by_class = {
        let mut m: std::collections::BTreeMap<u32, Vec<usize>> = Default::default();
        for &i in &indices {
            m.entry(manifest.records[i].class_id).or_default().push(i);
        }
        m.retain(|_, v| v.len() >= 2);
        m
    };
    let classes: Vec<u32> = by_class.keys().copied().collect();
    if classes.len() < 2 {
        return Err(TrainError::Config(format!(
            "the {} split of {} has fewer than two classes with two images; no triplet can be drawn",
            req.split.as_str(),
            run.config.data.dataset
        )));
    }
    // The closed form is exact at the last stage and at every ResNet stage (see dml-explain's
    // tests) and needs no autodiff; other stages use autodiff.
    let method = similarity_method(&run.model, &stage);
    let explain_device = match method {
        AlphaMethod::ClosedForm => run.device.clone(),
        AlphaMethod::Autodiff => run.device.clone().autodiff(),
    };
    let explain_model = run.model.clone().fork(&explain_device);
    let params = FaithfulnessParams {
        seed: req.seed,
        ..FaithfulnessParams::default()
    };
    let mut accumulator = FaithfulnessAccumulator::new(params.clone());
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(req.seed);
    for t in 0..req.triplets {
        let ci = rng.random_range(0..classes.len());
        let mut cj = rng.random_range(0..classes.len() - 1);
        if cj >= ci {
            cj += 1;
        }
        let same = &by_class[&classes[ci]];
        let other = &by_class[&classes[cj]];
        let a = same[rng.random_range(0..same.len())];
        let mut p = same[rng.random_range(0..same.len() - 1)];
        if p == a {
            p = same[same.len() - 1];
        }
        let n = other[rng.random_range(0..other.len())];
        let records = [a, p, n].map(|i| &manifest.records[i]);
        let paths: Vec<PathBuf> = records.iter().map(|r| manifest.image_path(r)).collect();
        let tuple = load_images(&paths, &pipeline)?;
        let (hh, ww) = (tuple.height, tuple.width);
        let images = Tensor::<4>::from_data(TensorData::new(tuple.values.clone(), [3, 3, hh, ww]), &explain_device);
        let att: SimilarityAttention =
            similarity_attention(&explain_model, images, TupleKind::Triplet, &stage, method)?;
        let maps = values(upsample_bilinear(att.maps.clone(), hh, ww));
        let w = Tensor::<1>::from_data(
            TensorData::new(values(att.weights.clone()), [att.weights.dims()[0]]),
            &run.device,
        );
        let model = &run.model;
        let device = &run.device;
        let mut score = |batch: &[f32], k: usize| -> Result<Vec<f64>, String> {
            let x = Tensor::<4>::from_data(TensorData::new(batch.to_vec(), [k, 3, hh, ww]), device);
            let f = model.forward(x);
            let s = (f * w.clone().unsqueeze_dim::<2>(0)).sum_dim(1);
            Ok(values(s).into_iter().map(f64::from).collect())
        };
        let plane = hh * ww;
        for (i, record) in records.iter().enumerate() {
            let map = &maps[i * plane..(i + 1) * plane];
            let mask = transformed_mask(&manifest, record, &geometry)?;
            let image = &tuple.values[i * 3 * plane..(i + 1) * 3 * plane];
            let faith_error = |e: dml_explain::faithfulness::FaithError| {
                TrainError::Config(format!("triplet {t}, {}: {e}", record.path))
            };
            let deletion_error =
                |e: DeletionError<String>| TrainError::Config(format!("triplet {t}, {}: {e}", record.path));
            let mut result = localisation(map, &mask, hh, ww, &params).map_err(faith_error)?;
            let curve = deletion_curve(image, hh, ww, map, &params.deletion_fractions, [0.0; 3], &mut score)
                .map_err(deletion_error)?;
            let random = random_deletion_curve(
                image,
                hh,
                ww,
                &params.deletion_fractions,
                [0.0; 3],
                params.seed ^ (t as u64 * 3 + i as u64),
                params.random_repeats,
                &mut score,
            )
            .map_err(deletion_error)?;
            result.deletion_auc = Some(curve.auc);
            result.random_deletion_auc = Some(random.auc);
            accumulator.add(result);
        }
    }
    let report = FaithfulnessReport {
        checkpoint: run.checkpoint.clone(),
        stage,
        split: req.split.as_str().to_string(),
        triplets: req.triplets,
        deletion_score: "s_i = w^T f(x_i erased), w fixed at the unerased triplet's value; erased pixels = 0 after \
                         normalisation (the dataset mean colour)"
            .into(),
        summary: accumulator.summary(),
        images: accumulator.records().to_vec(),
    };
    if let Some(out) = &req.out {
        std::fs::create_dir_all(out).map_err(|e| TrainError::io(out, e))?;
        write_json(&out.join("faithfulness.json"), &report)?;
    }
    Ok(report)
}

/// The closed form where it is exact (the last stage; every ResNet stage), else autodiff.
pub(crate) fn similarity_method(model: &EmbeddingModel, stage: &str) -> AlphaMethod {
    let names = model.backbone.stage_names();
    let last = names.last().copied() == Some(stage);
    if last || matches!(model.backbone, dml_models::Backbone::ResNet(_)) {
        AlphaMethod::ClosedForm
    } else {
        AlphaMethod::Autodiff
    }
}
