//! Errors of the training and evaluation tools; each names the input at fault.

use std::path::PathBuf;

/// What can go wrong in a run.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    /// The configuration (file, override or value) is invalid; the message names the key.
    #[error("{0}")]
    Config(String),
    /// An argument of a request (a flag's value, a split, a count) is invalid; the message names
    /// the flag.
    #[error("{0}")]
    Argument(String),
    /// The model produced a NaN or an infinity while embedding, or its output could not be read.
    #[error("{0}")]
    NonFinite(String),
    /// DIML's grid pooling or structural similarity cannot be set up or computed.
    #[error("{context}: {source}")]
    Structural {
        /// What was being set up (`diml`, `--diml-grid 4`, `structural re-ranking`).
        context: String,
        /// The solver's error.
        #[source]
        source: dml_ot::OtError,
    },
    /// An explanation method used inside a run (AVSL's graph, similarity mining) failed.
    #[error("{method}: {source}")]
    Method {
        /// The method (`avsl`, `similarity mining`).
        method: &'static str,
        /// Its error.
        #[source]
        source: dml_explain::ExplainError,
    },
    /// The dataset `data.dataset` names cannot be found, generated or prepared; the message says
    /// what to do.
    #[error("{0}")]
    Dataset(String),
    /// The dataset cannot be read (a manifest, an image).
    #[error(transparent)]
    Data(#[from] dml_data::DataError),
    /// The model cannot be built or its weights loaded.
    #[error(transparent)]
    Model(#[from] dml_models::ModelError),
    /// The loss cannot be built or computed.
    #[error(transparent)]
    Loss(#[from] dml_losses::LossError),
    /// An explanation (or similarity mining) failed.
    #[error(transparent)]
    Explain(#[from] dml_explain::ExplainError),
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
    /// Training diverged: the loss, an embedding or a parameter became NaN or infinite.
    ///
    /// The loss is checked at every step (its value is read back for the epoch's mean
    /// anyway) and every parameter before each evaluation and checkpoint, so a checkpoint
    /// never holds a non-finite weight and `latest.json` keeps naming the last good one.
    #[error(
        "training diverged in epoch {epoch}, step {step} of {steps} (global step {global_step}): {value}; \
         learning rates: backbone {:e}, head {:e}, loss {:e}; lower them{}",
        .lrs[0],
        .lrs[1],
        .lrs[2],
        last_good_hint(.last_good.as_deref())
    )]
    Diverged {
        /// The epoch (1-based, as in the progress display and the checkpoint names).
        epoch: usize,
        /// The step within the epoch (1-based) after which the value was found.
        step: usize,
        /// The steps of the epoch.
        steps: usize,
        /// Optimiser steps of the run so far, this one included.
        global_step: u64,
        /// What is not finite, e.g. `loss = NaN` or `parameter head.linear.weight holds inf`.
        value: String,
        /// The learning rates of the backbone, head and loss groups during the epoch.
        lrs: [f64; 3],
        /// The checkpoint `latest.json` still names, if an earlier epoch finished.
        last_good: Option<PathBuf>,
    },
    /// A graceful stop was asked for (SIGINT, SIGTERM): the run stopped after a step and wrote a
    /// checkpoint from which `--resume` continues to exactly the metrics of an uninterrupted run.
    #[error(
        "stopped after step {step} of epoch {epoch} as asked; checkpoint {}; continue with --resume",
        .checkpoint.display()
    )]
    Interrupted {
        /// The epoch in flight (1-based).
        epoch: usize,
        /// The steps of it that were done (0: stopped at an epoch's end).
        step: usize,
        /// The checkpoint `latest.json` now names.
        checkpoint: PathBuf,
    },
}

/// The end of a divergence message: where the last good checkpoint is, if any.
fn last_good_hint(last_good: Option<&std::path::Path>) -> String {
    match last_good {
        Some(dir) => format!("; latest.json still names the last good checkpoint, {}", dir.display()),
        None => "; no checkpoint was written".to_string(),
    }
}

impl TrainError {
    /// A [`TrainError::Structural`] error while setting up or computing `context`.
    pub fn structural(context: impl Into<String>, source: dml_ot::OtError) -> Self {
        Self::Structural {
            context: context.into(),
            source,
        }
    }

    /// A [`TrainError::Method`] error of `method`.
    pub fn method(method: &'static str, source: dml_explain::ExplainError) -> Self {
        Self::Method { method, source }
    }

    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, e: impl std::fmt::Display) -> Self {
        Self::Io {
            path: path.into(),
            message: e.to_string(),
        }
    }
}
