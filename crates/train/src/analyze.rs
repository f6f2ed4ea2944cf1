//! `train analyze`: do different losses learn different features? (Kobs et al., ICCV 2021.)
//!
//! For several trained runs on the same dataset: SmoothGrad saliency of every model on the same
//! test images under each model's own distance, compared model by model (Pearson r aggregated in
//! Fisher-z, Jensen–Shannon divergence, the Table 2 analogue); NR-Precision of every manifest
//! property column on each model's test embeddings (the Table 6 analogue), with group means and a
//! Mann–Whitney U test between two groups of models; written as `report.md`, CSV tables, a
//! correlation heat map and a saliency grid.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use burn::module::Module;
use burn::tensor::{Tensor, TensorData};
use dml_data::{ImageDataset, Pipeline, Split};
use dml_explain::analysis::{
    ComparisonMatrix, MannWhitney, NrPrecision, comparison_matrix, mann_whitney_u, nr_precision_many,
};
use dml_explain::render::{GridRow, ValueRange, denormalize, map_grid, matrix_heatmap, save_png_atomic};
use dml_explain::saliency::smoothgrad::{MapOrder, black_image_tensor, smoothgrad};
use rand::SeedableRng;
use rand::seq::SliceRandom;
use serde::Serialize;

use crate::data;
use crate::error::TrainError;
use crate::eval;
use crate::explain::{RunModel, load_run_model};
use crate::trainer::progress_bar;

/// What `train analyze` is asked to do.
#[derive(Debug, Clone)]
pub struct AnalyzeRequest {
    /// The run directories (at least two), trained on the same dataset and image size.
    pub runs: Vec<PathBuf>,
    /// Named groups of runs (by run directory name), e.g. `ranking = [a, b]`; the first two are
    /// compared by a Mann–Whitney U test per property.
    pub groups: Vec<(String, Vec<String>)>,
    /// `best`, `latest` or a checkpoint directory of every run.
    pub checkpoint: String,
    /// Test images whose saliency is compared.
    pub images: usize,
    /// SmoothGrad samples per image (the paper: 50).
    pub samples: usize,
    /// The post-processing order of the maps.
    pub order: MapOrder,
    /// Seed of the image choice and of the SmoothGrad noise.
    pub seed: u64,
    /// Device override for every run.
    pub device: Option<String>,
    /// Output directory.
    pub out: PathBuf,
    /// Draw progress bars.
    pub progress: bool,
}

/// One model pair of the correlation table.
#[derive(Debug, Clone, Serialize)]
pub struct PairRow {
    /// First model.
    pub a: String,
    /// Second model.
    pub b: String,
    /// `tanh(mean atanh r)` of the per-image Pearson correlations.
    pub mean_r: f64,
    /// `tanh(std atanh r)`.
    pub spread: f64,
    /// Mean Jensen–Shannon divergence in nats (the authors' code).
    pub jsd_nats: f64,
    /// The same in bits (the paper's, bounded by 1).
    pub jsd_bits: f64,
}

/// One model's NR-Precision of one property.
#[derive(Debug, Clone, Serialize)]
pub struct NrRow {
    /// The model.
    pub model: String,
    /// The property column.
    pub property: String,
    /// Mean NR-Precision over the queries (Eq. 5).
    pub nr_precision: f64,
    /// R-Precision of the property (Eq. 4).
    pub r_precision: f64,
    /// `|NR-Precision| > 2.576`.
    pub significant: bool,
}

/// The Mann–Whitney comparison of two groups for one property.
#[derive(Debug, Clone, Serialize)]
pub struct GroupTest {
    /// The property.
    pub property: String,
    /// The first group's name and mean NR-Precision.
    pub first: (String, f64),
    /// The second group's name and mean NR-Precision.
    pub second: (String, f64),
    /// The test on the models' NR-Precision values.
    pub test: MannWhitney,
}

/// Everything `train analyze` computed (`analysis.json`).
#[derive(Debug, Clone, Serialize)]
pub struct AnalyzeReport {
    /// Model names (run directory names), in order.
    pub models: Vec<String>,
    /// Each model's distance, as its loss configuration names it.
    pub distances: Vec<String>,
    /// Test images compared.
    pub images: usize,
    /// SmoothGrad samples per image.
    pub samples: usize,
    /// The post-processing order.
    pub order: MapOrder,
    /// Every model pair.
    pub pairs: Vec<PairRow>,
    /// Every model and property.
    pub nr_precision: Vec<NrRow>,
    /// The group comparisons (when two groups were given).
    pub group_tests: Vec<GroupTest>,
    /// Saliency maps per second over all models.
    pub maps_per_second: f64,
    /// The files written.
    pub files: Vec<PathBuf>,
}

fn write_text(path: &Path, text: &str) -> Result<(), TrainError> {
    dml_data::write_atomic(path, text.as_bytes())?;
    Ok(())
}

fn name_of(run: &Path) -> String {
    run.file_name()
        .map_or_else(|| run.display().to_string(), |n| n.to_string_lossy().into_owned())
}

/// Runs the analysis of `req` (see the module documentation) and writes its files into `req.out`.
pub fn analyze(req: &AnalyzeRequest) -> Result<AnalyzeReport, TrainError> {
    if req.runs.len() < 2 {
        return Err(TrainError::Config(format!(
            "analyze compares models: give at least two runs, got {}",
            req.runs.len()
        )));
    }
    if req.images == 0 || req.samples == 0 {
        return Err(TrainError::Config("--images and --samples must be at least 1".into()));
    }
    let names: Vec<String> = req.runs.iter().map(|r| name_of(r)).collect();
    for (i, n) in names.iter().enumerate() {
        if names[..i].contains(n) {
            return Err(TrainError::Config(format!(
                "two runs are named {n:?}; give runs with distinct directory names"
            )));
        }
    }
    for (group, members) in &req.groups {
        if let Some(m) = members.iter().find(|m| !names.contains(m)) {
            return Err(TrainError::Config(format!(
                "--group {group}: {m:?} is not one of the runs {names:?}"
            )));
        }
    }
    let runs: Vec<RunModel> = req
        .runs
        .iter()
        .map(|r| load_run_model(r, &req.checkpoint, req.device.as_deref()))
        .collect::<Result<_, _>>()?;
    let data_config = &runs[0].config.data;
    for (run, name) in runs.iter().zip(&names).skip(1) {
        let d = &run.config.data;
        if d.dataset != data_config.dataset || d.image_size != data_config.image_size {
            return Err(TrainError::Config(format!(
                "run {name} uses {} at {}px, but {} uses {} at {}px; analyze compares models on the same images",
                d.dataset, d.image_size, names[0], data_config.dataset, data_config.image_size
            )));
        }
    }
    let manifest = data::load_manifest(data_config)?;
    let transform = data::eval_transform(data_config);
    let test = Arc::new(ImageDataset::new(
        manifest.clone(),
        &[Split::Test],
        Pipeline::new(transform)?,
    ));
    if test.is_empty() {
        return Err(TrainError::Config(format!(
            "{} has no test images",
            data_config.dataset
        )));
    }
    let mut items: Vec<usize> = (0..test.len()).collect();
    items.shuffle(&mut rand_chacha::ChaCha8Rng::seed_from_u64(req.seed));
    items.truncate(req.images);
    items.sort_unstable();
    std::fs::create_dir_all(&req.out).map_err(|e| TrainError::io(&req.out, e))?;

    // Saliency of every model on the same images.
    let num_classes = {
        let mut c: Vec<u32> = manifest.records.iter().map(|r| r.class_id).collect();
        c.sort_unstable();
        c.dedup();
        c.len().max(2)
    };
    // Every model sees the same images: decode and transform each once.
    let images_hw: Vec<(Vec<f32>, usize, usize)> = items
        .iter()
        .map(|&item| {
            let (values, (h, w)) = test.load(item, 0)?;
            Ok((values, h as usize, w as usize))
        })
        .collect::<Result<_, TrainError>>()?;
    let started = std::time::Instant::now();
    let progress = progress_bar(req.progress, runs.len() * items.len(), "saliency".into());
    let mut maps: Vec<Vec<Vec<f32>>> = Vec::with_capacity(runs.len());
    let mut distances = Vec::with_capacity(runs.len());
    for run in &runs {
        let device = run.device.clone().autodiff();
        let model = run.model.clone().fork(&device);
        let loss = run
            .config
            .loss
            .init(num_classes, run.config.model.embedding_dim, &device)?;
        let distance = loss.distance().clone();
        distances.push(format!("{distance:?}"));
        let mut model_maps = Vec::with_capacity(items.len());
        for (k, (values, h, w)) in images_hw.iter().enumerate() {
            let (h, w) = (*h, *w);
            let image = Tensor::<3>::from_data(TensorData::new(values.clone(), [3, h, w]), &device);
            let base = black_image_tensor(h, w, data_config.mean, data_config.std, &device);
            let seed = dml_data::mix(req.seed, k as u64);
            let sg = smoothgrad(&model, image, base, req.samples, 0.15, seed, &distance)?;
            model_maps.push(sg.map(req.order)?.0);
            progress.inc(1);
        }
        maps.push(model_maps);
    }
    progress.finish_and_clear();
    let maps_per_second = (runs.len() * items.len()) as f64 / started.elapsed().as_secs_f64().max(1e-9);
    let matrix: ComparisonMatrix =
        comparison_matrix(&maps).map_err(|e| TrainError::Config(format!("saliency comparison: {e}")))?;
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

    // NR-Precision of the class (the synthetic set's shape) and of every property column on each
    // model's test embeddings: the class is the positive reference, an invisible column such as the
    // synthetic set's `control` the negative one.
    let mut properties = vec!["class".to_string()];
    properties.extend(manifest.property_names.iter().cloned());
    let properties = &properties;
    let codes: Vec<Vec<u32>> = (0..properties.len())
        .map(|p| {
            let mut index = BTreeMap::<&str, u32>::new();
            (0..test.len())
                .map(|item| {
                    let record = &manifest.records[test.record_index(item)];
                    let value = if p == 0 {
                        record.class_name.as_str()
                    } else {
                        record.properties[p - 1].as_str()
                    };
                    let next = index.len() as u32;
                    *index.entry(value).or_insert(next)
                })
                .collect()
        })
        .collect();
    let columns: Vec<&[u32]> = codes.iter().map(Vec::as_slice).collect();
    let progress = progress_bar(req.progress, runs.len(), "embeddings".into());
    let mut nr: Vec<Vec<NrPrecision>> = Vec::with_capacity(runs.len());
    for run in &runs {
        let e = eval::embed(
            &run.model,
            &test,
            run.config.eval.batch_size,
            run.config.data.threads,
            &run.device,
            None,
        )?;
        let values = if properties.is_empty() {
            Vec::new()
        } else {
            nr_precision_many(&e.data, e.dim, &columns)
                .map_err(|err| TrainError::Config(format!("NR-Precision: {err}")))?
        };
        nr.push(values);
        progress.inc(1);
    }
    progress.finish_and_clear();
    let nr_rows: Vec<NrRow> = names
        .iter()
        .zip(&nr)
        .flat_map(|(model, values)| {
            properties.iter().zip(values).map(move |(property, v)| NrRow {
                model: model.clone(),
                property: property.clone(),
                nr_precision: v.nr_precision,
                r_precision: v.r_precision,
                significant: v.significant,
            })
        })
        .collect();
    let mut group_tests = Vec::new();
    if let [(first, a), (second, b), ..] = req.groups.as_slice() {
        let of = |members: &[String], p: usize| -> Vec<f64> {
            members
                .iter()
                .map(|m| nr[names.iter().position(|n| n == m).expect("validated above")][p].nr_precision)
                .collect()
        };
        for (p, property) in properties.iter().enumerate() {
            let (x, y) = (of(a, p), of(b, p));
            let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
            let test = mann_whitney_u(&x, &y).map_err(|e| TrainError::Config(format!("Mann-Whitney U: {e}")))?;
            group_tests.push(GroupTest {
                property: property.clone(),
                first: (first.clone(), mean(&x)),
                second: (second.clone(), mean(&y)),
                test,
            });
        }
    }

    // Files.
    let mut files = Vec::new();
    let mut csv = String::from("model_a,model_b,mean_r,spread,jsd_nats,jsd_bits\n");
    for p in &pairs {
        csv += &format!(
            "{},{},{},{},{},{}\n",
            p.a, p.b, p.mean_r, p.spread, p.jsd_nats, p.jsd_bits
        );
    }
    let path = req.out.join("saliency_pairs.csv");
    write_text(&path, &csv)?;
    files.push(path);
    let mut csv = String::from("model,property,nr_precision,r_precision,significant\n");
    for r in &nr_rows {
        csv += &format!(
            "{},{},{},{},{}\n",
            r.model, r.property, r.nr_precision, r.r_precision, r.significant
        );
    }
    let path = req.out.join("nr_precision.csv");
    write_text(&path, &csv)?;
    files.push(path);
    let n = names.len();
    let correlations: Vec<f32> = (0..n * n)
        .map(|k| matrix.correlation_at(k / n, k % n).mean as f32)
        .collect();
    let low = correlations.iter().copied().fold(1.0f32, f32::min).min(0.0);
    let range = ValueRange::new(low, 1.0).map_err(|e| TrainError::Config(e.to_string()))?;
    let heat = matrix_heatmap(&correlations, &names, range, 72, 2).map_err(|e| TrainError::Config(e.to_string()))?;
    let path = req.out.join("saliency_correlation.png");
    save_png_atomic(&heat, &path).map_err(|e| TrainError::Config(e.to_string()))?;
    files.push(path);
    let shown = items.len().min(6);
    let rgb: Vec<image::RgbImage> = images_hw[..shown]
        .iter()
        .map(|(v, h, w)| denormalize(v, *h, *w, data_config.mean, data_config.std))
        .collect::<Result<_, _>>()
        .map_err(|e| TrainError::Config(e.to_string()))?;
    let rows: Vec<GridRow> = (0..shown)
        .map(|k| GridRow {
            image: &rgb[k],
            maps: maps.iter().map(|m| m[k].as_slice()).collect(),
        })
        .collect();
    let grid = map_grid(&rows, &names, 144, 1).map_err(|e| TrainError::Config(e.to_string()))?;
    let path = req.out.join("saliency_grid.png");
    save_png_atomic(&grid, &path).map_err(|e| TrainError::Config(e.to_string()))?;
    files.push(path);
    let report = AnalyzeReport {
        models: names.clone(),
        distances,
        images: items.len(),
        samples: req.samples,
        order: req.order,
        pairs,
        nr_precision: nr_rows,
        group_tests,
        maps_per_second,
        files: files.clone(),
    };
    let md = markdown(&report, properties);
    let path = req.out.join("report.md");
    write_text(&path, &md)?;
    let json = req.out.join("analysis.json");
    let text = serde_json::to_string_pretty(&report).map_err(|e| TrainError::io(&json, e))?;
    write_text(&json, &text)?;
    let mut report = report;
    report.files.push(path);
    report.files.push(json);
    Ok(report)
}

/// `report.md`: the Table 2 and Table 6 analogues and the group tests.
fn markdown(r: &AnalyzeReport, properties: &[String]) -> String {
    let mut s = format!(
        "# Do the models learn similar features?\n\n{} models, SmoothGrad saliency ({} samples, {} order) on {} test images \
         against a black image, each under its own distance.\n\n## Saliency similarity (Kobs et al., Table 2)\n\n\
         | model A | model B | Pearson r (Fisher mean ± spread) | JSD (bits) | JSD (nats) |\n|---|---|---|---|---|\n",
        r.models.len(),
        r.samples,
        match r.order {
            MapOrder::Code => "the code's",
            MapOrder::Paper => "the paper's",
        },
        r.images
    );
    for p in &r.pairs {
        s += &format!(
            "| {} | {} | {:.3} ± {:.3} | {:.4} | {:.4} |\n",
            p.a, p.b, p.mean_r, p.spread, p.jsd_bits, p.jsd_nats
        );
    }
    s += "\n## NR-Precision of the image properties (Kobs et al., Table 6)\n\n";
    s += "Values beyond ±2.576 (marked \\*) differ from chance at the 1 % level.\n\n| model |";
    for p in properties {
        s += &format!(" {p} |");
    }
    s += "\n|---|";
    s += &"---|".repeat(properties.len());
    s += "\n";
    for m in &r.models {
        s += &format!("| {m} |");
        for p in properties {
            if let Some(row) = r.nr_precision.iter().find(|x| &x.model == m && &x.property == p) {
                let star = if row.significant { "\\*" } else { "" };
                s += &format!(" {:.2}{star} |", row.nr_precision);
            }
        }
        s += "\n";
    }
    if !r.group_tests.is_empty() {
        s += "\n## Groups (Mann–Whitney U, two-sided)\n\n| property | group A (mean NR) | group B (mean NR) | U | p |\n|---|---|---|---|---|\n";
        for t in &r.group_tests {
            s += &format!(
                "| {} | {} ({:.2}) | {} ({:.2}) | {:.1} | {:.3} |\n",
                t.property, t.first.0, t.first.1, t.second.0, t.second.1, t.test.u1, t.test.p_two_sided
            );
        }
    }
    s += &format!("\nSaliency maps per second: {:.1}.\n", r.maps_per_second);
    s
}
