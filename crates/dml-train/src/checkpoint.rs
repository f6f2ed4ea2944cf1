//! Atomic checkpoints of a run: immutable epoch directories plus pointer files.
//!
//! A checkpoint is written into a temporary directory, every file is flushed to disk,
//! and only then is the directory renamed to `checkpoints/epoch-NNNN` and the pointer
//! `latest.json` (and `best.json` when the model improved on `val`) replaced through a
//! temporary file and a rename. A run killed at any instant therefore leaves either the
//! previous checkpoint or the new one, never a half-written one.

use std::fs::File;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::TrainError;
use crate::metrics::MetricsRecord;
use crate::progress::Progress;

/// The best model so far by the configured `val` metric.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Best {
    /// Epochs completed when it was evaluated.
    pub epoch: usize,
    /// Its `val` metric.
    pub value: f64,
}

/// Everything besides the weights that a resumed run needs to continue exactly.
///
/// No random-generator state is stored because none is carried: the sampler's batches,
/// the augmentation and the miner's choices are functions of `(seed, epoch, step)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainState {
    /// Epochs completed.
    pub epochs_done: usize,
    /// Optimiser steps taken.
    pub global_step: u64,
    /// The run's seed (checked on resume).
    pub seed: u64,
    /// Every evaluation so far.
    pub history: Vec<MetricsRecord>,
    /// The best model on `val`, if the dataset has a `val` split.
    pub best: Option<Best>,
    /// Where an epoch stopped part-way (a graceful stop), so that a resume finishes it exactly;
    /// `None` at an epoch's end (and in checkpoints written before the field existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial: Option<PartialEpoch>,
}

/// An epoch stopped after `steps_done` of its steps (epoch `epochs_done + 1` of the state).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PartialEpoch {
    /// Steps completed in the epoch.
    pub steps_done: usize,
    /// The sum of their losses (the epoch's mean is taken over all its steps at its end).
    pub loss_sum: f64,
    /// Images they trained on.
    pub images_seen: usize,
}

/// The files of a checkpoint directory.
pub const MODEL_FILE: &str = "model.bpk";
/// The loss's learnable state.
pub const LOSS_FILE: &str = "loss.bpk";
/// DIML's spatial proxies (ProxyNCA with `[diml] enabled = true`).
pub const DIML_PROXIES_FILE: &str = "diml-proxies.bpk";
/// Similarity mining's mask parameters `a`, `b` and their optimiser state (when learnable).
pub const MINING_FILES: [&str; 2] = ["mining.bpk", "optim-mining.bpk"];
/// AVSL's module (embedder, reliability, edge moving average), Proxy-Anchor's per-level proxies
/// (`proxy_anchor` runs) and the optimiser states of the embedder, reliability and proxy groups.
pub const AVSL_FILES: [&str; 5] = [
    "avsl.bpk",
    "avsl-proxies.bpk",
    "optim-avsl-embedder.bpk",
    "optim-avsl-reliability.bpk",
    "optim-avsl-proxies.bpk",
];
/// The optimiser state of each parameter group.
pub const OPTIM_FILES: [&str; 3] = ["optim-backbone.bpk", "optim-head.bpk", "optim-loss.bpk"];
/// The [`TrainState`].
pub const STATE_FILE: &str = "state.json";

/// Pointer file contents.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Pointer {
    /// Checkpoint directory relative to the run directory.
    checkpoint: String,
}

/// Writes a checkpoint through `write` (which fills the given temporary directory with
/// the weight files), adds `state.json`, commits it as `checkpoints/epoch-NNNN` and
/// points `latest.json` (and `best.json` when `is_best`) at it. Older checkpoint
/// directories that no pointer names are removed afterwards.
pub fn commit(
    run: &Path,
    state: &TrainState,
    is_best: bool,
    write: impl FnOnce(&Path) -> Result<(), TrainError>,
) -> Result<PathBuf, TrainError> {
    let dir = run.join("checkpoints");
    std::fs::create_dir_all(&dir).map_err(|e| TrainError::io(&dir, e))?;
    // A mid-epoch checkpoint must not reuse the name of the epoch checkpoint before it, which
    // `latest.json` may still name.
    let name = match &state.partial {
        None => format!("epoch-{:04}", state.epochs_done),
        Some(p) => format!("epoch-{:04}-step-{:06}", state.epochs_done, p.steps_done),
    };
    let tmp = dir.join(format!(".tmp-{name}-{}", std::process::id()));
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).map_err(|e| TrainError::io(&tmp, e))?;
    }
    std::fs::create_dir_all(&tmp).map_err(|e| TrainError::io(&tmp, e))?;
    let result = (|| {
        write(&tmp)?;
        let json = serde_json::to_vec_pretty(state).map_err(|e| TrainError::io(tmp.join(STATE_FILE), e))?;
        std::fs::write(tmp.join(STATE_FILE), json).map_err(|e| TrainError::io(tmp.join(STATE_FILE), e))?;
        sync_dir_files(&tmp)
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(e);
    }
    let final_dir = dir.join(&name);
    if final_dir.exists() {
        // Only a pointer-less leftover of an interrupted commit can be in the way; the
        // pointer always names a directory older than the one being written.
        std::fs::remove_dir_all(&final_dir).map_err(|e| TrainError::io(&final_dir, e))?;
    }
    std::fs::rename(&tmp, &final_dir).map_err(|e| TrainError::io(&final_dir, e))?;
    sync_dir(&dir)?;
    let relative = format!("checkpoints/{name}");
    if is_best {
        write_pointer(&run.join("best.json"), &relative)?;
    }
    write_pointer(&run.join("latest.json"), &relative)?;
    prune(run)?;
    Ok(final_dir)
}

/// The checkpoint directory a pointer file (`latest.json`, `best.json`) names, if the
/// pointer exists.
pub fn pointed(run: &Path, pointer: &str) -> Result<Option<PathBuf>, TrainError> {
    let path = run.join(pointer);
    if !path.exists() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(&path).map_err(|e| TrainError::io(&path, e))?;
    let p: Pointer = serde_json::from_str(&text).map_err(|e| TrainError::io(&path, format!("invalid pointer: {e}")))?;
    let dir = run.join(&p.checkpoint);
    if !dir.join(STATE_FILE).is_file() {
        return Err(TrainError::Checkpoint {
            path: dir,
            message: format!("named by {} but has no {STATE_FILE}", path.display()),
        });
    }
    Ok(Some(dir))
}

/// Reads a checkpoint's [`TrainState`].
pub fn read_state(checkpoint: &Path) -> Result<TrainState, TrainError> {
    let path = checkpoint.join(STATE_FILE);
    let text = std::fs::read_to_string(&path).map_err(|e| TrainError::Checkpoint {
        path: checkpoint.to_path_buf(),
        message: format!("cannot read {STATE_FILE}: {e}"),
    })?;
    serde_json::from_str(&text).map_err(|e| TrainError::Checkpoint {
        path: checkpoint.to_path_buf(),
        message: format!("invalid {STATE_FILE}: {e}"),
    })
}

/// Rewrites `metrics.jsonl` from `history` atomically (used when a run starts or
/// resumes, so the file never holds evaluations the checkpoint does not know).
pub fn write_metrics(run: &Path, history: &[MetricsRecord]) -> Result<(), TrainError> {
    let mut text = String::new();
    for record in history {
        text.push_str(&serde_json::to_string(record).map_err(|e| TrainError::io(run.join("metrics.jsonl"), e))?);
        text.push('\n');
    }
    let path = run.join("metrics.jsonl");
    dml_data::write_atomic(&path, text.as_bytes()).map_err(|e| TrainError::io(&path, e))
}

fn write_pointer(path: &Path, checkpoint: &str) -> Result<(), TrainError> {
    let json = serde_json::to_vec(&Pointer {
        checkpoint: checkpoint.to_string(),
    })
    .map_err(|e| TrainError::io(path, e))?;
    dml_data::write_atomic(path, &json).map_err(|e| TrainError::io(path, e))?;
    if let Some(parent) = path.parent() {
        sync_dir(parent)?;
    }
    Ok(())
}

/// Removes checkpoint directories that neither pointer names, and stale temporaries.
fn prune(run: &Path) -> Result<(), TrainError> {
    let keep: Vec<PathBuf> = ["latest.json", "best.json"]
        .iter()
        .filter_map(|p| pointed(run, p).ok().flatten())
        .collect();
    let dir = run.join("checkpoints");
    let entries = std::fs::read_dir(&dir).map_err(|e| TrainError::io(&dir, e))?;
    for entry in entries.flatten() {
        let path = entry.path();
        if !keep.contains(&path) {
            let _ = std::fs::remove_dir_all(&path);
        }
    }
    Ok(())
}

fn sync_dir_files(dir: &Path) -> Result<(), TrainError> {
    let entries = std::fs::read_dir(dir).map_err(|e| TrainError::io(dir, e))?;
    for entry in entries.flatten() {
        let path = entry.path();
        File::open(&path)
            .and_then(|f| f.sync_all())
            .map_err(|e| TrainError::io(&path, e))?;
    }
    sync_dir(dir)
}

fn sync_dir(dir: &Path) -> Result<(), TrainError> {
    File::open(dir)
        .and_then(|f| f.sync_all())
        .map_err(|e| TrainError::io(dir, e))
}

/// Resolves `auto` / `best` / `latest` / a path to a checkpoint directory of `run`.
///
/// `best` of a run without a `val` split falls back to the latest checkpoint, and says so through
/// `progress`: a user who asked for the best model must know this is not one.
pub fn resolve(run: &Path, which: &str, progress: &dyn Progress) -> Result<PathBuf, TrainError> {
    match which {
        // The commands' default: the best model where the data had a val split, else the latest,
        // without a note (the note is for a user who asked for `best` by name).
        "auto" => match pointed(run, "best.json")? {
            Some(dir) => Ok(dir),
            None => pointed(run, "latest.json")?.ok_or_else(|| no_checkpoint(run)),
        },
        "best" | "latest" => {
            let pointer = format!("{which}.json");
            match pointed(run, &pointer)? {
                Some(dir) => Ok(dir),
                None if which == "best" => {
                    let latest = pointed(run, "latest.json")?.ok_or_else(|| no_checkpoint(run))?;
                    progress.note(&format!(
                        "note: {} has no best.json (a best checkpoint is kept only when the data has a val split, \
                         e.g. --set data.val_classes=2 --batch-size 24); using the latest, {}",
                        run.display(),
                        latest.display()
                    ));
                    Ok(latest)
                }
                None => Err(no_checkpoint(run)),
            }
        }
        path => {
            let p = PathBuf::from(path);
            if p.join(MODEL_FILE).is_file() {
                Ok(p)
            } else {
                Err(TrainError::Checkpoint {
                    path: p,
                    message: format!("not a checkpoint directory (no {})", MODEL_FILE),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn state(epochs_done: usize) -> TrainState {
        TrainState {
            epochs_done,
            global_step: 10 * epochs_done as u64,
            seed: 3,
            history: Vec::new(),
            best: None,
            partial: None,
        }
    }

    #[test]
    fn pointers_follow_commits_and_old_checkpoints_are_pruned() {
        let run = tempfile::tempdir().unwrap();
        let write = |dir: &Path| std::fs::write(dir.join("w"), b"x").map_err(|e| TrainError::io(dir, e));
        commit(run.path(), &state(1), true, write).unwrap();
        commit(run.path(), &state(2), false, write).unwrap();
        commit(run.path(), &state(3), false, write).unwrap();
        let latest = pointed(run.path(), "latest.json").unwrap().unwrap();
        let best = pointed(run.path(), "best.json").unwrap().unwrap();
        assert!(latest.ends_with("epoch-0003") && best.ends_with("epoch-0001"));
        assert_eq!(read_state(&latest).unwrap(), state(3));
        let mut left: Vec<String> = std::fs::read_dir(run.path().join("checkpoints"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, vec!["epoch-0001", "epoch-0003"]);
        // `auto` is the best checkpoint where there is one, else the latest.
        let silent = crate::progress::Silent;
        assert_eq!(resolve(run.path(), "auto", &silent).unwrap(), best);
        std::fs::remove_file(run.path().join("best.json")).unwrap();
        assert_eq!(resolve(run.path(), "auto", &silent).unwrap(), latest);
    }

    #[test]
    fn a_failing_writer_leaves_the_previous_checkpoint() {
        let run = tempfile::tempdir().unwrap();
        commit(run.path(), &state(1), false, |_| Ok(())).unwrap();
        let err = commit(run.path(), &state(2), false, |dir| {
            std::fs::write(dir.join("half"), b"x").unwrap();
            Err(TrainError::io(dir.join("model.bpk"), "disk full"))
        });
        assert!(err.is_err());
        assert!(
            pointed(run.path(), "latest.json")
                .unwrap()
                .unwrap()
                .ends_with("epoch-0001")
        );
        assert_eq!(std::fs::read_dir(run.path().join("checkpoints")).unwrap().count(), 1);
    }
}
