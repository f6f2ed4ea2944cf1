//! `train eval`: a checkpoint of a run on a dataset split → metrics table, optionally
//! exporting the embeddings as `.npy`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use dml_data::Split;
use dml_eval::AccuracyReport;
use dml_ot::{GridPoolConfig, StructuralRerankerConfig};

use crate::data::{self, EvalData};
use crate::error::TrainError;
use crate::metrics::{Metrics, all_metrics, metric_name, metric_value};
use crate::model::{RunModel, RunRef};
use crate::npy;
use crate::progress::Progress;
use crate::retrieval::avsl::{self as avsl_retrieval, Depth};
use crate::retrieval::rerank::StructuralRerankerAdapter;
use crate::retrieval::{self, SplitEmbeddings};

/// What `train eval` is asked to do.
#[derive(Debug, Clone)]
pub struct EvalRequest {
    /// The run, its checkpoint and the device.
    pub run: RunRef,
    /// The split to evaluate (default: the run's `eval.split`).
    pub split: Option<String>,
    /// Another dataset (name or manifest) than the run's.
    pub dataset: Option<String>,
    /// Write `embeddings.npy` and `labels.npy` into this directory.
    pub export: Option<PathBuf>,
    /// DIML multi-scale re-ranking (Sec. 3.3) of each query's top `k` neighbours on a `grid × grid`
    /// grid of local embeddings, reported next to the plain ranking; `k = 0` turns it off.
    pub diml: DimlEval,
    /// For AVSL runs: re-score each query's top `K` by `d̂`; `None` the run's choice (exact up to
    /// `avsl.exact_limit` images, else the top `avsl.rerank_k`); `Some(0)` no `d̂`.
    pub avsl_k: Option<usize>,
    /// The metrics the table shows (every metric of [`all_metrics`] is computed and
    /// written to `metrics.json` whatever this says).
    pub metrics: Vec<dml_eval::Metric>,
    /// The directory `metrics.json` is written into (`None`: `<run>/eval`).
    pub out: Option<PathBuf>,
}

/// The re-ranking options of `train eval` (`--diml-k`, `--diml-grid`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DimlEval {
    /// Neighbours re-scored per query (DIML's truncation number K; 0 = off).
    pub k: usize,
    /// Side `G` of the grid the last feature map is reduced to.
    pub grid: usize,
}

impl Default for DimlEval {
    /// Off, with DIML's grid of 4 ready for `k > 0`.
    fn default() -> Self {
        Self { k: 0, grid: 4 }
    }
}

/// The metrics of the re-ranked evaluation.
#[derive(Debug, Clone)]
pub struct Reranked {
    /// What re-scored the lists (e.g. `K = 20 (G = 4)` for DIML, `d̂, K = 100` for AVSL).
    pub label: String,
    /// Metrics after re-ranking.
    pub metrics: Metrics,
    /// Wall-clock milliseconds per query that re-ranking added (scoring with the re-ranker minus
    /// scoring without it, divided by the number of queries).
    pub ms_per_query: f64,
    /// Every metric after re-ranking.
    pub report: AccuracyReport,
}

/// The outcome of an evaluation.
#[derive(Debug, Clone)]
pub struct EvalOutcome {
    /// The checkpoint that was evaluated.
    pub checkpoint: PathBuf,
    /// The split.
    pub split: String,
    /// Its metrics.
    pub metrics: Metrics,
    /// Number of query images.
    pub queries: usize,
    /// The re-ranked metrics when [`EvalRequest::diml`] asked for them.
    pub reranked: Option<Reranked>,
    /// Every metric of [`all_metrics`].
    pub report: AccuracyReport,
    /// The metrics the table shows ([`EvalRequest::metrics`]).
    pub shown: Vec<dml_eval::Metric>,
    /// The files written: `metrics.json` and any exported embeddings.
    pub written: Vec<PathBuf>,
    /// Neighbours re-ranking reorders per query (DIML's or AVSL's K), when it ran.
    pub rerank_k: Option<usize>,
    /// The smallest `R` of any query (its class's other images among the gallery), the depth
    /// R-Precision and MAP@R look at.
    pub min_r: usize,
}

/// The re-ranked metrics of `report`, labelled `label`, with the time re-ranking added per query:
/// `seconds` of scoring with the re-ranker against `plain_seconds` without it, over `queries`.
fn reranked(label: String, report: AccuracyReport, seconds: f64, plain_seconds: f64, queries: usize) -> Reranked {
    Reranked {
        label,
        metrics: Metrics::from_report(&report),
        ms_per_query: 1e3 * (seconds - plain_seconds).max(0.0) / queries.max(1) as f64,
        report,
    }
}

/// Runs an evaluation request (a `best` without a `val` split, or a dataset prepared on first
/// use, is reported through `progress`).
pub fn run_eval(req: &EvalRequest, progress: &dyn Progress) -> Result<EvalOutcome, TrainError> {
    let RunModel {
        mut config,
        checkpoint: dir,
        model,
        device,
        avsl,
    } = req.run.load(progress)?;
    if let Some(d) = &req.dataset {
        config.data.dataset = d.clone();
    }
    let split_name = req.split.clone().unwrap_or_else(|| config.eval.split.clone());
    let split: Split = split_name
        .parse()
        .map_err(|e| TrainError::Argument(format!("--split: {e}")))?;
    let manifest = data::load_manifest(&config.data, progress)?;
    let data = EvalData::of_split(&manifest, split, &data::eval_transform(&config.data))?.ok_or_else(|| {
        TrainError::Argument(format!(
            "--split {split_name}: the dataset {} has no images in that split",
            config.data.dataset
        ))
    })?;
    let (batch, threads) = (config.eval.batch_size, config.data.threads);
    if let Some(module) = &avsl {
        if req.diml.k > 0 {
            return Err(TrainError::Argument(
                "--diml-k: this is an AVSL run; its re-ranking is --avsl-k".into(),
            ));
        }
        return run_eval_avsl(req, &config, &model, module, &data, &device, dir, split_name);
    }
    let distance = retrieval::distance_for(config.model.normalize);
    // Local embeddings are computed only when re-ranking asks for them.
    let pool = (req.diml.k > 0)
        .then(|| {
            GridPoolConfig {
                grid: req.diml.grid,
                ..GridPoolConfig::default()
            }
            .init()
        })
        .transpose()
        .map_err(|e| TrainError::structural(format!("--diml-grid {}", req.diml.grid), e))?;
    let pool = pool.as_ref();
    let (query, gallery) = data.embed_each(|ds| retrieval::embed(&model, ds, batch, threads, &device, pool))?;
    let all = all_metrics();
    let started = Instant::now();
    let report = retrieval::score_report(&query, gallery.as_ref(), distance, None, &all)?;
    let plain_time = started.elapsed().as_secs_f64();
    let gallery_bank = gallery.as_ref().map_or(query.feature_bank(), |g| g.feature_bank());
    let reranked = if let (Some(q), Some(g)) = (query.feature_bank(), gallery_bank) {
        let reranker = StructuralRerankerConfig {
            depth: req.diml.k,
            ..StructuralRerankerConfig::default()
        }
        .init(&q, &g)
        .map_err(|e| TrainError::structural("structural re-ranking", e))?;
        let reranker = StructuralRerankerAdapter(reranker);
        let started = Instant::now();
        let reranked = retrieval::score_report(&query, gallery.as_ref(), distance, Some(&reranker), &all)?;
        Some(self::reranked(
            format!("K = {} (G = {})", req.diml.k, req.diml.grid),
            reranked,
            started.elapsed().as_secs_f64(),
            plain_time,
            query.rows(),
        ))
    } else {
        None
    };
    finish(req, dir, split_name, &query, gallery.as_ref(), report, reranked)
}

/// The outcome of an evaluation of `query` (against `gallery` when separate): exports the
/// embeddings when the request asks for it, writes `metrics.json` (every metric, plain and
/// re-ranked, with the checkpoint and split) into the request's output directory and lists both
/// among the outcome's files, `metrics.json` first.
fn finish(
    req: &EvalRequest,
    checkpoint: PathBuf,
    split: String,
    query: &SplitEmbeddings,
    gallery: Option<&SplitEmbeddings>,
    report: AccuracyReport,
    reranked: Option<Reranked>,
) -> Result<EvalOutcome, TrainError> {
    let exported = match &req.export {
        Some(out) => export_sets(out, query, gallery)?,
        None => Vec::new(),
    };
    let dir = req.out.clone().unwrap_or_else(|| req.run.run.join("eval"));
    std::fs::create_dir_all(&dir).map_err(|e| TrainError::io(&dir, e))?;
    let path = dir.join("metrics.json");
    let json = serde_json::json!({
        "checkpoint": checkpoint,
        "split": split,
        "queries": query.rows(),
        "metrics": report,
        "reranked": reranked.as_ref().map(|r| serde_json::json!({
            "label": r.label,
            "ms_per_query": r.ms_per_query,
            "metrics": r.report,
        })),
    });
    let text = serde_json::to_vec_pretty(&json).map_err(|e| TrainError::io(&path, e))?;
    dml_data::write_atomic(&path, &text).map_err(|e| TrainError::io(&path, e))?;
    // `metrics.json` is the latest evaluation; every evaluation is also one line of
    // `evaluations.jsonl`, with the options it ran with, so that none is lost.
    let history = dir.join("evaluations.jsonl");
    let mut line = json.clone();
    line["options"] = serde_json::json!({
        "dataset": req.dataset,
        "diml_k": req.diml.k,
        "diml_grid": req.diml.grid,
        "avsl_k": req.avsl_k,
    });
    append_line(&history, &line)?;
    let rerank_k = reranked.as_ref().map(|_| match req.avsl_k {
        Some(k) if k > 0 => k,
        _ => req.diml.k,
    });
    let min_r = min_relevant(&query.labels, gallery.map(|g| g.labels.as_slice()));
    Ok(EvalOutcome {
        checkpoint,
        split,
        metrics: Metrics::from_report(&report),
        queries: query.rows(),
        reranked,
        report,
        shown: req.metrics.clone(),
        written: std::iter::once(path)
            .chain(std::iter::once(history))
            .chain(exported)
            .collect(),
        rerank_k,
        min_r,
    })
}

/// Appends `value` as one line to the JSONL file at `path` (created if missing; one `write` of
/// the whole line, so concurrent appenders never interleave within a line).
fn append_line(path: &Path, value: &serde_json::Value) -> Result<(), TrainError> {
    use std::io::Write;
    let mut line = serde_json::to_string(value).map_err(|e| TrainError::io(path, e))?;
    line.push('\n');
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(line.as_bytes()))
        .map_err(|e| TrainError::io(path, e))
}

/// The smallest number of other images of a query's class in the gallery (the query set itself,
/// one fewer, when there is no separate gallery): the `R` of R-Precision.
fn min_relevant(query: &[u32], gallery: Option<&[u32]>) -> usize {
    let mut counts = std::collections::HashMap::<u32, usize>::new();
    for &l in gallery.unwrap_or(query) {
        *counts.entry(l).or_default() += 1;
    }
    let own = usize::from(gallery.is_none());
    query
        .iter()
        .map(|l| counts.get(l).copied().unwrap_or(0).saturating_sub(own))
        .min()
        .unwrap_or(0)
}

/// `train eval` of an AVSL run: the concatenated level embedding (K = 0) next to `d̂` on the top K
/// (or on every pair), with the cost per query.
#[allow(clippy::too_many_arguments)]
fn run_eval_avsl(
    req: &EvalRequest,
    config: &crate::TrainConfig,
    model: &dml_models::EmbeddingModel,
    module: &crate::avsl_module::AvslModule,
    data: &EvalData,
    device: &burn::tensor::Device,
    dir: PathBuf,
    split_name: String,
) -> Result<EvalOutcome, TrainError> {
    let (batch, threads) = (config.eval.batch_size, config.data.threads);
    let (query, gallery) =
        data.embed_each(|ds| avsl_retrieval::embed(model, module, config.avsl.certainty, ds, batch, threads, device))?;
    let scorer = avsl_retrieval::scorer(module, &config.avsl)?;
    let all = all_metrics();
    let started = Instant::now();
    let report = avsl_retrieval::score_report(&scorer, &query, gallery.as_ref(), Depth::Off, &all)?;
    let plain_time = started.elapsed().as_secs_f64();
    let references = gallery.as_ref().unwrap_or(&query).bank.rows();
    let depth = match req.avsl_k {
        None => Depth::for_size(&config.avsl, references),
        Some(0) => Depth::Off,
        Some(k) => Depth::Top(k),
    };
    let reranked = if depth == Depth::Off {
        None
    } else {
        let started = Instant::now();
        let reranked = avsl_retrieval::score_report(&scorer, &query, gallery.as_ref(), depth, &all)?;
        let label = match depth {
            Depth::Top(k) => format!("d̂, K = {k}"),
            _ => "d̂, exact".into(),
        };
        let seconds = started.elapsed().as_secs_f64();
        Some(self::reranked(
            label,
            reranked,
            seconds,
            plain_time,
            query.embeddings.rows(),
        ))
    };
    let gallery = gallery.as_ref().map(|g| &g.embeddings);
    finish(req, dir, split_name, &query.embeddings, gallery, report, reranked)
}

/// Writes the query rows (no prefix) and, for a separate gallery, the gallery rows (`gallery_`)
/// into `out` (created if needed); returns the files written.
fn export_sets(
    out: &Path,
    query: &SplitEmbeddings,
    gallery: Option<&SplitEmbeddings>,
) -> Result<Vec<PathBuf>, TrainError> {
    std::fs::create_dir_all(out).map_err(|e| TrainError::io(out, e))?;
    let mut written = export(out, "", query)?;
    if let Some(g) = gallery {
        written.extend(export(out, "gallery_", g)?);
    }
    Ok(written)
}

/// Writes `<prefix>embeddings.npy` (`float32 [N, D]`) and `<prefix>labels.npy`
/// (`int64 [N]`, the manifest's class ids); returns both paths.
pub fn export(dir: &Path, prefix: &str, e: &SplitEmbeddings) -> Result<Vec<PathBuf>, TrainError> {
    let embeddings = dir.join(format!("{prefix}embeddings.npy"));
    npy::write(&embeddings, &e.data, &[e.rows(), e.dim])?;
    let labels: Vec<i64> = e.labels.iter().map(|&l| i64::from(l)).collect();
    let labels_path = dir.join(format!("{prefix}labels.npy"));
    npy::write(&labels_path, &labels, &[e.rows()])?;
    Ok(vec![embeddings, labels_path])
}

/// The metrics as a small text table (those of [`EvalOutcome::shown`]); with re-ranking, the
/// plain (K = 0) and re-ranked columns side by side and the added cost per query; then the files
/// written.
pub fn table(outcome: &EvalOutcome) -> String {
    let mut out = format!(
        "checkpoint {}\nsplit {} ({} queries)\n\n",
        outcome.checkpoint.display(),
        outcome.split,
        outcome.queries
    );
    let value = |r: &AccuracyReport, m| metric_value(r, m).unwrap_or(f64::NAN);
    match &outcome.reranked {
        None => {
            out.push_str("| metric | value |\n|---|---|\n");
            for &m in &outcome.shown {
                out.push_str(&format!("| {} | {:.4} |\n", metric_name(m), value(&outcome.report, m)));
            }
        }
        Some(r) => {
            out.push_str(&format!(
                "| metric | K = 0 | {} | change |\n|---|---|---|---|\n",
                r.label
            ));
            for &m in &outcome.shown {
                let (before, after) = (value(&outcome.report, m), value(&r.report, m));
                out.push_str(&format!(
                    "| {} | {before:.4} | {after:.4} | {:+.4} |\n",
                    metric_name(m),
                    after - before
                ));
            }
            out.push_str(&format!("\nre-ranking: {:.2} ms per query\n", r.ms_per_query));
            if let Some(k) = outcome.rerank_k.filter(|&k| k < outcome.min_r) {
                out.push_str(&format!(
                    "R-Precision and MAP@R look R = {}+ neighbours deep, and re-ranking reorders only the top K = {k}: \
                     it cannot change them (raise K above R to see an effect)\n",
                    outcome.min_r
                ));
            }
        }
    }
    out.push('\n');
    for file in &outcome.written {
        out.push_str(&format!("wrote {}\n", file.display()));
    }
    out
}
