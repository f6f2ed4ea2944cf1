//! The query view of the report: a query image's nearest images of a split by the global distance,
//! by DIML's re-ranking and by AVSL's `d̂` (AVSL runs), each hit with its label, whether it is of
//! the query's class, its score and the explanations of the query–hit pair.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use burn::tensor::{Tensor, TensorData};
use dml_data::{ImageDataset, Manifest, Split};
use dml_explain::avsl::scorer::AvslBank;
use dml_ot::{GridPool, GridPoolConfig, StructuralRerankerConfig, to_locations};
use dml_train::data::{self, EvalData};
use dml_train::retrieval::{self, LocalEmbeddings, SplitEmbeddings};
use dml_train::{RunModel, TrainError};

use crate::error::InspectError;
use crate::io::{TupleImages, load_images, values};

use super::pair::PairExplainer;
use super::pair_report::{Availability, PairReport};
use super::query_report::{Hit, HitList, QueryOptions, QueryReport, Ranking};
use super::write;

/// A ranked row and its score.
type Scored = (usize, f64);

/// The split a query is searched in, with the embeddings of its images and of the query.
struct Searched {
    /// The manifest the split's rows index.
    manifest: Arc<dml_data::Manifest>,
    /// The gallery's images.
    gallery: Arc<ImageDataset>,
    /// The gallery's global and local embeddings.
    embedded: SplitEmbeddings,
    /// The query's global and local embeddings (one row).
    query: SplitEmbeddings,
    /// The query image as the model sees it.
    tuple: TupleImages,
    /// The same as a `[1, 3, H, W]` tensor on the run's device.
    image: Tensor<4>,
    /// The gallery rows other than the query file itself.
    candidates: Vec<usize>,
    /// The query's label and class name, when it is one of the manifest's images.
    label: Option<(u32, String)>,
}

impl Searched {
    /// The image file of gallery `row`.
    fn path(&self, row: usize) -> PathBuf {
        self.manifest
            .image_path(&self.manifest.records[self.gallery.record_index(row)])
    }
}

/// Builds the query view into `dir` (the staging folder): the rankings, then every distinct hit's
/// pair view in `pairs/<row>/`.
pub fn query_report(
    explainer: &mut PairExplainer<'_>,
    run_dir: &Path,
    options: &QueryOptions,
    dir: &Path,
) -> Result<QueryReport, InspectError> {
    if options.top == 0 {
        return Err(InspectError::Argument("--top: must be at least 1".into()));
    }
    if !options.query.is_file() {
        return Err(InspectError::Argument(format!(
            "query image {}: no such file",
            options.query.display()
        )));
    }
    let searched = search(explainer, options)?;
    let run = explainer.run();
    let normalized = run.config.model.normalize;
    let global = global_ranking(&searched, normalized);
    let k = options.diml_k.max(options.top).min(global.len());
    let diml = diml_ranking(&searched, &global[..k])?;
    let avsl = avsl_ranking(run, &searched, options)?;
    let top = options.top.min(searched.candidates.len());
    let lists: Vec<&[Scored]> = [Some(&global[..top]), Some(&diml[..top.min(diml.len())])]
        .into_iter()
        .chain(std::iter::once(avsl.as_ref().map(|a| &a[..top])))
        .flatten()
        .collect();
    let q_rgb = searched.tuple.rgb(&run.config)?;
    dml_explain::render::save_png_atomic(&q_rgb[0], &dir.join("query.png"))?;
    let pairs = explain_hits(explainer, &searched, &options.query, &lists, run_dir, dir)?;
    let list = |scored: &[Scored]| HitList {
        hits: scored
            .iter()
            .take(top)
            .enumerate()
            .map(|(i, &s)| hit(&searched, &pairs, i, s))
            .collect(),
    };
    let rankings = vec![
        Ranking {
            method: "global".into(),
            title: "By global distance".into(),
            score: if normalized {
                "cosine distance 1 - cos (smaller is closer)"
            } else {
                "Euclidean distance (smaller is closer)"
            }
            .into(),
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
        query_label: searched.label.as_ref().map(|l| l.0),
        query_class: searched.label.as_ref().map(|l| l.1.clone()),
        split: options.split.clone(),
        dataset: run.config.data.dataset.clone(),
        gallery_size: searched.candidates.len(),
        top,
        rankings,
    };
    write::query_files(dir, &report)?;
    Ok(report)
}

/// The split of `options` embedded with the run's model (global and local embeddings on the
/// report's grid), the query embedded the same way, and the candidates: every row but the query
/// file itself, when it is one of the split's images.
fn search(explainer: &PairExplainer<'_>, options: &QueryOptions) -> Result<Searched, InspectError> {
    let split: Split = options
        .split
        .parse()
        .map_err(|e| InspectError::Argument(format!("--split {}: {e}", options.split)))?;
    let run = explainer.run();
    let config = &run.config;
    let manifest = data::load_manifest(&config.data, explainer.progress())?;
    let transform = data::eval_transform(&config.data);
    let gallery: Arc<ImageDataset> = match EvalData::of_split(&manifest, split, &transform)? {
        Some(EvalData::Single(ds)) => ds,
        Some(EvalData::QueryGallery { gallery, .. }) => gallery,
        None => {
            return Err(InspectError::Argument(format!(
                "--split {}: the dataset {} has no images in that split",
                options.split, config.data.dataset
            )));
        }
    };
    let grid = explainer.options().grid;
    let pool = GridPoolConfig {
        grid,
        ..GridPoolConfig::default()
    }
    .init()
    .map_err(|e| InspectError::structural(format!("--grid {grid}"), e))?;
    let (batch, threads) = (config.eval.batch_size, config.data.threads);
    let embedded = retrieval::embed(&run.model, &gallery, batch, threads, &run.device, Some(&pool))?;
    let tuple = load_images(std::slice::from_ref(&options.query), explainer.pipeline())?;
    let image = Tensor::<4>::from_data(
        TensorData::new(tuple.values.clone(), [1, 3, tuple.height, tuple.width]),
        &run.device,
    );
    let query = embed_query(run, &pool, image.clone());
    // The query file itself, when it is one of the split's images, is not its own hit.
    let canonical = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let query_canonical = canonical(&options.query);
    let label = find_record(&manifest, &query_canonical).map(|i| {
        let r = &manifest.records[i];
        (r.class_id, r.class_name.clone())
    });
    let mut searched = Searched {
        manifest,
        gallery,
        embedded,
        query,
        tuple,
        image,
        candidates: Vec::new(),
        label,
    };
    searched.candidates = (0..searched.gallery.len())
        .filter(|&r| canonical(&searched.path(r)) != query_canonical)
        .collect();
    if searched.candidates.is_empty() {
        return Err(InspectError::Argument(format!(
            "--split {}: no image besides the query to retrieve",
            options.split
        )));
    }
    Ok(searched)
}

/// The query's global embedding and its local embeddings on `pool`'s grid, as
/// [`retrieval::embed`] computes them for the split.
fn embed_query(run: &RunModel, pool: &GridPool, image: Tensor<4>) -> SplitEmbeddings {
    let (embedding, maps) = run.model.forward_with_features(image);
    let data = values(embedding);
    let locals = values(
        run.model
            .head
            .project_locations(to_locations(pool.forward(maps.last().clone())))
            .swap_dims(1, 2),
    );
    SplitEmbeddings {
        dim: data.len(),
        data,
        labels: vec![0],
        locals: Some(LocalEmbeddings {
            data: locals,
            locations: pool.grid() * pool.grid(),
        }),
    }
}

/// Every candidate by the run's retrieval distance (cosine distance for normalised embeddings),
/// closest first.
fn global_ranking(searched: &Searched, normalized: bool) -> Vec<Scored> {
    let dim = searched.embedded.dim;
    let mut global: Vec<Scored> = searched
        .candidates
        .iter()
        .map(|&r| {
            let row = &searched.embedded.data[r * dim..(r + 1) * dim];
            (r, global_distance(&searched.query.data, row, normalized))
        })
        .collect();
    global.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
    global
}

/// DIML: the `head` of the global ranking re-scored by `cos + s_struct` (as `train eval
/// --diml-k`), largest first.
fn diml_ranking(searched: &Searched, head: &[Scored]) -> Result<Vec<Scored>, InspectError> {
    let missing = || InspectError::Argument("local embeddings missing".into());
    let q_bank = searched.query.feature_bank().ok_or_else(missing)?;
    let g_bank = searched.embedded.feature_bank().ok_or_else(missing)?;
    let reranker = StructuralRerankerConfig {
        depth: head.len(),
        ..StructuralRerankerConfig::default()
    }
    .init(&q_bank, &g_bank)
    .map_err(|e| InspectError::structural("structural re-ranking", e))?;
    let rows: Vec<usize> = head.iter().map(|&(r, _)| r).collect();
    let mut diml: Vec<Scored> = rows
        .iter()
        .zip(reranker.scores(0, &rows))
        .map(|(&r, (cosine, structural))| (r, cosine + structural))
        .collect();
    diml.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    Ok(diml)
}

/// AVSL: every candidate by `d̂` (AVSL runs only), closest first.
fn avsl_ranking(
    run: &RunModel,
    searched: &Searched,
    options: &QueryOptions,
) -> Result<Option<Vec<Scored>>, InspectError> {
    let Some(module) = &run.avsl else {
        return Ok(None);
    };
    let config = &run.config;
    let split_bank = retrieval::avsl::embed(
        &run.model,
        module,
        config.avsl.certainty,
        &searched.gallery,
        config.eval.batch_size,
        config.data.threads,
        &run.device,
    )?;
    let outputs = module
        .embedder
        .forward(&run.model.backbone.forward_features(searched.image.clone()));
    let mut q_bank = AvslBank::new();
    q_bank
        .push(&outputs, config.avsl.certainty)
        .map_err(|e| TrainError::NonFinite(format!("AVSL embedding of {}: {e}", options.query.display())))?;
    let scorer = retrieval::avsl::scorer(module, &config.avsl)?;
    let rows: Vec<u32> = searched.candidates.iter().map(|&r| r as u32).collect();
    let mut out = vec![0.0f32; rows.len()];
    scorer.distances(&q_bank, 0, &split_bank.bank, &rows, &mut out);
    let mut scored: Vec<Scored> = searched
        .candidates
        .iter()
        .zip(out)
        .map(|(&r, d)| (r, f64::from(d)))
        .collect();
    scored.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
    Ok(Some(scored))
}

/// The pair view of every distinct hit of `lists`, in the order they first appear, written into
/// `dir/pairs/<row>/`.
fn explain_hits(
    explainer: &mut PairExplainer<'_>,
    searched: &Searched,
    query: &Path,
    lists: &[&[Scored]],
    run_dir: &Path,
    dir: &Path,
) -> Result<HashMap<usize, PairReport>, InspectError> {
    let mut pairs: HashMap<usize, PairReport> = HashMap::new();
    for list in lists {
        for &(row, _) in *list {
            if pairs.contains_key(&row) {
                continue;
            }
            let pair_dir = dir.join("pairs").join(row.to_string());
            std::fs::create_dir_all(&pair_dir).map_err(|e| InspectError::io(&pair_dir, e))?;
            let hit_path = searched.path(row);
            let report = explainer.explain([query, &hit_path], ["query", "hit"], &pair_dir)?;
            write::pair_files(&pair_dir, &report, run_dir, Some("../../report.html"))?;
            pairs.insert(row, report);
        }
    }
    Ok(pairs)
}

/// The hit of `rank` (0-based) for gallery `row` with its `score`, linking its pair view.
fn hit(searched: &Searched, pairs: &HashMap<usize, PairReport>, rank: usize, (row, score): Scored) -> Hit {
    let record = &searched.manifest.records[searched.gallery.record_index(row)];
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
        path: searched.path(row),
        label: record.class_id,
        class_name: record.class_name.clone(),
        correct: searched.label.as_ref().map(|l| l.0 == record.class_id),
        score,
        image: format!("{base}/{}", pair.files.images[1]),
        pair_page: format!("{base}/report.html"),
        thumbnails,
    }
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
