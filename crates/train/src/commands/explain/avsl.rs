//! `train explain avsl`.

use std::path::PathBuf;

use clap::Args;
use dml_inspect::avsl::{AvslRequest, explain_avsl};

use crate::run_ref::RunRefArgs;
use crate::terminal::Terminal;

#[derive(Debug, Args)]
pub struct AvslArgs {
    #[command(flatten)]
    pub model: RunRefArgs,
    /// Nodes shown per level (those with the largest attribution).
    #[arg(long, default_value_t = 3)]
    pub top: usize,
    /// The output directory.
    #[arg(long)]
    pub out: PathBuf,
    /// The two images.
    #[arg(num_args = 2, required = true)]
    pub images: Vec<PathBuf>,
}

/// Explains the pair with the AVSL graph and prints `d̂` and the least reliable node.
pub fn run(args: &AvslArgs, progress: &Terminal) -> anyhow::Result<()> {
    let request = AvslRequest {
        run: args.model.to_ref(),
        images: [args.images[0].clone(), args.images[1].clone()],
        top: args.top,
        out: args.out.clone(),
    };
    let report = explain_avsl(&request, progress)?;
    println!(
        "d̂ = {:.4} (Σ λ·δ = {:.4}); least reliable top-level node #{} (p = {:.3})",
        report.d_hat,
        report.recomposed,
        report.decomposition.node.node,
        report.decomposition.node.reliability.unwrap_or(f32::NAN)
    );
    for file in &report.files {
        println!("wrote {}", file.display());
    }
    Ok(())
}
