//! `train embed`.

use std::path::PathBuf;

use clap::Args;
use dml_train::embedding::{EmbedRequest, EmbedSource, run_embed};

use crate::run_ref::RunRefArgs;
use crate::terminal::Terminal;

#[derive(Debug, Args)]
pub struct EmbedArgs {
    #[command(flatten)]
    pub model: RunRefArgs,
    /// Images to embed (or --dataset / --split).
    pub images: Vec<PathBuf>,
    /// Embed a split of this dataset (default: the run's) instead of images.
    #[arg(long)]
    pub dataset: Option<String>,
    /// The split to embed (with --dataset, or the run's dataset when no image is given).
    #[arg(long)]
    pub split: Option<String>,
    /// Images per forward pass.
    #[arg(long, default_value_t = 64)]
    pub batch_size: usize,
    /// The embeddings `[N, D]` float32; `<stem>.paths.txt` and, for a split, `<stem>.labels.npy`
    /// are written beside it.
    #[arg(long)]
    pub out: PathBuf,
}

/// Embeds and prints what was written.
pub fn run(args: &EmbedArgs) -> anyhow::Result<()> {
    let source = if args.images.is_empty() || args.dataset.is_some() || args.split.is_some() {
        if !args.images.is_empty() {
            anyhow::bail!("give images or --dataset/--split, not both");
        }
        let split = args.split.as_deref().unwrap_or("test");
        EmbedSource::Split {
            dataset: args.dataset.clone(),
            split: split.parse().map_err(|e| anyhow::anyhow!("--split {split}: {e}"))?,
        }
    } else {
        EmbedSource::Images(args.images.clone())
    };
    let outcome = run_embed(
        &EmbedRequest {
            run: args.model.to_ref(),
            source,
            out: args.out.clone(),
            batch_size: args.batch_size,
        },
        &Terminal { bars: true },
    )?;
    println!("{} embeddings of dimension {}", outcome.rows, outcome.dim);
    for f in &outcome.files {
        println!("wrote {}", f.display());
    }
    Ok(())
}
