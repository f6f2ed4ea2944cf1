//! `train eval`: a checkpoint of a run on a dataset split → metrics table, optionally
//! exporting the embeddings as `.npy`.

use std::path::{Path, PathBuf};

use burn::module::Module;
use dml_data::Split;

use crate::checkpoint;
use crate::config::TrainConfig;
use crate::data;
use crate::device::parse_device;
use crate::error::TrainError;
use crate::eval::{self, EvalData, Metrics, SplitEmbeddings};
use crate::npy;
use crate::trainer::build_model;

/// What `train eval` is asked to do.
#[derive(Debug, Clone)]
pub struct EvalRequest {
    /// The run directory (holding `config.toml` and checkpoints).
    pub run: PathBuf,
    /// `best`, `latest` or a checkpoint directory.
    pub checkpoint: String,
    /// The split to evaluate (default: the run's `eval.split`).
    pub split: Option<String>,
    /// Another dataset (name or manifest) than the run's.
    pub dataset: Option<String>,
    /// The device (default: the run's).
    pub device: Option<String>,
    /// Write `embeddings.npy` and `labels.npy` into this directory.
    pub export: Option<PathBuf>,
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
}

/// Resolves `best` / `latest` / a path to a checkpoint directory of `run`.
pub fn checkpoint_dir(run: &Path, which: &str) -> Result<PathBuf, TrainError> {
    match which {
        "best" | "latest" => {
            let pointer = format!("{which}.json");
            match checkpoint::pointed(run, &pointer)? {
                Some(dir) => Ok(dir),
                None if which == "best" => checkpoint::pointed(run, "latest.json")?.ok_or_else(|| no_checkpoint(run)),
                None => Err(no_checkpoint(run)),
            }
        }
        path => {
            let p = PathBuf::from(path);
            if p.join(checkpoint::MODEL_FILE).is_file() {
                Ok(p)
            } else {
                Err(TrainError::Checkpoint {
                    path: p,
                    message: format!("not a checkpoint directory (no {})", checkpoint::MODEL_FILE),
                })
            }
        }
    }
}

fn no_checkpoint(run: &Path) -> TrainError {
    TrainError::Checkpoint {
        path: run.to_path_buf(),
        message: "the run has no checkpoint yet (latest.json is missing)".into(),
    }
}

/// Runs an evaluation request.
pub fn run_eval(req: &EvalRequest) -> Result<EvalOutcome, TrainError> {
    let mut config = TrainConfig::read(&req.run.join("config.toml"))?;
    if let Some(d) = &req.dataset {
        config.data.dataset = d.clone();
    }
    if let Some(d) = &req.device {
        config.device = d.clone();
    }
    let split_name = req.split.clone().unwrap_or_else(|| config.eval.split.clone());
    let split: Split = split_name
        .parse()
        .map_err(|e| TrainError::Config(format!("--split: {e}")))?;
    let dir = checkpoint_dir(&req.run, &req.checkpoint)?;
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
        message: format!("the weights do not fit the run's model: {e}"),
    })?;
    let model = model.valid();
    let manifest = data::load_manifest(&config.data)?;
    let data = EvalData::of_split(&manifest, split, &data::eval_transform(&config.data))?.ok_or_else(|| {
        TrainError::Config(format!(
            "--split {split_name}: the dataset {} has no images in that split",
            config.data.dataset
        ))
    })?;
    let (batch, threads) = (config.eval.batch_size, config.data.threads);
    let distance = eval::distance_for(config.model.normalize);
    let (query, gallery): (SplitEmbeddings, Option<SplitEmbeddings>) = match &data {
        EvalData::Single(ds) => (eval::embed(&model, ds, batch, threads, &device)?, None),
        EvalData::QueryGallery { query, gallery } => (
            eval::embed(&model, query, batch, threads, &device)?,
            Some(eval::embed(&model, gallery, batch, threads, &device)?),
        ),
    };
    let metrics = eval::score(&query, gallery.as_ref(), distance, None)?;
    if let Some(out) = &req.export {
        std::fs::create_dir_all(out).map_err(|e| TrainError::io(out, e))?;
        export(out, "", &query)?;
        if let Some(g) = &gallery {
            export(out, "gallery_", g)?;
        }
    }
    Ok(EvalOutcome {
        checkpoint: dir,
        split: split_name,
        metrics,
        queries: query.rows(),
    })
}

/// Writes `<prefix>embeddings.npy` (`float32 [N, D]`) and `<prefix>labels.npy`
/// (`int64 [N]`, the manifest's class ids).
pub fn export(dir: &Path, prefix: &str, e: &SplitEmbeddings) -> Result<(), TrainError> {
    npy::write(
        &dir.join(format!("{prefix}embeddings.npy")),
        &e.data,
        &[e.rows(), e.dim],
    )?;
    let labels: Vec<i64> = e.labels.iter().map(|&l| i64::from(l)).collect();
    npy::write(&dir.join(format!("{prefix}labels.npy")), &labels, &[e.rows()])
}

/// The metrics as a small text table.
pub fn table(outcome: &EvalOutcome) -> String {
    let m = &outcome.metrics;
    format!(
        "checkpoint {}\nsplit {} ({} queries)\n\n| metric | value |\n|---|---|\n| P@1 | {:.4} |\n| R-Precision | {:.4} |\n| MAP@R | {:.4} |\n",
        outcome.checkpoint.display(),
        outcome.split,
        outcome.queries,
        m.precision_at_1,
        m.r_precision,
        m.map_at_r
    )
}
