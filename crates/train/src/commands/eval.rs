//! `train eval RUN …`: a checkpoint of a run on a split, the metrics table and the exports.

use std::path::PathBuf;

use clap::Args;
use dml_train::RunRef;
use dml_train::evaluation::{DimlEval, EvalRequest, run_eval, table};

use crate::terminal::Terminal;

#[derive(Debug, Args)]
pub struct EvalArgs {
    /// The run directory (e.g. runs/default).
    pub run: PathBuf,
    /// auto (the best on val where the run has a val split, else the latest) | best (the latest,
    /// with a note, when there is no val split) | latest | a checkpoint directory.
    #[arg(long, default_value = "auto")]
    pub checkpoint: String,
    /// Split to evaluate (default: the run's eval.split).
    #[arg(long)]
    pub split: Option<String>,
    /// Evaluate on another dataset (name or manifest).
    #[arg(long)]
    pub dataset: Option<String>,
    /// Device (default: the run's).
    #[arg(long)]
    pub device: Option<String>,
    /// Write embeddings.npy and labels.npy into this directory.
    #[arg(long, value_name = "DIR")]
    pub export_embeddings: Option<PathBuf>,
    /// The metrics shown: a comma-separated list of p@1, r-precision, map@r, map, mrr, recall@K,
    /// nmi, ami, or all. Every one of them is computed and written to metrics.json.
    #[arg(long, value_name = "LIST", default_value = "p@1,r-precision,map@r")]
    pub metrics: String,
    /// The directory metrics.json is written into (default: <run>/eval).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// DIML multi-scale re-ranking: re-score each query's top K neighbours by global cosine +
    /// structural similarity, reported next to K = 0 (0 = off).
    #[arg(long, value_name = "K", default_value_t = 0)]
    pub diml_k: usize,
    /// Side G of the grid the last feature map is reduced to for re-ranking.
    #[arg(long, value_name = "G", default_value_t = 4)]
    pub diml_grid: usize,
    /// AVSL runs: re-score each query's top K neighbours (by the concatenated level embedding)
    /// with the graph's overall distance d̂, reported next to K = 0. Default: exact (every pair)
    /// up to avsl.exact_limit images, else avsl.rerank_k; 0 = off.
    #[arg(long, value_name = "K")]
    pub avsl_k: Option<usize>,
}

/// Evaluates the checkpoint the flags name and prints the table.
pub fn run(args: &EvalArgs) -> anyhow::Result<()> {
    let metrics = dml_train::metrics::parse_metrics(&args.metrics)?;
    let outcome = run_eval(
        &EvalRequest {
            metrics,
            out: args.out.clone(),
            run: RunRef {
                run: args.run.clone(),
                checkpoint: args.checkpoint.clone(),
                device: args.device.clone(),
            },
            split: args.split.clone(),
            dataset: args.dataset.clone(),
            export: args.export_embeddings.clone(),
            diml: DimlEval {
                k: args.diml_k,
                grid: args.diml_grid,
            },
            avsl_k: args.avsl_k,
        },
        &Terminal { bars: false },
    )?;
    print!("{}", table(&outcome));
    Ok(())
}
