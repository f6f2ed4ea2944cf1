//! `cargo run -p train -- [train options]` and `cargo run -p train -- eval …`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use train::evaluate::{DimlEval, EvalRequest, run_eval, table};
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
    Config(TrainArgs),
}

#[derive(Debug, Clone, Args)]
struct TrainArgs {
    /// A TOML file overriding the embedded default.
    #[arg(long, short)]
    config: Option<PathBuf>,
    /// Override any key: `--set loss.margin=0.1 --set miner=none`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    sets: Vec<String>,
    /// flex | ndarray | wgpu | cuda.
    #[arg(long)]
    device: Option<String>,
    /// synth | fashion-mnist | path/to/manifest.csv.
    #[arg(long)]
    dataset: Option<String>,
    /// small_cnn | resnet18 | resnet50 | bn_inception.
    #[arg(long)]
    backbone: Option<String>,
    /// The loss by name (its parameters reset to their defaults).
    #[arg(long)]
    loss: Option<String>,
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
    /// Continue the run from its latest checkpoint.
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
    /// best | latest | a checkpoint directory.
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
    /// DIML multi-scale re-ranking: re-score each query's top K neighbours by global cosine +
    /// structural similarity, reported next to K = 0 (0 = off).
    #[arg(long, value_name = "K", default_value_t = 0)]
    diml_k: usize,
    /// Side G of the grid the last feature map is reduced to for re-ranking.
    #[arg(long, value_name = "G", default_value_t = 4)]
    diml_grid: usize,
}

fn resolve(args: &TrainArgs) -> anyhow::Result<TrainConfig> {
    let shortcuts = Shortcuts {
        device: args.device.clone(),
        dataset: args.dataset.clone(),
        backbone: args.backbone.clone(),
        loss: args.loss.clone(),
        epochs: args.epochs,
        batch_size: args.batch_size,
        seed: args.seed,
        name: args.name.clone(),
        run_dir: args.run_dir.clone(),
    };
    Ok(TrainConfig::resolve(args.config.as_deref(), &shortcuts, &args.sets)?)
}

fn run_train(args: &TrainArgs) -> anyhow::Result<()> {
    let config = resolve(args)?;
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
    Ok(())
}

fn main() -> ExitCode {
    // Before any tensor: CPU training steps reuse their freed buffers instead of re-mapping them.
    dml_backend::retain_freed_memory();
    let cli = Cli::parse();
    let result = match &cli.command {
        None => run_train(&cli.train),
        Some(Command::Train(args)) => run_train(args),
        Some(Command::Config(args)) => resolve(args).and_then(|c| {
            print!("{}", c.to_toml()?);
            Ok(())
        }),
        Some(Command::Eval(args)) => run_eval(&EvalRequest {
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
