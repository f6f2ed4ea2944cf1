//! Errors of the training and evaluation tools; each names the input at fault.

use std::path::PathBuf;

/// What can go wrong in a run.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    /// The configuration (file, override or value) is invalid.
    #[error("{0}")]
    Config(String),
    /// The dataset cannot be found, prepared or read.
    #[error(transparent)]
    Data(#[from] dml_data::DataError),
    /// The model cannot be built or its weights loaded.
    #[error(transparent)]
    Model(#[from] dml_models::ModelError),
    /// The loss cannot be built or computed.
    #[error(transparent)]
    Loss(#[from] dml_losses::LossError),
    /// Evaluation failed.
    #[error(transparent)]
    Eval(#[from] dml_eval::EvalError),
    /// A file of the run directory cannot be read or written.
    #[error("{path}: {message}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What failed.
        message: String,
    },
    /// A checkpoint is missing, incomplete or does not fit the configuration.
    #[error("checkpoint {path}: {message}")]
    Checkpoint {
        /// The checkpoint directory.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// Training diverged (a non-finite loss), with the epoch and step where it happened.
    #[error("training diverged at epoch {epoch}, step {step}: {message}")]
    Diverged {
        /// 0-based epoch.
        epoch: usize,
        /// Step within the epoch.
        step: usize,
        /// The loss error.
        message: String,
    },
}

impl TrainError {
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, e: impl std::fmt::Display) -> Self {
        Self::Io {
            path: path.into(),
            message: e.to_string(),
        }
    }
}
