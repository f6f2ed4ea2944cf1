//! `train import`: a model trained in PyTorch (a pytorch-metric-learning trunk and embedder) as a
//! run every other command takes.

use std::path::PathBuf;

use clap::Args;
use dml_train::import::{ImportRequest, import};

use crate::commands::train::{ConfigArgs, resolve};
use crate::terminal::Terminal;

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The run's configuration: --backbone resnet18|resnet50|bn_inception, --name, and the
    /// preprocessing the model was trained with (`--set data.image_size=224 --set data.mean=[…]`).
    #[command(flatten)]
    pub run: ConfigArgs,
    /// The trunk's state dict (`.pth` as torch.save(model.state_dict()) writes it, or
    /// `.safetensors`): torchvision's layout (fc = Identity, or an fc that is ignored), Cadene's for
    /// BN-Inception; or one file holding `trunk.` and `embedder.` keys.
    #[arg(long)]
    pub trunk: PathBuf,
    /// The embedder's state dict: an nn.Linear (or an nn.Sequential / PML MLP holding one). None:
    /// the pooled trunk features are the embedding.
    #[arg(long)]
    pub embedder: Option<PathBuf>,
}

/// Imports the model and prints what was read.
pub fn run(args: &ImportArgs) -> anyhow::Result<()> {
    let config = resolve(&args.run, false)?;
    let progress = Terminal { bars: false };
    let outcome = import(
        &ImportRequest {
            config,
            trunk: args.trunk.clone(),
            embedder: args.embedder.clone(),
        },
        &progress,
    )?;
    let report = &outcome.trunk_report;
    println!(
        "trunk: {} tensors from {}{}",
        report.applied,
        args.trunk.display(),
        if report.unused.is_empty() {
            String::new()
        } else {
            format!(
                " ({} unused, ignored: {})",
                report.unused.len(),
                report.unused.join(", ")
            )
        }
    );
    println!("embedder: {} (D = {})", outcome.embedder, outcome.embedding_dim);
    println!("run directory: {}", outcome.run_dir.display());
    Ok(())
}
