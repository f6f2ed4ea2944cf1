//! `train explain benchmark`.

use std::path::PathBuf;

use clap::Args;
use dml_inspect::benchmark::{BenchmarkRequest, MethodSettings, RoadSettings, benchmark};
use dml_train::RunRef;

use crate::terminal::Terminal;

#[derive(Debug, Args)]
pub struct BenchmarkArgs {
    /// A run directory; repeat for several runs (each gets its table).
    #[arg(long = "run", required = true)]
    pub runs: Vec<PathBuf>,
    /// auto (best where the data had a val split, else latest) | best | latest (of every run).
    #[arg(long, default_value = "auto")]
    pub checkpoint: String,
    /// Device (default: each run's).
    #[arg(long)]
    pub device: Option<String>,
    /// Same-class test pairs, and as many different-class ones (each query against a positive and
    /// a negative partner).
    #[arg(long, default_value_t = 100)]
    pub pairs: usize,
    /// The split the pairs are drawn from.
    #[arg(long, default_value = "test")]
    pub split: String,
    /// Only these methods (repeatable): attention_<stage>, diml_marginal, diml_flow, avsl,
    /// smoothgrad. Default: every method the run supports.
    #[arg(long = "method")]
    pub methods: Vec<String>,
    /// Same-class pairs explained again at every step of the randomisation cascade.
    #[arg(long, default_value_t = 10)]
    pub randomisation_pairs: usize,
    /// SmoothGrad samples per map.
    #[arg(long, default_value_t = 50)]
    pub samples: usize,
    /// Seed of the pairs, the random baseline, the imputation noise and the fresh weights.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Output folder: benchmark.md, benchmark.json, benchmark.png (replaced whole).
    #[arg(long)]
    pub out: PathBuf,
}

/// Runs the benchmark and prints where its files are and how long each run took.
pub fn run(args: &BenchmarkArgs, progress: &Terminal) -> anyhow::Result<()> {
    let split = args
        .split
        .parse()
        .map_err(|e| anyhow::anyhow!("--split {}: {e}", args.split))?;
    let request = BenchmarkRequest {
        runs: args
            .runs
            .iter()
            .map(|r| RunRef {
                run: r.clone(),
                checkpoint: args.checkpoint.clone(),
                device: args.device.clone(),
            })
            .collect(),
        pairs: args.pairs,
        split,
        seed: args.seed,
        methods: args.methods.clone(),
        randomisation_pairs: args.randomisation_pairs,
        settings: MethodSettings {
            samples: args.samples,
            seed: args.seed,
            ..MethodSettings::default()
        },
        road: RoadSettings::default(),
        out: args.out.clone(),
    };
    let report = benchmark(&request, progress)?;
    for run in &report.runs {
        println!(
            "{}: {} + {} pairs, {} rows, {:.1} s",
            run.run.display(),
            report.pairs,
            report.pairs,
            run.rows.len(),
            run.seconds
        );
    }
    println!("wrote {}", args.out.join("benchmark.md").display());
    Ok(())
}
