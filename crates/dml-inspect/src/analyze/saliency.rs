//! The saliency side of the analysis: SmoothGrad maps of every model on the same test images, each
//! under its own distance, and their model-by-model comparison (Kobs et al., Table 2).

use std::sync::Arc;

use burn::module::Module;
use burn::tensor::{Tensor, TensorData};
use dml_data::{ImageDataset, Manifest};
use dml_explain::analysis::{ComparisonMatrix, comparison_matrix};
use dml_explain::saliency::smoothgrad::{black_image_tensor, smoothgrad};
use dml_train::{Progress, RunModel, TrainError};

use crate::error::InspectError;

use super::report::{AnalyzeRequest, PairRow};

/// Every model's saliency maps and their comparison.
pub(super) struct Saliency {
    /// The compared images, normalised `[3, h, w]`, with their sides.
    pub images: Vec<(Vec<f32>, usize, usize)>,
    /// `maps[model][image]`: the post-processed map, row-major `[h, w]`.
    pub maps: Vec<Vec<Vec<f32>>>,
    /// Each model's distance, as its loss configuration names it.
    pub distances: Vec<String>,
    /// Saliency maps per second over all models.
    pub maps_per_second: f64,
    /// Pearson r and Jensen–Shannon divergence of every model pair.
    pub matrix: ComparisonMatrix,
}

/// SmoothGrad saliency (`req.samples` samples, noise 0.15, against a black image) of every run on
/// the `items` of `test`, each under its own loss's distance, and their comparison matrix.
pub(super) fn compare(
    req: &AnalyzeRequest,
    runs: &[RunModel],
    manifest: &Manifest,
    test: &Arc<ImageDataset>,
    items: &[usize],
    progress: &dyn Progress,
) -> Result<Saliency, InspectError> {
    let data_config = &runs[0].config.data;
    let num_classes = {
        let mut c: Vec<u32> = manifest.records.iter().map(|r| r.class_id).collect();
        c.sort_unstable();
        c.dedup();
        c.len().max(2)
    };
    // Every model sees the same images: decode and transform each once.
    let images: Vec<(Vec<f32>, usize, usize)> = items
        .iter()
        .map(|&item| {
            let (values, (h, w)) = test.load(item, 0)?;
            Ok((values, h as usize, w as usize))
        })
        .collect::<Result<_, InspectError>>()?;
    let started = std::time::Instant::now();
    let bar = progress.bar(runs.len() * items.len(), "saliency");
    let mut maps: Vec<Vec<Vec<f32>>> = Vec::with_capacity(runs.len());
    let mut distances = Vec::with_capacity(runs.len());
    for run in runs {
        let device = run.device.clone().autodiff();
        let model = run.model.clone().fork(&device);
        let loss = run
            .config
            .loss
            .init(num_classes, run.config.model.embedding_dim, &device)
            .map_err(TrainError::from)?;
        let distance = loss.distance().clone();
        distances.push(format!("{distance:?}"));
        let mut model_maps = Vec::with_capacity(items.len());
        for (k, (values, h, w)) in images.iter().enumerate() {
            let (h, w) = (*h, *w);
            let image = Tensor::<3>::from_data(TensorData::new(values.clone(), [3, h, w]), &device);
            let base = black_image_tensor(h, w, data_config.mean, data_config.std, &device);
            let seed = dml_data::mix(req.seed, k as u64);
            let sg = smoothgrad(&model, image, base, req.samples, 0.15, seed, &distance)?;
            model_maps.push(sg.map(req.order)?.0);
            bar.step(None);
        }
        maps.push(model_maps);
    }
    bar.finish();
    let maps_per_second = (runs.len() * items.len()) as f64 / started.elapsed().as_secs_f64().max(1e-9);
    let matrix = comparison_matrix(&maps).map_err(|e| InspectError::statistic("saliency comparison", e))?;
    Ok(Saliency {
        images,
        maps,
        distances,
        maps_per_second,
        matrix,
    })
}

/// One row per model pair `i < j` of `matrix`.
pub(super) fn pair_rows(matrix: &ComparisonMatrix, names: &[String]) -> Vec<PairRow> {
    let mut pairs = Vec::new();
    for i in 0..names.len() {
        for j in i + 1..names.len() {
            let c = matrix.correlation_at(i, j);
            let d = matrix.mean_jsd_at(i, j);
            pairs.push(PairRow {
                a: names[i].clone(),
                b: names[j].clone(),
                mean_r: c.mean,
                spread: c.spread,
                jsd_nats: d.nats,
                jsd_bits: d.bits,
            });
        }
    }
    pairs
}
