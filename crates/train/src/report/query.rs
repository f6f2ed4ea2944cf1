//! The query view of the report: a query image's nearest images of a split by the global distance,
//! by DIML's re-ranking and by AVSL's `d̂` (AVSL runs), each hit with its label, whether it is of
//! the query's class, its score and the explanations of the query–hit pair.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use burn::tensor::{Tensor, TensorData};
use dml_data::{ImageDataset, Manifest, Split};
use dml_explain::avsl::scorer::AvslBank;
use dml_ot::{FeatureBank, GridPoolConfig, StructuralRerankerConfig, to_locations};
use serde::Serialize;

use crate::error::TrainError;
use crate::eval::{self, EvalData};
use crate::explain::{load_images, values};
use crate::{avsl_eval, data};

use super::html;
use super::pair::{Availability, PairExplainer, PairReport};

/// What the query view is asked to do.
#[derive(Debug, Clone)]
pub struct QueryOptions {
    /// The query image.
    pub query: PathBuf,
    /// The split searched (its images are the gallery; a dataset with query and gallery rows
    /// searches its gallery for `test`).
    pub split: String,
    /// Hits shown per ranking.
    pub top: usize,
    /// Neighbours by global distance that DIML re-scores (its truncation number K).
    pub diml_k: usize,
}

/// One retrieved image.
#[derive(Debug, Clone, Serialize)]
pub struct Hit {
    /// 1-based rank in its list.
    pub rank: usize,
    /// Its row in the searched split (manifest order).
    pub row: usize,
    /// The image file.
    pub path: PathBuf,
    /// Its class id.
    pub label: u32,
    /// Its class name.
    pub class_name: String,
    /// Whether it has the query's class (`None` when the query's class is unknown).
    pub correct: Option<bool>,
    /// The ranking's score (see [`Ranking::score`]).
    pub score: f64,
    /// The hit as the model sees it, relative to the query report.
    pub image: String,
    /// The pair view of query and hit, relative to the query report.
    pub pair_page: String,
    /// `(method, figure)` thumbnails of the pair view, relative to the query report.
    pub thumbnails: Vec<(String, String)>,
}

/// The hits of one ranking, best first.
#[derive(Debug, Clone, Serialize)]
pub struct HitList {
    /// The hits.
    pub hits: Vec<Hit>,
}

/// One ranking method's list.
#[derive(Debug, Clone, Serialize)]
pub struct Ranking {
    /// `global`, `diml` or `avsl`.
    pub method: String,
    /// Its heading.
    pub title: String,
    /// What the score is and which way is better.
    pub score: String,
    /// The hits, or why the run has no such ranking.
    pub hits: Availability<HitList>,
}

/// Everything the query view shows (`report.json` of a query report).
#[derive(Debug, Clone, Serialize)]
pub struct QueryReport {
    /// The run directory.
    pub run: String,
    /// The checkpoint explained.
    pub checkpoint: PathBuf,
    /// The query file.
    pub query: PathBuf,
    /// The query as the model sees it, relative to the report.
    pub query_image: String,
    /// The query's class id, when the file is one of the dataset's images.
    pub query_label: Option<u32>,
    /// Its class name, likewise.
    pub query_class: Option<String>,
    /// The split searched.
    pub split: String,
    /// The dataset.
    pub dataset: String,
    /// Images searched (the query itself excluded when it is one of them).
    pub gallery_size: usize,
    /// Hits per ranking.
    pub top: usize,
    /// Global, DIML and AVSL rankings.
    pub rankings: Vec<Ranking>,
}

/// A ranked row and its score.
type Scored = (usize, f64);

/// Builds the query view into `dir` (the staging folder): the rankings, then every distinct hit's
/// pair view in `pairs/<row>/`.
pub fn query_report(
    explainer: &mut PairExplainer<'_>,
    run_dir: &Path,
    options: &QueryOptions,
    dir: &Path,
) -> Result<QueryReport, TrainError> {
    if options.top == 0 {
        return Err(TrainError::Config("--top: must be at least 1".into()));
    }
    if !options.query.is_file() {
        return Err(TrainError::Config(format!(
            "query image {}: no such file",
            options.query.display()
        )));
    }
    let split: Split = options
        .split
        .parse()
        .map_err(|e| TrainError::Config(format!("--split {}: {e}", options.split)))?;
    let run = explainer.run();
    let config = &run.config;
    let manifest = data::load_manifest(&config.data)?;
    let transform = data::eval_transform(&config.data);
    let gallery: Arc<ImageDataset> = match EvalData::of_split(&manifest, split, &transform)? {
        Some(EvalData::Single(ds)) => ds,
        Some(EvalData::QueryGallery { gallery, .. }) => gallery,
        None => {
            return Err(TrainError::Config(format!(
                "--split {}: the dataset {} has no images in that split",
                options.split, config.data.dataset
            )));
        }
    };
    let query_tuple = load_images(std::slice::from_ref(&options.query), explainer.pipeline())?;
    let grid = explainer_grid(explainer);
    let pool = GridPoolConfig {
        grid,
        ..GridPoolConfig::default()
    }
    .init()
    .map_err(|e| TrainError::Config(format!("--grid {grid}: {e}")))?;
    let (batch, threads) = (config.eval.batch_size, config.data.threads);
    let embedded = eval::embed(&run.model, &gallery, batch, threads, &run.device, Some(&pool))?;
    let x = Tensor::<4>::from_data(
        TensorData::new(
            query_tuple.values.clone(),
            [1, 3, query_tuple.height, query_tuple.width],
        ),
        &run.device,
    );
    let (q_embedding, q_maps) = run.model.forward_with_features(x.clone());
    let q_embedding = values(q_embedding);
    let q_locals = values(
        run.model
            .head
            .project_locations(to_locations(pool.forward(q_maps.last().clone())))
            .swap_dims(1, 2),
    );

    // The query file itself, when it is one of the split's images, is not its own hit.
    let canonical = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let query_canonical = canonical(&options.query);
    let rows = gallery.len();
    let row_path = |row: usize| manifest.image_path(&manifest.records[gallery.record_index(row)]);
    let candidates: Vec<usize> = (0..rows)
        .filter(|&r| canonical(&row_path(r)) != query_canonical)
        .collect();
    if candidates.is_empty() {
        return Err(TrainError::Config(format!(
            "--split {}: no image besides the query to retrieve",
            options.split
        )));
    }
    let (query_label, query_class) = match find_record(&manifest, &query_canonical) {
        Some(i) => (
            Some(manifest.records[i].class_id),
            Some(manifest.records[i].class_name.clone()),
        ),
        None => (None, None),
    };

    // Global: the run's retrieval distance (cosine distance for normalised embeddings).
    let dim = embedded.dim;
    let normalized = config.model.normalize;
    let mut global: Vec<Scored> = candidates
        .iter()
        .map(|&r| {
            let row = &embedded.data[r * dim..(r + 1) * dim];
            (r, global_distance(&q_embedding, row, normalized))
        })
        .collect();
    global.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));

    // DIML: the first K by global distance re-scored by cos + s_struct (as `train eval --diml-k`).
    let locals = embedded
        .locals
        .as_ref()
        .ok_or_else(|| TrainError::Config("local embeddings missing".into()))?;
    let q_bank = FeatureBank {
        maps: &q_locals,
        embeddings: &q_embedding,
        rows: 1,
        channels: dim,
        locations: grid * grid,
        embedding_dim: dim,
    };
    let g_bank = FeatureBank {
        maps: &locals.data,
        embeddings: &embedded.data,
        rows,
        channels: dim,
        locations: locals.locations,
        embedding_dim: dim,
    };
    let k = options.diml_k.max(options.top).min(global.len());
    let reranker = StructuralRerankerConfig {
        depth: k,
        ..StructuralRerankerConfig::default()
    }
    .init(&q_bank, &g_bank)
    .map_err(|e| TrainError::Config(format!("structural re-ranking: {e}")))?;
    let head: Vec<usize> = global[..k].iter().map(|&(r, _)| r).collect();
    let mut diml: Vec<Scored> = head
        .iter()
        .zip(reranker.scores(0, &head))
        .map(|(&r, (cosine, structural))| (r, cosine + structural))
        .collect();
    diml.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));

    // AVSL: d̂ of every candidate (AVSL runs only).
    let avsl: Option<Vec<Scored>> = match &run.avsl {
        Some(module) => {
            let split_bank = avsl_eval::embed(
                &run.model,
                module,
                config.avsl.certainty,
                &gallery,
                batch,
                threads,
                &run.device,
            )?;
            let outputs = module.embedder.forward(&run.model.backbone.forward_features(x));
            let mut q_bank = AvslBank::new();
            q_bank
                .push(&outputs, config.avsl.certainty)
                .map_err(|e| TrainError::Config(format!("AVSL embedding of {}: {e}", options.query.display())))?;
            let scorer = avsl_eval::scorer(module, &config.avsl)?;
            let rows: Vec<u32> = candidates.iter().map(|&r| r as u32).collect();
            let mut out = vec![0.0f32; rows.len()];
            scorer.distances(&q_bank, 0, &split_bank.bank, &rows, &mut out);
            let mut scored: Vec<Scored> = candidates.iter().zip(out).map(|(&r, d)| (r, f64::from(d))).collect();
            scored.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
            Some(scored)
        }
        None => None,
    };

    // Pair views of every distinct hit, in the order they first appear.
    let top = options.top.min(candidates.len());
    let lists: Vec<&[Scored]> = [Some(&global[..top]), Some(&diml[..top.min(diml.len())])]
        .into_iter()
        .chain(std::iter::once(avsl.as_ref().map(|a| &a[..top])))
        .flatten()
        .collect();
    let q_rgb = query_tuple.display(&run.config)?;
    dml_explain::render::save_png_atomic(&q_rgb[0], &dir.join("query.png")).map_err(crate::explain::render_error)?;
    let mut pairs: HashMap<usize, PairReport> = HashMap::new();
    for list in &lists {
        for &(row, _) in *list {
            if pairs.contains_key(&row) {
                continue;
            }
            let pair_dir = dir.join("pairs").join(row.to_string());
            std::fs::create_dir_all(&pair_dir).map_err(|e| TrainError::io(&pair_dir, e))?;
            let hit_path = row_path(row);
            let report = explainer.explain([&options.query, &hit_path], ["query", "hit"], &pair_dir)?;
            super::write_pair_files(&pair_dir, &report, run_dir, Some("../../report.html"))?;
            pairs.insert(row, report);
        }
    }
    let hit = |rank: usize, (row, score): Scored| -> Hit {
        let record = &manifest.records[gallery.record_index(row)];
        let pair = &pairs[&row];
        let base = format!("pairs/{row}");
        let mut thumbnails = vec![
            ("attention".to_string(), format!("{base}/{}", pair.files.attention)),
            ("DIML flows".to_string(), format!("{base}/{}", pair.files.flows)),
            ("saliency".to_string(), format!("{base}/{}", pair.files.saliency)),
        ];
        if let Some(last) = pair.files.avsl.last() {
            thumbnails.push(("AVSL top level".to_string(), format!("{base}/{last}")));
        }
        Hit {
            rank: rank + 1,
            row,
            path: row_path(row),
            label: record.class_id,
            class_name: record.class_name.clone(),
            correct: query_label.map(|l| l == record.class_id),
            score,
            image: format!("{base}/{}", pair.files.images[1]),
            pair_page: format!("{base}/report.html"),
            thumbnails,
        }
    };
    let list = |scored: &[Scored]| HitList {
        hits: scored.iter().take(top).enumerate().map(|(i, &s)| hit(i, s)).collect(),
    };
    let distance_name = if normalized {
        "cosine distance 1 - cos (smaller is closer)"
    } else {
        "Euclidean distance (smaller is closer)"
    };
    let rankings = vec![
        Ranking {
            method: "global".into(),
            title: "By global distance".into(),
            score: distance_name.into(),
            hits: Availability::Available(list(&global)),
        },
        Ranking {
            method: "diml".into(),
            title: format!("By DIML re-ranking (top {k} re-scored)"),
            score: "cos + structural similarity (larger is closer)".into(),
            hits: Availability::Available(list(&diml)),
        },
        Ranking {
            method: "avsl".into(),
            title: "By AVSL".into(),
            score: "overall distance d^ (smaller is closer)".into(),
            hits: match &avsl {
                Some(scored) => Availability::Available(list(scored)),
                None => Availability::NotAvailable {
                    reason: format!(
                        "run {} was not trained with [avsl] enabled = true, so it has no AVSL graph",
                        run_dir.display()
                    ),
                },
            },
        },
    ];
    let report = QueryReport {
        run: run_dir.display().to_string(),
        checkpoint: run.checkpoint.clone(),
        query: options.query.clone(),
        query_image: "query.png".into(),
        query_label,
        query_class,
        split: options.split.clone(),
        dataset: config.data.dataset.clone(),
        gallery_size: candidates.len(),
        top,
        rankings,
    };
    dml_data::write_atomic(&dir.join("report.html"), html::query_page(&report).as_bytes())?;
    crate::explain::write_json(&dir.join("report.json"), &report)?;
    Ok(report)
}

fn explainer_grid(explainer: &PairExplainer<'_>) -> usize {
    explainer.options().grid
}

/// The distance retrieval ranks by: `1 − cos` for normalised embeddings (the cosine of the stored
/// rows, whatever their norm), else Euclidean.
fn global_distance(query: &[f32], row: &[f32], normalized: bool) -> f64 {
    if normalized {
        let dot: f64 = query.iter().zip(row).map(|(a, b)| f64::from(*a) * f64::from(*b)).sum();
        let norm = |v: &[f32]| v.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt().max(1e-12);
        1.0 - dot / (norm(query) * norm(row))
    } else {
        query
            .iter()
            .zip(row)
            .map(|(a, b)| (f64::from(*a) - f64::from(*b)).powi(2))
            .sum::<f64>()
            .sqrt()
    }
}

/// The manifest record whose image is the file `canonical`, if any.
fn find_record(manifest: &Manifest, canonical: &Path) -> Option<usize> {
    manifest.records.iter().position(|r| {
        let path = manifest.image_path(r);
        std::fs::canonicalize(&path).is_ok_and(|p| p == canonical)
    })
}
