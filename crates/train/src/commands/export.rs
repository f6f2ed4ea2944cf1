//! `train export`.

use std::path::PathBuf;

use clap::Args;
use dml_train::export::{ExportRequest, run_export};

use crate::run_ref::RunRefArgs;
use crate::terminal::Terminal;

#[derive(Debug, Args)]
pub struct ExportArgs {
    #[command(flatten)]
    pub model: RunRefArgs,
    /// The folder for trunk.safetensors, embedder.safetensors and README.md (replaced whole).
    #[arg(long)]
    pub out: PathBuf,
}

/// Exports and prints the files.
pub fn run(args: &ExportArgs) -> anyhow::Result<()> {
    let files = run_export(
        &ExportRequest {
            run: args.model.to_ref(),
            out: args.out.clone(),
        },
        &Terminal { bars: false },
    )?;
    for f in files {
        println!("wrote {}", f.display());
    }
    Ok(())
}
