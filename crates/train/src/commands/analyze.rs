//! `train analyze RUN RUN … --out DIR`: Kobs et al.'s comparison of the runs' features.

use std::path::PathBuf;

use clap::Args;
use dml_explain::saliency::smoothgrad::MapOrder;
use dml_inspect::analyze::{AnalyzeRequest, analyze};

use crate::terminal::Terminal;

#[derive(Debug, Args)]
pub struct AnalyzeArgs {
    /// Run directories (at least two), trained on the same dataset.
    #[arg(required = true, num_args = 2..)]
    pub runs: Vec<PathBuf>,
    /// A named group of runs by directory name: `--group ranking=a,b`; the first two groups are
    /// compared by a Mann-Whitney U test per property.
    #[arg(long = "group", value_name = "NAME=RUN,RUN")]
    pub groups: Vec<String>,
    /// best | latest | a checkpoint directory.
    #[arg(long, default_value = "latest")]
    pub checkpoint: String,
    /// Test images whose saliency is compared.
    #[arg(long, default_value_t = 200)]
    pub images: usize,
    /// SmoothGrad samples per image.
    #[arg(long, default_value_t = 50)]
    pub samples: usize,
    /// code (the authors' post-processing order) | paper.
    #[arg(long, default_value = "code")]
    pub order: String,
    /// Seed of the image choice and the SmoothGrad noise.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Device (default: each run's).
    #[arg(long)]
    pub device: Option<String>,
    /// Output directory.
    #[arg(long)]
    pub out: PathBuf,
    /// No progress bars.
    #[arg(long)]
    pub quiet: bool,
}

/// Runs the analysis and lists what it wrote.
pub fn run(args: &AnalyzeArgs) -> anyhow::Result<()> {
    let groups = args
        .groups
        .iter()
        .map(|g| {
            let (name, members) = g
                .split_once('=')
                .ok_or_else(|| anyhow::anyhow!("--group {g:?}: write NAME=RUN,RUN"))?;
            Ok((name.to_string(), members.split(',').map(str::to_string).collect()))
        })
        .collect::<anyhow::Result<Vec<(String, Vec<String>)>>>()?;
    let order = match args.order.as_str() {
        "code" => MapOrder::Code,
        "paper" => MapOrder::Paper,
        other => anyhow::bail!("--order {other:?}: expected code or paper"),
    };
    let request = AnalyzeRequest {
        runs: args.runs.clone(),
        groups,
        checkpoint: args.checkpoint.clone(),
        images: args.images,
        samples: args.samples,
        order,
        seed: args.seed,
        device: args.device.clone(),
        out: args.out.clone(),
    };
    let report = analyze(&request, &Terminal { bars: !args.quiet })?;
    println!(
        "{} models, {} images, {:.1} saliency maps/s",
        report.models.len(),
        report.images,
        report.maps_per_second
    );
    for file in &report.files {
        println!("wrote {}", file.display());
    }
    Ok(())
}
