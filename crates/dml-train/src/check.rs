//! `train check`: a run directory verified without building its model — every file a resume or an
//! evaluation reads, each finding naming the file and what is wrong with it.

use std::path::{Path, PathBuf};

use burn::store::ModuleRecord;

use crate::checkpoint::{self, MODEL_FILE, STATE_FILE};
use crate::config::TrainConfig;
use crate::metrics::MetricsRecord;

/// One thing `check` looked at.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// The file or folder.
    pub path: PathBuf,
    /// `None` when it is sound, else what is wrong and what to do.
    pub problem: Option<String>,
}

/// Every finding about the run directory `run`, in the order a resume reads the files:
/// `config.toml`, the pointers and the checkpoints they name (`state.json`, the weights), and
/// `metrics.jsonl`.
pub fn check_run(run: &Path) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut note = |path: PathBuf, problem: Option<String>| out.push(Finding { path, problem });
    if !run.is_dir() {
        note(run.to_path_buf(), Some("no such run directory".into()));
        return out;
    }
    let config = run.join("config.toml");
    note(config.clone(), TrainConfig::read(&config).err().map(|e| e.to_string()));
    let mut checkpoints = Vec::new();
    for pointer in ["latest.json", "best.json"] {
        let path = run.join(pointer);
        if !path.exists() {
            if pointer == "latest.json" {
                note(
                    path,
                    Some("missing: the run has no checkpoint (it never finished an epoch)".into()),
                );
            }
            continue;
        }
        match checkpoint::pointed(run, pointer) {
            Ok(Some(dir)) => {
                note(path, None);
                if !checkpoints.contains(&dir) {
                    checkpoints.push(dir);
                }
            }
            Ok(None) => {}
            Err(e) => note(path, Some(format!("{e}; a resume cannot continue from it"))),
        }
    }
    for dir in checkpoints {
        note(
            dir.join(STATE_FILE),
            checkpoint::read_state(&dir).err().map(|e| e.to_string()),
        );
        let model = dir.join(MODEL_FILE);
        let problem = match ModuleRecord::load(&model) {
            Ok(_) => None,
            Err(e) => Some(format!("cannot be read ({e}): the file is damaged or truncated")),
        };
        note(model, problem);
    }
    let metrics = run.join("metrics.jsonl");
    let problem = match std::fs::read_to_string(&metrics) {
        Err(e) => Some(format!("cannot be read: {e}")),
        Ok(text) => text.lines().enumerate().find_map(|(i, line)| {
            serde_json::from_str::<MetricsRecord>(line).err().map(|e| {
                format!(
                    "line {} is not a record ({e}); `train --resume` rewrites the file from the checkpoint",
                    i + 1
                )
            })
        }),
    };
    note(metrics, problem);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_directory_is_one_finding() {
        let f = check_run(Path::new("/no/such/run"));
        assert_eq!(f.len(), 1);
        assert!(f[0].problem.as_deref().unwrap().contains("no such run"));
    }
}
