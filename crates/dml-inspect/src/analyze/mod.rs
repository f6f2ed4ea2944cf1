//! `train analyze`: do different losses learn different features? (Kobs et al., ICCV 2021.)
//!
//! For several trained runs on the same dataset: SmoothGrad saliency of every model on the same
//! test images under each model's own distance, compared model by model (Pearson r aggregated in
//! Fisher-z, Jensen–Shannon divergence, the Table 2 analogue); NR-Precision of every manifest
//! property column on each model's test embeddings (the Table 6 analogue), with group means and a
//! Mann–Whitney U test between two groups of models; written as `report.md`, CSV tables, a
//! correlation heat map and a saliency grid.

use std::path::Path;
use std::sync::Arc;

use dml_data::{ImageDataset, Manifest, Pipeline, Split};
use dml_train::{Progress, RunModel, RunRef, data};
use rand::SeedableRng;
use rand::seq::SliceRandom;

use crate::error::InspectError;

mod files;
mod properties;
mod report;
mod saliency;

pub use report::{AnalyzeReport, AnalyzeRequest, GroupTest, NrRow, PairRow};

/// A run's name in the tables: its directory's name.
fn name_of(run: &Path) -> String {
    run.file_name()
        .map_or_else(|| run.display().to_string(), |n| n.to_string_lossy().into_owned())
}

/// The runs' names, after checking the request: at least two runs with distinct names, at least
/// one image and sample, and groups whose members are runs.
fn checked_names(req: &AnalyzeRequest) -> Result<Vec<String>, InspectError> {
    if req.runs.len() < 2 {
        return Err(InspectError::Argument(format!(
            "analyze compares models: give at least two runs, got {}",
            req.runs.len()
        )));
    }
    if req.images == 0 || req.samples == 0 {
        return Err(InspectError::Argument(
            "--images and --samples must be at least 1".into(),
        ));
    }
    let names: Vec<String> = req.runs.iter().map(|r| name_of(r)).collect();
    for (i, n) in names.iter().enumerate() {
        if names[..i].contains(n) {
            return Err(InspectError::Argument(format!(
                "two runs are named {n:?}; give runs with distinct directory names"
            )));
        }
    }
    for (group, members) in &req.groups {
        if let Some(m) = members.iter().find(|m| !names.contains(m)) {
            return Err(InspectError::Argument(format!(
                "--group {group}: {m:?} is not one of the runs {names:?}"
            )));
        }
    }
    Ok(names)
}

/// Loads every run of `req`, checking that they share the first run's dataset and image size.
fn load_runs(req: &AnalyzeRequest, names: &[String], progress: &dyn Progress) -> Result<Vec<RunModel>, InspectError> {
    let runs: Vec<RunModel> = req
        .runs
        .iter()
        .map(|r| {
            RunRef {
                run: r.clone(),
                checkpoint: req.checkpoint.clone(),
                device: req.device.clone(),
            }
            .load(progress)
        })
        .collect::<Result<_, _>>()?;
    let first = &runs[0].config.data;
    for (run, name) in runs.iter().zip(names).skip(1) {
        let d = &run.config.data;
        if d.dataset != first.dataset || d.image_size != first.image_size {
            return Err(InspectError::Argument(format!(
                "run {name} uses {} at {}px, but {} uses {} at {}px; analyze compares models on the same images",
                d.dataset, d.image_size, names[0], first.dataset, first.image_size
            )));
        }
    }
    Ok(runs)
}

/// The images every model is compared on.
struct TestImages {
    /// The dataset's manifest.
    manifest: Arc<Manifest>,
    /// Its test split.
    test: Arc<ImageDataset>,
    /// The `req.images` items of `test` chosen by `req.seed`, ascending.
    items: Vec<usize>,
}

/// The test split every model is compared on, and the `req.images` of it chosen by `req.seed`
/// (in ascending order).
fn test_images(req: &AnalyzeRequest, run: &RunModel, progress: &dyn Progress) -> Result<TestImages, InspectError> {
    let data_config = &run.config.data;
    let manifest = data::load_manifest(data_config, progress)?;
    let transform = data::eval_transform(data_config);
    let test = Arc::new(ImageDataset::new(
        manifest.clone(),
        &[Split::Test],
        Pipeline::new(transform)?,
    ));
    if test.is_empty() {
        return Err(InspectError::Argument(format!(
            "{} has no test images",
            data_config.dataset
        )));
    }
    let mut items: Vec<usize> = (0..test.len()).collect();
    items.shuffle(&mut rand_chacha::ChaCha8Rng::seed_from_u64(req.seed));
    items.truncate(req.images);
    items.sort_unstable();
    Ok(TestImages { manifest, test, items })
}

/// Runs the analysis of `req` (see the module documentation) and writes its files into `req.out`;
/// bars and notes go to `progress`.
pub fn analyze(req: &AnalyzeRequest, progress: &dyn Progress) -> Result<AnalyzeReport, InspectError> {
    let names = checked_names(req)?;
    let runs = load_runs(req, &names, progress)?;
    let TestImages { manifest, test, items } = test_images(req, &runs[0], progress)?;
    std::fs::create_dir_all(&req.out).map_err(|e| InspectError::io(&req.out, e))?;
    let saliency = saliency::compare(req, &runs, &manifest, &test, &items, progress)?;
    let pairs = saliency::pair_rows(&saliency.matrix, &names);
    let properties = properties::names(&manifest);
    let nr = properties::nr_precision(&runs, &manifest, &test, &properties, progress)?;
    let nr_rows = properties::nr_rows(&names, &properties, &nr);
    let group_tests = properties::group_tests(&req.groups, &names, &properties, &nr)?;
    let mut files = vec![
        files::pairs_csv(&req.out, &pairs)?,
        files::nr_csv(&req.out, &nr_rows)?,
        files::correlation_heatmap(&req.out, &saliency.matrix, &names)?,
        files::saliency_grid(&req.out, &saliency, &runs[0].config.data, &names)?,
    ];
    let mut report = AnalyzeReport {
        models: names,
        distances: saliency.distances,
        images: items.len(),
        samples: req.samples,
        order: req.order,
        pairs,
        nr_precision: nr_rows,
        group_tests,
        maps_per_second: saliency.maps_per_second,
        files: files.clone(),
    };
    files.extend(files::summaries(&req.out, &report, &properties)?);
    report.files = files;
    Ok(report)
}
