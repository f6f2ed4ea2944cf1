//! `train explain attention|faithfulness|avsl|report`: the explanation commands and what they print.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use dml_inspect::attention::{AttentionRequest, explain_attention};
use dml_inspect::avsl::{AvslRequest, explain_avsl};
use dml_inspect::faithfulness::{FaithfulnessRequest, faithfulness};
use dml_inspect::report::{
    Availability, QueryOptions, ReportMode, ReportOptions, ReportOutcome, ReportRequest, explain_report,
};

use crate::run_ref::RunRefArgs;
use crate::terminal::Terminal;

#[derive(Debug, Subcommand)]
pub enum ExplainCommand {
    /// Similarity attention (Zheng et al.): why the given images are (dis)similar, as PNG overlays
    /// and a JSON of the scores.
    ///
    /// Two images are a same-class pair (`--different` for a different-class one), three an
    /// anchor, positive and negative, four add a second negative.
    Attention(AttentionArgs),
    /// Pointing game and IoU of the attention against the synthetic set's object masks (next to a
    /// centre prior), and deletion curves against random erasure.
    Faithfulness(FaithfulnessArgs),
    /// AVSL (Zhang et al.): the similarity graph of two images for a run trained with
    /// `[avsl] enabled = true`: per level, the nodes with the largest attribution and their CAMs
    /// on both images, and the least reliable top-level node's decomposition into lower-level
    /// nodes, as PNGs and a JSON of the numbers.
    Avsl(AvslArgs),
    /// Every method side by side, as one HTML page with its figures and a report.json: for a pair
    /// (`IMAGE1 IMAGE2`) the global and structural similarities, DIML's marginals and top flows,
    /// similarity attention, AVSL's top nodes (AVSL runs) and SmoothGrad saliency; for a query
    /// (`--query IMAGE`) its top retrievals by global distance, DIML re-ranking and AVSL, each hit
    /// linked to its pair view.
    Report(ReportArgs),
}

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

/// Runs one explanation command.
pub fn run(command: &ExplainCommand) -> anyhow::Result<()> {
    let progress = Terminal { bars: false };
    match command {
        ExplainCommand::Attention(args) => run_attention(args, &progress),
        ExplainCommand::Faithfulness(args) => run_faithfulness(args, &progress),
        ExplainCommand::Avsl(args) => run_avsl(args, &progress),
        ExplainCommand::Report(args) => run_report(args, &progress),
    }
}

/// Explains the tuple and lists the scores and files.
fn run_attention(args: &AttentionArgs, progress: &Terminal) -> anyhow::Result<()> {
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

/// Explains the pair with the AVSL graph and prints `d̂` and the least reliable node.
fn run_avsl(args: &AvslArgs, progress: &Terminal) -> anyhow::Result<()> {
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

/// Builds the report and says where it is.
fn run_report(args: &ReportArgs, progress: &Terminal) -> anyhow::Result<()> {
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

/// Scores the attention and prints the summary table.
fn run_faithfulness(args: &FaithfulnessArgs, progress: &Terminal) -> anyhow::Result<()> {
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
