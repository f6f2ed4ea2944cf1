//! `train explain report`.

use std::path::PathBuf;

use clap::Args;
use dml_inspect::report::{
    Availability, QueryOptions, ReportMode, ReportOptions, ReportOutcome, ReportRequest, explain_report,
};

use crate::run_ref::RunRefArgs;
use crate::terminal::Terminal;

#[derive(Debug, Args)]
pub struct ReportArgs {
    #[command(flatten)]
    pub model: RunRefArgs,
    /// The query image (query mode); without it, give two images (pair mode).
    #[arg(long, conflicts_with = "images")]
    pub query: Option<PathBuf>,
    /// The split searched in query mode.
    #[arg(long, default_value = "test", requires = "query")]
    pub split: String,
    /// Hits shown per ranking in query mode.
    #[arg(long, default_value_t = 8, requires = "query")]
    pub top: usize,
    /// Neighbours by global distance that DIML re-ranking re-scores in query mode (its K).
    #[arg(long, default_value_t = 100, requires = "query")]
    pub diml_k: usize,
    /// Side G of DIML's grid.
    #[arg(long, default_value_t = 4)]
    pub grid: usize,
    /// DIML flows drawn (those with the largest contribution).
    #[arg(long, default_value_t = 8)]
    pub flows: usize,
    /// AVSL nodes shown per level (1 or 2).
    #[arg(long, default_value_t = 2)]
    pub avsl_top: usize,
    /// SmoothGrad samples per image.
    #[arg(long, default_value_t = 50)]
    pub samples: usize,
    /// Seed of the SmoothGrad noise.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// The report folder (default: <run>/explain/report for a pair, <run>/explain/query-report for
    /// a query); replaced only once the new report is complete.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// The two images of a pair.
    #[arg(num_args = 0..=2)]
    pub images: Vec<PathBuf>,
}

/// Builds the report and says where it is.
pub fn run(args: &ReportArgs, progress: &Terminal) -> anyhow::Result<()> {
    let (mode, default_out) = match (&args.query, args.images.as_slice()) {
        (Some(query), []) => (
            ReportMode::Query(QueryOptions {
                query: query.clone(),
                split: args.split.clone(),
                top: args.top,
                diml_k: args.diml_k,
            }),
            "query-report",
        ),
        (None, [a, b]) => (ReportMode::Pair([a.clone(), b.clone()]), "report"),
        (None, other) => anyhow::bail!(
            "explain report takes two images (a pair) or --query IMAGE, got {} image(s)",
            other.len()
        ),
        (Some(_), _) => anyhow::bail!("--query takes no other image"),
    };
    let request = ReportRequest {
        run: args.model.to_ref(),
        out: args
            .out
            .clone()
            .unwrap_or_else(|| args.model.run.join("explain").join(default_out)),
        mode,
        options: ReportOptions {
            samples: args.samples,
            seed: args.seed,
            flows: args.flows,
            grid: args.grid,
            avsl_top: args.avsl_top,
            ..ReportOptions::default()
        },
    };
    let result = explain_report(&request, progress)?;
    match &result.outcome {
        ReportOutcome::Pair(p) => println!(
            "global cosine {:.4}, DIML structural {:.4}{}",
            p.global.cosine,
            p.diml.structural_similarity,
            match &p.avsl {
                Availability::Available(a) => format!(", AVSL d̂ {:.4}", a.d_hat),
                Availability::NotAvailable { .. } => String::new(),
            }
        ),
        ReportOutcome::Query(q) => println!(
            "{} images of the {} split searched, top {} per ranking",
            q.gallery_size, q.split, q.top
        ),
    }
    println!(
        "wrote {} in {:.2} s",
        result.dir.join("report.html").display(),
        result.seconds
    );
    Ok(())
}
