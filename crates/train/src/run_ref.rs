//! The flags every explanation command names its model with.

use std::path::PathBuf;

use clap::Args;
use dml_train::RunRef;

/// `--run DIR [--checkpoint best|latest|DIR] [--device NAME]`.
#[derive(Debug, Clone, Args)]
pub struct RunRefArgs {
    /// The run directory (e.g. runs/default).
    #[arg(long)]
    pub run: PathBuf,
    /// auto (best where the data had a val split, else latest) | best | latest | a checkpoint directory.
    #[arg(long, default_value = "auto")]
    pub checkpoint: String,
    /// Device (default: the run's).
    #[arg(long)]
    pub device: Option<String>,
}

impl RunRefArgs {
    /// The run library's reference to the same model.
    pub fn to_ref(&self) -> RunRef {
        RunRef {
            run: self.run.clone(),
            checkpoint: self.checkpoint.clone(),
            device: self.device.clone(),
        }
    }
}
