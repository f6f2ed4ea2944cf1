//! `train explain faithfulness`: the localisation of similarity attention against the synthetic
//! set's object masks (pointing game, IoU, next to a centre prior) and its deletion curves against
//! random erasure, over random test triplets.

use std::path::PathBuf;

use burn::module::Module;
use burn::tensor::{Tensor, TensorData};
use dml_data::{Manifest, Pipeline, Split, TransformConfig};
use dml_explain::faithfulness::{
    DeletionError, FaithfulnessAccumulator, FaithfulnessParams, FaithfulnessSummary, ImageFaithfulness, deletion_curve,
    localisation, random_deletion_curve,
};
use dml_explain::{AlphaMethod, SimilarityAttention, TupleKind, similarity_attention, upsample_bilinear};
use dml_train::{Progress, RunRef, data};
use rand::SeedableRng;
use serde::Serialize;

use crate::attention::{explained_stage, similarity_method};
use crate::error::InspectError;
use crate::io::{load_images, values, write_json};
use crate::triplets::{classes_with_pairs, draw_triplet};

/// What `train explain faithfulness` is asked to do.
#[derive(Debug, Clone)]
pub struct FaithfulnessRequest {
    /// The run (trained on the synthetic set, or evaluated on it via `dataset`), its checkpoint
    /// and the device.
    pub run: RunRef,
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
) -> Result<Vec<bool>, InspectError> {
    let path = dml_datasets::synth::mask_path(&manifest.root, &record.path);
    Ok(mask_through(dml_datasets::synth::read_mask(&path)?, geometry))
}

/// A mask (`> 127` object, e.g. [`dml_datasets::synth::read_mask`]'s) through the geometry of an
/// evaluation transform (`geometry`: its resize and crop, with identity normalisation), as a
/// boolean map of the network input's size.
pub(crate) fn mask_through(mask: image::GrayImage, geometry: &Pipeline) -> Vec<bool> {
    let rgb = image::DynamicImage::ImageLuma8(mask).to_rgb8();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
    let values = geometry.apply(&rgb, &mut rng);
    let plane = values.len() / 3;
    // Resampling blends the mask's edge; a pixel is object when most of it was.
    values[..plane].iter().map(|&v| v >= 0.5).collect()
}

/// Pointing game and IoU of the attention against the synthetic set's object masks (next to the
/// centre prior), and deletion curves against random erasure, over `req.triplets` random test
/// triplets (Zheng et al., Sec. 4.4, in the form this data allows).
pub fn faithfulness(req: &FaithfulnessRequest, progress: &dyn Progress) -> Result<FaithfulnessReport, InspectError> {
    if req.triplets == 0 {
        return Err(InspectError::Argument("--triplets: must be at least 1".into()));
    }
    let mut run = req.run.load(progress)?;
    if let Some(d) = &req.dataset {
        run.config.data.dataset = d.clone();
    }
    let stage = explained_stage(&run.model, req.stage.as_deref())?;
    let manifest = data::load_manifest(&run.config.data, progress)?;
    let masks = manifest.root.join(dml_datasets::synth::MASKS_DIR);
    if !masks.is_dir() {
        let dataset = &run.config.data.dataset;
        let hint = if dataset.starts_with("synth") {
            "; this synthetic set was generated before masks existed: regenerate it with `cargo xtask synth --force`"
        } else {
            ""
        };
        return Err(InspectError::Argument(format!(
            "data.dataset = {dataset:?} has no object masks ({} is missing): explain faithfulness needs a rendered \
             set, synth or synth-parts (--dataset synth evaluates this run on the synthetic shapes){hint}",
            masks.display()
        )));
    }
    let transform = data::eval_transform(&run.config.data);
    let pipeline = Pipeline::new(transform.clone())?;
    let geometry = Pipeline::new(TransformConfig {
        mean: [0.0; 3],
        std: [1.0; 3],
        ..transform
    })?;
    let by_class = classes_with_pairs(&manifest, &manifest.indices_of(req.split));
    let classes: Vec<u32> = by_class.keys().copied().collect();
    if classes.len() < 2 {
        return Err(InspectError::Argument(format!(
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
        let records = draw_triplet(&mut rng, &by_class, &classes).map(|i| &manifest.records[i]);
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
            let failed = |e: &dyn std::fmt::Display| InspectError::Faithfulness {
                triplet: t,
                image: record.path.clone(),
                message: e.to_string(),
            };
            let mut result = localisation(map, &mask, hh, ww, &params).map_err(|e| failed(&e))?;
            let curve = deletion_curve(image, hh, ww, map, &params.deletion_fractions, [0.0; 3], &mut score)
                .map_err(|e: DeletionError<String>| failed(&e))?;
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
            .map_err(|e: DeletionError<String>| failed(&e))?;
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
        std::fs::create_dir_all(out).map_err(|e| InspectError::io(out, e))?;
        write_json(&out.join("faithfulness.json"), &report)?;
    }
    Ok(report)
}
