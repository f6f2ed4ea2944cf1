//! `train explain attention`.

use std::path::PathBuf;

use clap::Args;
use dml_inspect::attention::{AttentionRequest, explain_attention};

use crate::run_ref::RunRefArgs;
use crate::terminal::Terminal;

#[derive(Debug, Args)]
pub struct AttentionArgs {
    #[command(flatten)]
    pub model: RunRefArgs,
    /// The backbone stage (default: the last; e.g. layer3 for a ResNet, stage3 for the small CNN).
    #[arg(long)]
    pub stage: Option<String>,
    /// Explain two images as a different-class pair.
    #[arg(long)]
    pub different: bool,
    /// The output directory.
    #[arg(long)]
    pub out: PathBuf,
    /// anchor positive [negative [negative2]].
    #[arg(required = true, num_args = 1..)]
    pub images: Vec<PathBuf>,
}

/// Explains the tuple and lists the scores and files.
pub fn run(args: &AttentionArgs, progress: &Terminal) -> anyhow::Result<()> {
    let request = AttentionRequest {
        run: args.model.to_ref(),
        images: args.images.clone(),
        different: args.different,
        stage: args.stage.clone(),
        out: args.out.clone(),
    };
    let report = explain_attention(&request, progress)?;
    for image in &report.images {
        println!("{:>10}  s = {:.4}  {}", image.role, image.score, image.path.display());
    }
    for file in &report.files {
        println!("wrote {}", file.display());
    }
    Ok(())
}
