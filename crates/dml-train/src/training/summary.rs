//! How a run is driven ([`RunOptions`], not part of its configuration) and what it reports
//! ([`RunSummary`]).

use std::path::PathBuf;

use crate::checkpoint::Best;
use crate::metrics::{Metrics, MetricsRecord};

/// How a run is driven (not part of the run's configuration).
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Continue from the run directory's latest checkpoint (a fresh start when there is
    /// none yet).
    pub resume: bool,
    /// Stop after this many completed epochs, as if interrupted (for tests and for
    /// splitting a long run into sessions).
    pub stop_after_epochs: Option<usize>,
    /// A graceful stop: once this is set (by the program's SIGINT/SIGTERM handler), the run
    /// finishes the step in flight, writes a checkpoint that resumes mid-epoch exactly, and
    /// returns [`TrainError::Interrupted`](crate::TrainError::Interrupted).
    pub stop: Option<&'static std::sync::atomic::AtomicBool>,
}

/// What a finished (or stopped) run reports.
#[derive(Debug, Clone)]
pub struct RunSummary {
    /// The run directory.
    pub run_dir: PathBuf,
    /// Every evaluation, the untrained model first.
    pub history: Vec<MetricsRecord>,
    /// The best model on `val`, if the dataset has a `val` split.
    pub best: Option<Best>,
}

impl RunSummary {
    /// Metrics of the untrained model on the reported split.
    pub fn before(&self) -> Option<&Metrics> {
        self.history.first().map(|r| &r.metrics)
    }

    /// Metrics after the last completed epoch.
    pub fn after(&self) -> Option<&Metrics> {
        self.history.last().map(|r| &r.metrics)
    }
}
