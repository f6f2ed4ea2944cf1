//! `train explain faithfulness`.

use std::path::PathBuf;

use clap::Args;
use dml_inspect::faithfulness::{FaithfulnessRequest, faithfulness};

use crate::run_ref::RunRefArgs;
use crate::terminal::Terminal;

#[derive(Debug, Args)]
pub struct FaithfulnessArgs {
    #[command(flatten)]
    pub model: RunRefArgs,
    /// Another dataset with object masks (default: the run's).
    #[arg(long)]
    pub dataset: Option<String>,
    /// The split triplets are drawn from.
    #[arg(long, default_value = "test")]
    pub split: String,
    /// Triplets to explain.
    #[arg(long, default_value_t = 100)]
    pub triplets: usize,
    /// The backbone stage (default: the last).
    #[arg(long)]
    pub stage: Option<String>,
    /// Seed of the triplets and of the random deletion.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Write faithfulness.json here.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// Scores the attention and prints the summary table.
pub fn run(args: &FaithfulnessArgs, progress: &Terminal) -> anyhow::Result<()> {
    let split = args
        .split
        .parse()
        .map_err(|e| anyhow::anyhow!("--split {}: {e}", args.split))?;
    let request = FaithfulnessRequest {
        run: args.model.to_ref(),
        dataset: args.dataset.clone(),
        split,
        triplets: args.triplets,
        stage: args.stage.clone(),
        seed: args.seed,
        out: args.out.clone(),
    };
    let report = faithfulness(&request, progress)?;
    let s = &report.summary;
    let show = |m: &dml_explain::faithfulness::MeanStd| match (m.mean, m.std) {
        (Some(mean), Some(std)) => format!("{mean:.4} ± {std:.4}"),
        _ => "n/a".into(),
    };
    println!(
        "{} images of {} triplets ({} split, stage {})",
        s.images, report.triplets, report.split, report.stage
    );
    println!(
        "pointing game  attention {}   centre prior {}",
        show(&s.pointing_hit_rate),
        show(&s.centre_prior_pointing_hit_rate)
    );
    println!(
        "IoU            attention {}   centre prior {}",
        show(&s.iou),
        show(&s.centre_prior_iou)
    );
    println!(
        "deletion AUC   attention {}   random {}   (lower is more faithful)",
        show(&s.deletion_auc),
        show(&s.random_deletion_auc)
    );
    if let Some(out) = &args.out {
        println!("wrote {}", out.join("faithfulness.json").display());
    }
    Ok(())
}
