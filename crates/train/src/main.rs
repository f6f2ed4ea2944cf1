//! `cargo run -p train -- [train options]` and `cargo run -p train -- eval …`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use dml_explain::saliency::smoothgrad::MapOrder;
use train::analyze::{AnalyzeRequest, analyze};
use train::evaluate::{DimlEval, EvalRequest, run_eval, table};
use train::explain::{AttentionRequest, FaithfulnessRequest, explain_attention, faithfulness};
use train::explain_avsl::{AvslRequest, explain_avsl};
use train::report::{QueryOptions, ReportMode, ReportOptions, ReportOutcome, ReportRequest, explain_report};
use train::{RunOptions, Shortcuts, TrainConfig};

/// Deep-metric-learning training and evaluation.
///
/// With no arguments, trains the embedded default (small CNN, margin loss with
/// distance-weighted sampling, synthetic shapes, CPU) and reports P@1 / MAP@R on the
/// held-out classes before and after.
#[derive(Debug, Parser)]
#[command(name = "train", args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    train: TrainArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Train (the default when no subcommand is given).
    Train(TrainArgs),
    /// Evaluate a checkpoint of a run on a split, optionally exporting embeddings.
    Eval(EvalArgs),
    /// Print the resolved configuration (default + file + overrides) and exit.
    Config(ConfigArgs),
    /// Explain a trained model: similarity attention of a pair, triplet or quadruplet, and its
    /// faithfulness on the synthetic set.
    #[command(subcommand)]
    Explain(ExplainCommand),
    /// Do different losses learn different features? SmoothGrad saliency compared between the
    /// runs, NR-Precision of the image properties, group tests (Kobs et al., ICCV 2021).
    Analyze(AnalyzeArgs),
}

#[derive(Debug, Args)]
struct AnalyzeArgs {
    /// Run directories (at least two), trained on the same dataset.
    #[arg(required = true, num_args = 2..)]
    runs: Vec<PathBuf>,
    /// A named group of runs by directory name: `--group ranking=a,b`; the first two groups are
    /// compared by a Mann-Whitney U test per property.
    #[arg(long = "group", value_name = "NAME=RUN,RUN")]
    groups: Vec<String>,
    /// best | latest | a checkpoint directory.
    #[arg(long, default_value = "latest")]
    checkpoint: String,
    /// Test images whose saliency is compared.
    #[arg(long, default_value_t = 200)]
    images: usize,
    /// SmoothGrad samples per image.
    #[arg(long, default_value_t = 50)]
    samples: usize,
    /// code (the authors' post-processing order) | paper.
    #[arg(long, default_value = "code")]
    order: String,
    /// Seed of the image choice and the SmoothGrad noise.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Device (default: each run's).
    #[arg(long)]
    device: Option<String>,
    /// Output directory.
    #[arg(long)]
    out: PathBuf,
    /// No progress bars.
    #[arg(long)]
    quiet: bool,
}

fn run_analyze(args: &AnalyzeArgs) -> anyhow::Result<()> {
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
    let report = analyze(&AnalyzeRequest {
        runs: args.runs.clone(),
        groups,
        checkpoint: args.checkpoint.clone(),
        images: args.images,
        samples: args.samples,
        order,
        seed: args.seed,
        device: args.device.clone(),
        out: args.out.clone(),
        progress: !args.quiet,
    })?;
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

#[derive(Debug, Subcommand)]
enum ExplainCommand {
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
struct ReportArgs {
    /// The run directory (e.g. runs/default).
    #[arg(long)]
    run: PathBuf,
    /// best | latest | a checkpoint directory.
    #[arg(long, default_value = "best")]
    checkpoint: String,
    /// The query image (query mode); without it, give two images (pair mode).
    #[arg(long, conflicts_with = "images")]
    query: Option<PathBuf>,
    /// The split searched in query mode.
    #[arg(long, default_value = "test", requires = "query")]
    split: String,
    /// Hits shown per ranking in query mode.
    #[arg(long, default_value_t = 8, requires = "query")]
    top: usize,
    /// Neighbours by global distance that DIML re-ranking re-scores in query mode (its K).
    #[arg(long, default_value_t = 100, requires = "query")]
    diml_k: usize,
    /// Side G of DIML's grid.
    #[arg(long, default_value_t = 4)]
    grid: usize,
    /// DIML flows drawn (those with the largest contribution).
    #[arg(long, default_value_t = 8)]
    flows: usize,
    /// AVSL nodes shown per level (1 or 2).
    #[arg(long, default_value_t = 2)]
    avsl_top: usize,
    /// SmoothGrad samples per image.
    #[arg(long, default_value_t = 50)]
    samples: usize,
    /// Seed of the SmoothGrad noise.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Device (default: the run's).
    #[arg(long)]
    device: Option<String>,
    /// The report folder (default: <run>/explain/report for a pair, <run>/explain/query-report for
    /// a query); replaced only once the new report is complete.
    #[arg(long)]
    out: Option<PathBuf>,
    /// The two images of a pair.
    #[arg(num_args = 0..=2)]
    images: Vec<PathBuf>,
}

fn run_report(args: &ReportArgs) -> anyhow::Result<()> {
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
    let result = explain_report(&ReportRequest {
        run: args.run.clone(),
        checkpoint: args.checkpoint.clone(),
        device: args.device.clone(),
        out: args
            .out
            .clone()
            .unwrap_or_else(|| args.run.join("explain").join(default_out)),
        mode,
        options: ReportOptions {
            samples: args.samples,
            seed: args.seed,
            flows: args.flows,
            grid: args.grid,
            avsl_top: args.avsl_top,
            ..ReportOptions::default()
        },
    })?;
    match &result.outcome {
        ReportOutcome::Pair(p) => println!(
            "global cosine {:.4}, DIML structural {:.4}{}",
            p.global.cosine,
            p.diml.structural_similarity,
            match &p.avsl {
                train::report::Availability::Available(a) => format!(", AVSL d̂ {:.4}", a.d_hat),
                train::report::Availability::NotAvailable { .. } => String::new(),
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

#[derive(Debug, Args)]
struct AvslArgs {
    /// The run directory (trained with [avsl] enabled = true).
    #[arg(long)]
    run: PathBuf,
    /// best | latest | a checkpoint directory.
    #[arg(long, default_value = "best")]
    checkpoint: String,
    /// Nodes shown per level (those with the largest attribution).
    #[arg(long, default_value_t = 3)]
    top: usize,
    /// Device (default: the run's).
    #[arg(long)]
    device: Option<String>,
    /// The output directory.
    #[arg(long)]
    out: PathBuf,
    /// The two images.
    #[arg(num_args = 2, required = true)]
    images: Vec<PathBuf>,
}

#[derive(Debug, Args)]
struct AttentionArgs {
    /// The run directory (e.g. runs/default).
    #[arg(long)]
    run: PathBuf,
    /// best | latest | a checkpoint directory.
    #[arg(long, default_value = "best")]
    checkpoint: String,
    /// The backbone stage (default: the last; e.g. layer3 for a ResNet, stage3 for the small CNN).
    #[arg(long)]
    stage: Option<String>,
    /// Explain two images as a different-class pair.
    #[arg(long)]
    different: bool,
    /// Device (default: the run's).
    #[arg(long)]
    device: Option<String>,
    /// The output directory.
    #[arg(long)]
    out: PathBuf,
    /// anchor positive [negative [negative2]].
    #[arg(required = true, num_args = 1..)]
    images: Vec<PathBuf>,
}

#[derive(Debug, Args)]
struct FaithfulnessArgs {
    /// The run directory.
    #[arg(long)]
    run: PathBuf,
    /// best | latest | a checkpoint directory.
    #[arg(long, default_value = "best")]
    checkpoint: String,
    /// Another dataset with object masks (default: the run's).
    #[arg(long)]
    dataset: Option<String>,
    /// The split triplets are drawn from.
    #[arg(long, default_value = "test")]
    split: String,
    /// Triplets to explain.
    #[arg(long, default_value_t = 100)]
    triplets: usize,
    /// The backbone stage (default: the last).
    #[arg(long)]
    stage: Option<String>,
    /// Seed of the triplets and of the random deletion.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Device (default: the run's).
    #[arg(long)]
    device: Option<String>,
    /// Write faithfulness.json here.
    #[arg(long)]
    out: Option<PathBuf>,
}

/// What a run is: the configuration layers (the embedded default, a TOML file, the shortcut flags
/// and `--set` overrides), shared by training and `config`.
#[derive(Debug, Clone, Args)]
struct ConfigArgs {
    /// A TOML file overriding the embedded default key by key.
    #[arg(long, short)]
    config: Option<PathBuf>,
    /// Override any key: `--set loss.margin=0.1 --set miner=none` (`miner=NAME` is shorthand for
    /// that miner with its default parameters).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    sets: Vec<String>,
    /// flex (CPU, default) | ndarray | wgpu | wgpu:cpu | wgpu:discrete[:N] | wgpu:integrated[:N] |
    /// cuda[:N] (a build with --features cuda).
    #[arg(long)]
    device: Option<String>,
    /// synth | fashion-mnist | the name of a set prepared under data.root (e.g. cub200 after
    /// `cargo xtask prepare cub200`) | path/to/manifest.csv.
    #[arg(long)]
    dataset: Option<String>,
    /// small_cnn | resnet18 | resnet50 | bn_inception.
    #[arg(long)]
    backbone: Option<String>,
    /// The loss by name; its parameters reset to their defaults and, unless a miner is given, the
    /// miner to the loss's paper default (margin: distance_weighted, triplet_margin: semihard
    /// triplet_margin, multi_similarity and gml_ms: multi_similarity, every other loss: none).
    #[arg(long)]
    loss: Option<String>,
    /// The miner by name with its default parameters, or none: triplet_margin | batch_hard |
    /// multi_similarity | pair_margin | distance_weighted | random_triplets | none.
    #[arg(long)]
    miner: Option<String>,
    /// Training epochs.
    #[arg(long)]
    epochs: Option<usize>,
    /// Images per batch.
    #[arg(long)]
    batch_size: Option<usize>,
    /// Seed of every random choice.
    #[arg(long)]
    seed: Option<u64>,
    /// Run name (directory under run_dir).
    #[arg(long)]
    name: Option<String>,
    /// Parent directory of runs.
    #[arg(long)]
    run_dir: Option<PathBuf>,
}

#[derive(Debug, Clone, Args)]
struct TrainArgs {
    #[command(flatten)]
    run: ConfigArgs,
    /// Continue the run from its latest checkpoint, as its saved config.toml configured it (only
    /// --epochs may grow; any other change is refused).
    #[arg(long)]
    resume: bool,
    /// No progress bars.
    #[arg(long)]
    quiet: bool,
    /// Stop after N completed epochs (resume later with --resume).
    #[arg(long, value_name = "N")]
    stop_after: Option<usize>,
}

#[derive(Debug, Args)]
struct EvalArgs {
    /// The run directory (e.g. runs/default).
    run: PathBuf,
    /// best (the best on val; the latest, with a note, when the run has no val split) | latest | a
    /// checkpoint directory.
    #[arg(long, default_value = "best")]
    checkpoint: String,
    /// Split to evaluate (default: the run's eval.split).
    #[arg(long)]
    split: Option<String>,
    /// Evaluate on another dataset (name or manifest).
    #[arg(long)]
    dataset: Option<String>,
    /// Device (default: the run's).
    #[arg(long)]
    device: Option<String>,
    /// Write embeddings.npy and labels.npy into this directory.
    #[arg(long, value_name = "DIR")]
    export_embeddings: Option<PathBuf>,
    /// The metrics shown: a comma-separated list of p@1, r-precision, map@r, map, mrr, recall@K,
    /// nmi, ami, or all. Every one of them is computed and written to metrics.json.
    #[arg(long, value_name = "LIST", default_value = "p@1,r-precision,map@r")]
    metrics: String,
    /// The directory metrics.json is written into (default: <run>/eval).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// DIML multi-scale re-ranking: re-score each query's top K neighbours by global cosine +
    /// structural similarity, reported next to K = 0 (0 = off).
    #[arg(long, value_name = "K", default_value_t = 0)]
    diml_k: usize,
    /// Side G of the grid the last feature map is reduced to for re-ranking.
    #[arg(long, value_name = "G", default_value_t = 4)]
    diml_grid: usize,
    /// AVSL runs: re-score each query's top K neighbours (by the concatenated level embedding)
    /// with the graph's overall distance d̂, reported next to K = 0. Default: exact (every pair)
    /// up to avsl.exact_limit images, else avsl.rerank_k; 0 = off.
    #[arg(long, value_name = "K")]
    avsl_k: Option<usize>,
}

/// The configuration of a run from the command line: a resumed run's saved `config.toml` is the
/// base the command line's settings are checked against (not the embedded default), a new run
/// starts from the embedded default.
fn resolve(args: &ConfigArgs, resume: bool) -> anyhow::Result<TrainConfig> {
    let shortcuts = shortcuts(args);
    let config = TrainConfig::resolve(args.config.as_deref(), &shortcuts, &args.sets)?;
    let saved = config.run_path().join("config.toml");
    if resume && saved.is_file() {
        return Ok(TrainConfig::resolve_resume(
            &saved,
            args.config.as_deref(),
            &shortcuts,
            &args.sets,
        )?);
    }
    Ok(config)
}

fn shortcuts(args: &ConfigArgs) -> Shortcuts {
    Shortcuts {
        device: args.device.clone(),
        dataset: args.dataset.clone(),
        backbone: args.backbone.clone(),
        loss: args.loss.clone(),
        miner: args.miner.clone(),
        epochs: args.epochs,
        batch_size: args.batch_size,
        seed: args.seed,
        name: args.name.clone(),
        run_dir: args.run_dir.clone(),
    }
}

fn run_train(args: &TrainArgs) -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    let config = resolve(&args.run, args.resume)?;
    println!("{}", config.loss_and_miner());
    let options = RunOptions {
        resume: args.resume,
        progress: !args.quiet,
        stop_after_epochs: args.stop_after,
    };
    let summary = train::train(&config, &options)?;
    if let (Some(b), Some(a)) = (summary.before(), summary.after()) {
        println!(
            "\n{} on {} ({}): P@1 {:.4} → {:.4}, MAP@R {:.4} → {:.4}",
            config.model.backbone,
            config.eval.split,
            config.data.dataset,
            b.precision_at_1,
            a.precision_at_1,
            b.map_at_r,
            a.map_at_r
        );
    }
    if let Some(best) = summary.best {
        println!("best on val: epoch {} ({:.4})", best.epoch, best.value);
    }
    println!("run directory: {}", summary.run_dir.display());
    println!("wall time: {}", train::trainer::wall_time(started.elapsed()));
    Ok(())
}

/// Makes Burn's default device the CPU (`flex`) unless `BURN_DEVICE` already names one.
///
/// Every device this program computes on is explicit (`--device`, parsed in one place), but Burn
/// materialises a loaded optimiser state on its *default* device, which in this build (with wgpu)
/// is the GPU: resuming a CPU run would probe for a GPU, printing the Vulkan loader's
/// `XDG_RUNTIME_DIR is invalid` errors on a machine without a desktop session. The state moves to
/// its parameter's device at the next optimiser step, so the default only decides where it waits
/// until then.
fn quiet_default_device() {
    default_env("BURN_DEVICE", "flex");
}

/// Makes cubecl's autotuning (the GPU devices' choice of kernel per operation and shape) take its
/// least effort, `minimal`, unless `CUBECL_AUTOTUNE_LEVEL` already names a level.
///
/// Tuning runs every candidate kernel of each new shape the first time it is seen. Measured on an
/// H100 through wgpu (README, "On a GPU"), the default run took 73 s at cubecl's default level
/// (`balanced`: its first epoch ran at 34 images/s while tuning, the later ones at about 2,500)
/// and 30 s at `minimal` (first epoch 135 images/s), while a
/// ResNet-50 224² batch-64 training step ran at 392 ms after `balanced` tuning and 354 ms after
/// `minimal`: the extra effort bought no speed here.
fn quick_autotune() {
    default_env("CUBECL_AUTOTUNE_LEVEL", "minimal");
}

/// Sets the environment variable `name` to `value` unless the user set it. Only for the start of
/// `main`, before any thread exists.
fn default_env(name: &str, value: &str) {
    if std::env::var_os(name).is_none() {
        // SAFETY: called first thing in `main`, before any thread of this program exists, so no
        // other thread can read the environment concurrently.
        unsafe { std::env::set_var(name, value) };
    }
}

fn run_faithfulness(args: &FaithfulnessArgs) -> anyhow::Result<()> {
    let split = args
        .split
        .parse()
        .map_err(|e| anyhow::anyhow!("--split {}: {e}", args.split))?;
    let report = faithfulness(&FaithfulnessRequest {
        run: args.run.clone(),
        checkpoint: args.checkpoint.clone(),
        dataset: args.dataset.clone(),
        split,
        triplets: args.triplets,
        stage: args.stage.clone(),
        seed: args.seed,
        device: args.device.clone(),
        out: args.out.clone(),
    })?;
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

fn main() -> ExitCode {
    // Before any tensor: CPU training steps reuse their freed buffers instead of re-mapping them.
    dml_backend::retain_freed_memory();
    quiet_default_device();
    quick_autotune();
    let cli = Cli::parse();
    let result = match &cli.command {
        None => run_train(&cli.train),
        Some(Command::Train(args)) => run_train(args),
        Some(Command::Config(args)) => resolve(args, false).and_then(|c| {
            print!("{}", c.to_toml()?);
            Ok(())
        }),
        Some(Command::Explain(ExplainCommand::Attention(args))) => explain_attention(&AttentionRequest {
            run: args.run.clone(),
            checkpoint: args.checkpoint.clone(),
            images: args.images.clone(),
            different: args.different,
            stage: args.stage.clone(),
            device: args.device.clone(),
            out: args.out.clone(),
        })
        .map(|r| {
            for image in &r.images {
                println!("{:>10}  s = {:.4}  {}", image.role, image.score, image.path.display());
            }
            for file in &r.files {
                println!("wrote {}", file.display());
            }
        })
        .map_err(Into::into),
        Some(Command::Explain(ExplainCommand::Faithfulness(args))) => run_faithfulness(args),
        Some(Command::Explain(ExplainCommand::Avsl(args))) => explain_avsl(&AvslRequest {
            run: args.run.clone(),
            checkpoint: args.checkpoint.clone(),
            images: [args.images[0].clone(), args.images[1].clone()],
            top: args.top,
            device: args.device.clone(),
            out: args.out.clone(),
        })
        .map(|report| {
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
        })
        .map_err(Into::into),
        Some(Command::Explain(ExplainCommand::Report(args))) => run_report(args),
        Some(Command::Analyze(args)) => run_analyze(args),
        Some(Command::Eval(args)) => train::eval::parse_metrics(&args.metrics)
            .and_then(|metrics| {
                run_eval(&EvalRequest {
                    metrics,
                    out: args.out.clone(),
                    run: args.run.clone(),
                    checkpoint: args.checkpoint.clone(),
                    split: args.split.clone(),
                    dataset: args.dataset.clone(),
                    device: args.device.clone(),
                    export: args.export_embeddings.clone(),
                    diml: DimlEval {
                        k: args.diml_k,
                        grid: args.diml_grid,
                    },
                    avsl_k: args.avsl_k,
                })
            })
            .map(|o| print!("{}", table(&o)))
            .map_err(Into::into),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
