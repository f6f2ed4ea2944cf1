use std::path::PathBuf;

/// Errors from building models or importing weights; each names the file or key at fault.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The weight file cannot be opened or parsed.
    #[error("cannot read weights {path}: {message}")]
    Read {
        /// The weight file.
        path: PathBuf,
        /// The reader's explanation.
        message: String,
    },
    /// A tensor of the file does not fit the model.
    #[error("weights {path}: {message}")]
    Mismatch {
        /// The weight file.
        path: PathBuf,
        /// Which keys and shapes disagree.
        message: String,
    },
    /// A model parameter has no tensor in the file (and partial loading was not asked for).
    #[error("weights {path}: missing keys {keys:?}")]
    Missing {
        /// The weight file.
        path: PathBuf,
        /// The model parameters the file lacks, named as the file's layout names them
        /// (torchvision or Cadene keys).
        keys: Vec<String>,
    },
    /// A configuration value is invalid.
    #[error("invalid model configuration: {0}")]
    Config(String),
}
