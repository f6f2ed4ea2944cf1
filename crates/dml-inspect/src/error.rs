//! Errors of the inspection commands; each names the input at fault.

use std::path::PathBuf;

use dml_train::TrainError;

/// What can go wrong while explaining or analysing a run.
#[derive(Debug, thiserror::Error)]
pub enum InspectError {
    /// The run cannot be loaded, or its data, model or evaluation failed.
    #[error(transparent)]
    Run(#[from] TrainError),
    /// An argument of the request (an image, a flag's value, a count) is invalid; the message
    /// names it.
    #[error("{0}")]
    Argument(String),
    /// An image cannot be read or decoded.
    #[error(transparent)]
    Data(#[from] dml_data::DataError),
    /// An explanation method failed.
    #[error(transparent)]
    Explain(#[from] dml_explain::ExplainError),
    /// A figure cannot be drawn or saved.
    #[error("rendering: {0}")]
    Render(#[from] dml_explain::render::RenderError),
    /// A synthetic image's object mask cannot be read.
    #[error(transparent)]
    Mask(#[from] dml_datasets::DatasetError),
    /// DIML's grid pooling, structural similarity or re-ranking failed.
    #[error("{context}: {source}")]
    Structural {
        /// What was being computed (`--grid 4`, `structural re-ranking`).
        context: String,
        /// The solver's error.
        #[source]
        source: dml_ot::OtError,
    },
    /// A statistic of the analysis failed (a comparison matrix, NR-Precision, a group test).
    #[error("{context}: {message}")]
    Statistic {
        /// The statistic (`saliency comparison`, `NR-Precision`, `Mann-Whitney U`).
        context: &'static str,
        /// What went wrong.
        message: String,
    },
    /// Scoring one image of a faithfulness triplet failed.
    #[error("triplet {triplet}, {image}: {message}")]
    Faithfulness {
        /// The triplet (0-based).
        triplet: usize,
        /// The image's manifest path.
        image: String,
        /// What failed.
        message: String,
    },
    /// A file or folder of the output cannot be written.
    #[error("{path}: {message}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// What failed.
        message: String,
    },
}

impl InspectError {
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, e: impl std::fmt::Display) -> Self {
        Self::Io {
            path: path.into(),
            message: e.to_string(),
        }
    }

    /// A [`InspectError::Structural`] error while computing `context`.
    pub fn structural(context: impl Into<String>, source: dml_ot::OtError) -> Self {
        Self::Structural {
            context: context.into(),
            source,
        }
    }

    /// A [`InspectError::Statistic`] error of `context`.
    pub fn statistic(context: &'static str, e: impl std::fmt::Display) -> Self {
        Self::Statistic {
            context,
            message: e.to_string(),
        }
    }
}
