//! `train explain benchmark`: N same-class and N different-class test pairs of every run, every
//! method the run supports and the baselines, scored by every metric of the table; written as
//! `benchmark.md`, `benchmark.json` and `benchmark.png` into a folder staged and renamed whole.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use burn::module::Module;
use burn::tensor::{Tensor, TensorData};
use dml_data::{Pipeline, Split};
use dml_datasets::synth::parts::Slot;
use dml_explain::render::save_png_atomic;
use dml_models::EmbeddingModel;
use dml_train::model::build_model;
use dml_train::{Progress, RunModel, RunRef, data};
use rand::SeedableRng;
use serde::Serialize;

use super::baselines::{BASELINES, baseline_map};
use super::figure::{ExampleRow, run_block, stack};
use super::ground_truth::{GroundTruth, Truth, present};
use super::methods::{MethodSettings, Methods, method_names};
use super::scores::{
    RoadSettings, complexity_of, localisation, map_similarity, part_faithfulness, positive, road, road_reference,
    shares,
};
use super::summary::{CascadeTable, Table, markdown_randomisation, markdown_table, randomisation_table, table};
use super::types::{METRICS, Metric, PairRecord, RandomisationRecord, Scores};
use crate::error::InspectError;
use crate::io::{TupleImages, load_images, values, write_json};
use crate::report::output::Staging;
use crate::triplets::{classes_with_pairs, draw_triplet};

/// What `train explain benchmark` is asked to do.
#[derive(Debug, Clone)]
pub struct BenchmarkRequest {
    /// The runs, each benchmarked on its own dataset's split.
    pub runs: Vec<RunRef>,
    /// `N`: the same-class pairs, and as many different-class pairs (each triplet's query against
    /// its positive and its negative).
    pub pairs: usize,
    /// The split the pairs are drawn from.
    pub split: Split,
    /// Seed of the pairs, of the random baseline, of the imputation noise and of the fresh weights
    /// of the randomisation test.
    pub seed: u64,
    /// Methods to run (empty: every method each run supports); see [`method_names`].
    pub methods: Vec<String>,
    /// Same-class pairs the randomisation cascade explains again at every step.
    pub randomisation_pairs: usize,
    /// SmoothGrad and DIML settings.
    pub settings: MethodSettings,
    /// ROAD's curves.
    pub road: RoadSettings,
    /// The output folder (replaced whole, or left as it was on an error).
    pub out: PathBuf,
}

/// One run's results.
#[derive(Debug, Clone, Serialize)]
pub struct RunBenchmark {
    /// The run directory.
    pub run: PathBuf,
    /// The checkpoint explained.
    pub checkpoint: PathBuf,
    /// The dataset the pairs come from.
    pub dataset: String,
    /// The methods run, then the baselines: the table's rows.
    pub rows: Vec<String>,
    /// Row → metric → mean and 95 % interval over the pairs.
    pub table: Table,
    /// The cascade's steps: what is fresh at each (`head`, then down to each stage).
    pub cascade_steps: Vec<String>,
    /// Row → per step, `spearman` and `ssim` with the trained model's map.
    pub randomisation: CascadeTable,
    /// Every pair's scores.
    pub pairs: Vec<PairRecord>,
    /// Every cascade step's comparisons.
    pub randomisation_records: Vec<RandomisationRecord>,
    /// Wall-clock seconds this run took.
    pub seconds: f64,
}

/// What `benchmark.json` holds.
#[derive(Debug, Clone, Serialize)]
pub struct BenchmarkReport {
    /// Same-class pairs per run (and as many different-class ones).
    pub pairs: usize,
    /// The split.
    pub split: String,
    /// The seed.
    pub seed: u64,
    /// What every map explains.
    pub similarity: &'static str,
    /// The metrics, in table order.
    pub metrics: Vec<Metric>,
    /// ROAD's fractions.
    pub road_fractions: Vec<f64>,
    /// ROAD's imputation noise.
    pub road_noise: f32,
    /// Random orders of ROAD's reference curve.
    pub road_repeats: usize,
    /// SmoothGrad samples.
    pub smoothgrad_samples: usize,
    /// Every run.
    pub runs: Vec<RunBenchmark>,
}

/// A same-class pair kept for the randomisation test: its images, the trained model's maps and its
/// seed.
struct Kept {
    tuple: TupleImages,
    maps: Vec<(String, Vec<f32>)>,
    seed: u64,
}

/// The similarity every map explains, and every curve scores.
const SIMILARITY: &str = "s(q, r) = (1 + cos(f(q), f(r))) / 2 for runs with normalised embeddings, \
                          1 / (1 + |f(q) - f(r)|) otherwise: positive, so that curves can be divided by s0";

/// `s(q, r)` of two embeddings (see [`SIMILARITY`]).
fn similarity(a: &[f32], b: &[f32], normalised: bool) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| f64::from(*x) * f64::from(*y)).sum();
    if normalised {
        let norm = |v: &[f32]| v.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt().max(1e-12);
        (1.0 + dot / (norm(a) * norm(b))) / 2.0
    } else {
        let d: f64 = a
            .iter()
            .zip(b)
            .map(|(x, y)| (f64::from(*x) - f64::from(*y)).powi(2))
            .sum::<f64>()
            .sqrt();
        1.0 / (1.0 + d)
    }
}

/// A run's model with `model` in place of its weights (a step of the randomisation cascade).
fn with_model(run: &RunModel, model: EmbeddingModel) -> RunModel {
    RunModel {
        config: run.config.clone(),
        checkpoint: run.checkpoint.clone(),
        model,
        device: run.device.clone(),
        avsl: run.avsl.clone(),
    }
}

/// Checks the request before anything is loaded or written.
fn validate(req: &BenchmarkRequest) -> Result<(), InspectError> {
    if req.runs.is_empty() {
        return Err(InspectError::Argument("--run: give at least one run".into()));
    }
    if req.pairs == 0 {
        return Err(InspectError::Argument(
            "--pairs 0: must be at least 1 (N same-class and N different-class pairs)".into(),
        ));
    }
    if req.road.repeats == 0 {
        return Err(InspectError::Argument("ROAD's random orders: at least 1".into()));
    }
    Ok(())
}

/// Runs the benchmark of `req` and writes its folder.
pub fn benchmark(req: &BenchmarkRequest, progress: &dyn Progress) -> Result<BenchmarkReport, InspectError> {
    validate(req)?;
    let staging = Staging::new(&req.out)?;
    let mut runs = Vec::new();
    let mut blocks = Vec::new();
    for run_ref in &req.runs {
        let (run, block) = run_benchmark(req, run_ref, progress)?;
        runs.push(run);
        blocks.push(block);
    }
    let report = BenchmarkReport {
        pairs: req.pairs,
        split: req.split.as_str().to_string(),
        seed: req.seed,
        similarity: SIMILARITY,
        metrics: METRICS.to_vec(),
        road_fractions: req.road.fractions.clone(),
        road_noise: req.road.noise,
        road_repeats: req.road.repeats,
        smoothgrad_samples: req.settings.samples,
        runs,
    };
    let dir = staging.dir();
    std::fs::write(dir.join("benchmark.md"), markdown(&report)).map_err(|e| InspectError::io(dir, e))?;
    write_json(&dir.join("benchmark.json"), &report)?;
    save_png_atomic(&stack(&blocks), &dir.join("benchmark.png"))?;
    staging.commit()?;
    Ok(report)
}

/// The query maps of one pair: every method's, then every baseline's, negatives set to 0.
fn all_maps(
    methods: &Methods,
    tuple: &TupleImages,
    baseline_seed: u64,
) -> Result<Vec<(String, Vec<f32>)>, InspectError> {
    let (h, w) = (tuple.height, tuple.width);
    let image = &tuple.values[..3 * h * w];
    let mut maps = methods.maps(tuple)?;
    maps.extend(
        BASELINES
            .iter()
            .map(|b| (b.to_string(), baseline_map(b, image, h, w, baseline_seed))),
    );
    Ok(maps.into_iter().map(|(n, m)| (n, positive(&m))).collect())
}

/// The seed of pair `(triplet, relation)`'s random baseline and imputation noise.
fn pair_seed(seed: u64, triplet: usize, relation: usize) -> u64 {
    seed ^ ((triplet as u64) << 1 | relation as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// Benchmarks one run; returns its results and its block of the figure.
fn run_benchmark(
    req: &BenchmarkRequest,
    run_ref: &RunRef,
    progress: &dyn Progress,
) -> Result<(RunBenchmark, image::RgbImage), InspectError> {
    let start = Instant::now();
    let run = run_ref.load(progress)?;
    let supported = method_names(&run);
    let selected = select_methods(&supported, &req.methods, &run_ref.run)?;
    let manifest = data::load_manifest(&run.config.data, progress)?;
    let pipeline = Pipeline::new(data::eval_transform(&run.config.data))?;
    let truth = GroundTruth::new(&run.config, &manifest, &pipeline)?;
    let by_class = classes_with_pairs(&manifest, &manifest.indices_of(req.split));
    let classes: Vec<u32> = by_class.keys().copied().collect();
    if classes.len() < 2 {
        return Err(InspectError::Argument(format!(
            "the {} split of {} has fewer than two classes with two images; no pair can be drawn",
            req.split.as_str(),
            run.config.data.dataset
        )));
    }
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(req.seed);
    let triplets: Vec<[usize; 3]> = (0..req.pairs)
        .map(|_| draw_triplet(&mut rng, &by_class, &classes))
        .collect();
    let dataset = run.config.data.dataset.clone();
    let checkpoint = run.checkpoint.clone();
    let run_dir = run_ref.run.clone();
    progress.note(&format!(
        "{}: {} same-class and {} different-class pairs, methods {}",
        run_dir.display(),
        req.pairs,
        req.pairs,
        selected.join(", ")
    ));
    let methods = Methods::new(run, &selected, &req.settings)?;
    let mut rows: Vec<String> = selected.clone();
    rows.extend(BASELINES.iter().map(|b| b.to_string()));

    let mut pairs = Vec::with_capacity(2 * req.pairs);
    let mut examples = Vec::new();
    let mut kept: Vec<Kept> = Vec::new();
    let bar = progress.bar(req.pairs, "benchmark");
    for (t, triplet) in triplets.iter().enumerate() {
        let query = &manifest.records[triplet[0]];
        let mut query_maps = Vec::with_capacity(2);
        let mut size = (0, 0);
        for (relation, &partner_index) in triplet[1..].iter().enumerate() {
            let partner = &manifest.records[partner_index];
            let tuple = load_images(&[manifest.image_path(query), manifest.image_path(partner)], &pipeline)?;
            size = (tuple.height, tuple.width);
            let seed = pair_seed(req.seed, t, relation);
            let maps = all_maps(&methods, &tuple, seed)?;
            let record = score_pair(
                &methods,
                &truth,
                &tuple,
                &maps,
                [query, partner],
                relation == 0,
                t,
                seed,
                &req.road,
            )?;
            pairs.push(record);
            if t < 2 {
                examples.push(ExampleRow {
                    image: tuple.rgb(&methods.run().config)?.swap_remove(0),
                    label: format!(
                        "{} vs {} ({})",
                        query.path,
                        partner.path,
                        if relation == 0 { "positive" } else { "negative" }
                    ),
                    maps: maps.iter().map(|(_, m)| m.clone()).collect(),
                });
            }
            if relation == 0 && t < req.randomisation_pairs {
                kept.push(Kept {
                    tuple,
                    maps: maps.clone(),
                    seed,
                });
            }
            query_maps.push(maps);
        }
        // Partner sensitivity: the query's map against its positive and against its negative.
        let same = pairs.len() - 2;
        for ((name, a), (_, b)) in query_maps[0].iter().zip(&query_maps[1]) {
            let scores = pairs[same].methods.entry(name.clone()).or_default();
            map_similarity(a, b, size.0, size.1, scores, ["partner_spearman", "partner_ssim"]);
        }
        bar.step(None);
    }
    bar.finish();

    let (cascade_steps, randomisation_records) = randomisation(&methods, &selected, &kept, req, progress)?;
    let table = table(&rows, &pairs);
    let randomisation = randomisation_table(&rows, &cascade_steps, &randomisation_records);
    let last_step: BTreeMap<String, Option<f64>> = rows
        .iter()
        .map(|r| {
            let last = randomisation
                .get(r)
                .and_then(|steps| steps.last())
                .and_then(|(_, cells)| cells["spearman"].mean);
            (r.clone(), last)
        })
        .collect();
    let title = format!(
        "{} ({}, {} + {} pairs)",
        run_dir.display(),
        dataset,
        req.pairs,
        req.pairs
    );
    let block = run_block(&title, &rows, &examples, &table, &last_step)?;
    Ok((
        RunBenchmark {
            run: run_dir,
            checkpoint,
            dataset,
            rows,
            table,
            cascade_steps,
            randomisation,
            pairs,
            randomisation_records,
            seconds: start.elapsed().as_secs_f64(),
        },
        block,
    ))
}

/// The methods to run: `requested` (every one of `supported` when empty), each of which the run
/// must support.
fn select_methods(
    supported: &[String],
    requested: &[String],
    run: &std::path::Path,
) -> Result<Vec<String>, InspectError> {
    if requested.is_empty() {
        return Ok(supported.to_vec());
    }
    for m in requested {
        if !supported.contains(m) {
            let why = if m == "avsl" {
                format!(
                    "run {} was not trained with [avsl] enabled = true, so it has no AVSL graph",
                    run.display()
                )
            } else {
                format!("run {} supports {}", run.display(), supported.join(", "))
            };
            return Err(InspectError::Argument(format!("--method {m}: {why}")));
        }
    }
    Ok(supported.iter().filter(|m| requested.contains(m)).cloned().collect())
}

/// Scores every map of one pair (`tuple`: the query, then the partner; `records` likewise).
#[allow(clippy::too_many_arguments)] // the model, the ground truth, the pair and its maps, and the curve settings.
fn score_pair(
    methods: &Methods,
    truth: &GroundTruth,
    tuple: &TupleImages,
    maps: &[(String, Vec<f32>)],
    records: [&dml_data::Record; 2],
    same: bool,
    triplet: usize,
    seed: u64,
    road_settings: &RoadSettings,
) -> Result<PairRecord, InspectError> {
    let (h, w) = (tuple.height, tuple.width);
    let plane = 3 * h * w;
    let image = &tuple.values[..plane];
    let run = methods.run();
    let device = &run.device;
    let normalised = run.config.model.normalize;
    let partner = Tensor::<4>::from_data(
        TensorData::new(tuple.values[plane..2 * plane].to_vec(), [1, 3, h, w]),
        device,
    );
    let f_partner = values(run.model.forward(partner));
    let dim = f_partner.len();
    let mut score = |batch: &[f32], k: usize| -> Result<Vec<f64>, String> {
        let x = Tensor::<4>::from_data(TensorData::new(batch.to_vec(), [k, 3, h, w]), device);
        let f = values(run.model.forward(x));
        Ok(f.chunks(dim).map(|fq| similarity(fq, &f_partner, normalised)).collect())
    };
    let reference = road_reference(image, h, w, road_settings, seed, &mut score);
    let s0 = {
        let f_query = values(run.model.forward(Tensor::<4>::from_data(
            TensorData::new(image.to_vec(), [1, 3, h, w]),
            device,
        )));
        similarity(&f_query, &f_partner, normalised)
    };
    let query = records[0];
    let object = match truth.no_objects() {
        None => {
            let mask = truth.object(query)?;
            if !mask.iter().any(|&o| o) {
                return Err(InspectError::Argument(format!(
                    "{}: its object mask is empty after the evaluation transform; localisation needs an object",
                    query.path
                )));
            }
            Some(mask)
        }
        Some(_) => None,
    };
    // The parts set: the query's slot masks, and the fall of s when each of its parts is removed.
    let mut part_drops = BTreeMap::new();
    let parts = match &truth.truth {
        Truth::Parts(config) => {
            let q = truth.parts(config, query)?;
            let partner_parts = truth.combination(config, records[1])?;
            let slots: Vec<Slot> = Slot::ALL
                .iter()
                .copied()
                .filter(|s| present(q.parts[s.index()]))
                .collect();
            let mut batch = Vec::with_capacity(slots.len() * plane);
            for &slot in &slots {
                batch.extend(truth.without(config, query, slot)?);
            }
            let scores = if slots.is_empty() {
                Vec::new()
            } else {
                score(&batch, slots.len()).map_err(InspectError::Argument)?
            };
            let drops: Vec<f64> = scores.iter().map(|s| s0 - s).collect();
            for (slot, d) in slots.iter().zip(&drops) {
                part_drops.insert(slot.name().to_string(), *d);
            }
            let differing: Vec<usize> = slots
                .iter()
                .enumerate()
                .filter(|(_, s)| q.parts[s.index()] != partner_parts[s.index()])
                .map(|(i, _)| i)
                .collect();
            Some((q, slots, drops, differing))
        }
        _ => None,
    };
    let no_parts = truth.no_parts();
    let mut methods_scores = BTreeMap::new();
    for (name, map) in maps {
        let mut s = Scores::default();
        match (&object, truth.no_objects()) {
            (Some(mask), _) => localisation(map, mask, h, w, &mut s),
            (None, reason) => {
                for m in ["pointing", "mass", "rank", "auc", "top_k"] {
                    s.set(m, Err(reason.unwrap_or("no object mask").to_string()));
                }
            }
        }
        complexity_of(map, h, w, &mut s);
        match &reference {
            Ok(reference) if name != "uniform" => {
                road(map, image, h, w, road_settings, seed, reference, &mut score, &mut s)
            }
            Ok(_) => {
                for m in ["road", "deletion", "insertion"] {
                    s.set(
                        m,
                        Err("a uniform map ranks no pixel above another: its curves are the random orders'".into()),
                    );
                }
            }
            Err(e) => {
                for m in ["road", "deletion", "insertion"] {
                    s.set(m, Err(e.clone()));
                }
            }
        }
        match &parts {
            Some((q, slots, drops, differing)) => {
                let masks: Vec<&[bool]> = slots.iter().map(|s| q.masks[s.index()].as_slice()).collect();
                match shares(map, &masks) {
                    Ok(share) => {
                        s.set("part_rho", part_faithfulness(&share, drops));
                        if same {
                            s.set("shared_mass", Ok(share.iter().sum()));
                        } else if differing.is_empty() {
                            s.set(
                                "differing_mass",
                                Err("the slots where the classes differ are empty in the query".into()),
                            );
                        } else {
                            s.set("differing_mass", Ok(differing.iter().map(|&i| share[i]).sum()));
                        }
                    }
                    Err(e) => {
                        for m in ["part_rho", if same { "shared_mass" } else { "differing_mass" }] {
                            s.set(m, Err(e.clone()));
                        }
                    }
                }
            }
            None => {
                let reason = no_parts.clone().unwrap_or_default();
                for m in ["part_rho", "differing_mass", "shared_mass"] {
                    s.set(m, Err(reason.clone()));
                }
            }
        }
        methods_scores.insert(name.clone(), s);
    }
    Ok(PairRecord {
        triplet,
        relation: if same { "same" } else { "different" },
        query: query.path.clone(),
        partner: records[1].path.clone(),
        similarity: s0,
        part_drops,
        methods: methods_scores,
    })
}

/// The cascading randomisation test on the `kept` same-class pairs (their tuple, trained maps and
/// seed): at every step the methods run again with the head and the stages down to that step's
/// fresh (Adebayo et al., NeurIPS 2018), and each map is compared with the trained model's. The
/// baselines know nothing of the model, so their maps do not change: the reference of a method
/// that is not explaining the model. AVSL's own embedder is not part of the cascade; its maps
/// change through the backbone.
fn randomisation(
    methods: &Methods,
    selected: &[String],
    kept: &[Kept],
    req: &BenchmarkRequest,
    progress: &dyn Progress,
) -> Result<(Vec<String>, Vec<RandomisationRecord>), InspectError> {
    let run = methods.run();
    let steps = run.model.cascade_steps();
    if kept.is_empty() {
        return Ok((steps, Vec::new()));
    }
    run.device.seed(req.seed);
    let fresh = build_model(&run.config, &run.device, progress)?.valid();
    let mut records = Vec::new();
    let bar = progress.bar(steps.len(), "randomisation");
    for (k, step) in steps.iter().enumerate() {
        let step_methods = Methods::new(
            with_model(run, run.model.cascade_randomised(k + 1, &fresh)),
            selected,
            &req.settings,
        )?;
        for (
            i,
            Kept {
                tuple,
                maps: trained,
                seed,
            },
        ) in kept.iter().enumerate()
        {
            let maps = all_maps(&step_methods, tuple, *seed)?;
            let mut scores = BTreeMap::new();
            for ((name, a), (_, b)) in trained.iter().zip(&maps) {
                let mut s = Scores::default();
                map_similarity(a, b, tuple.height, tuple.width, &mut s, ["spearman", "ssim"]);
                scores.insert(name.clone(), s);
            }
            records.push(RandomisationRecord {
                pair: i,
                step: step.clone(),
                methods: scores,
            });
        }
        bar.step(Some(step));
    }
    bar.finish();
    Ok((steps, records))
}

/// `benchmark.md`: per run its table, the randomisation table, then the metrics' definitions.
fn markdown(report: &BenchmarkReport) -> String {
    let mut out = format!(
        "# Explanation benchmark\n\n{n} same-class and {n} different-class pairs of the {split} split per run \
         (seed {seed}); every map is the query's, explaining its similarity to its partner, {sim}. Cells: mean \
         ± 95 % interval (Student's t) over the pairs that have the metric.\n",
        n = report.pairs,
        split = report.split,
        seed = report.seed,
        sim = report.similarity,
    );
    for run in &report.runs {
        out.push_str(&format!(
            "\n## {} ({}, checkpoint {}, {:.0} s)\n\n",
            run.run.display(),
            run.dataset,
            run.checkpoint.display(),
            run.seconds
        ));
        out.push_str(&markdown_table(&run.rows, &run.table));
        let kept = run
            .randomisation_records
            .iter()
            .filter(|r| r.step == run.cascade_steps[0])
            .count();
        out.push_str(&format!(
            "\nCascading randomisation ({kept} same-class pairs; each step makes the head and every stage down to \
             the one named fresh): Spearman / SSIM of each map with the trained model's (1: unchanged).\n\n"
        ));
        out.push_str(&markdown_randomisation(
            &run.rows,
            &run.cascade_steps,
            &run.randomisation,
        ));
    }
    out.push_str("\n## Metrics\n\n");
    for m in &report.metrics {
        out.push_str(&format!(
            "- `{}` ({}, {}): {}\n",
            m.name, m.family, m.better, m.definition
        ));
    }
    out
}
