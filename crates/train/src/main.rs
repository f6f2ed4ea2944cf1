//! `cargo run -p train -- [train options]`, `… eval`, `… config`, `… explain`, `… analyze`: the
//! command line over `dml-train` (runs) and `dml-inspect` (explanations and analysis). It parses
//! arguments, dispatches, and prints; everything else is in the libraries.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod commands;
mod run_ref;
mod stop;
mod terminal;

/// Deep-metric-learning training and evaluation.
///
/// With no arguments, trains the embedded default (small CNN, margin loss with
/// distance-weighted sampling, synthetic shapes, CPU) and reports P@1 / MAP@R on the
/// held-out classes before and after.
#[derive(Debug, Parser)]
#[command(name = "train", version, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    train: commands::train::TrainArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Train (the default when no subcommand is given).
    Train(commands::train::TrainArgs),
    /// Evaluate a checkpoint of a run on a split, optionally exporting embeddings.
    Eval(commands::eval::EvalArgs),
    /// Print the resolved configuration (default + file + overrides) and exit.
    Config(commands::train::ConfigArgs),
    /// Explain a trained model: similarity attention, its faithfulness, AVSL's similarity graph,
    /// every method side by side in one HTML report, and the explanation benchmark.
    #[command(subcommand)]
    Explain(commands::explain::ExplainCommand),
    /// Do different losses learn different features? SmoothGrad saliency compared between the
    /// runs, NR-Precision of the image properties, group tests (Kobs et al., ICCV 2021).
    Analyze(commands::analyze::AnalyzeArgs),
    /// Verify a run directory without building its model: its configuration, pointers,
    /// checkpoints (state and weights) and metrics, each problem naming the file.
    Check(commands::check::CheckArgs),
    /// A run's embeddings of images or of a dataset split, as .npy (with the image paths and the
    /// labels beside them), in the run's evaluation preprocessing.
    Embed(commands::embed::EmbedArgs),
    /// Import a model trained in PyTorch (pytorch-metric-learning's trunk and embedder state
    /// dicts) as a run: eval, explain and analyze then take it like a trained one.
    Import(commands::import::ImportArgs),
    /// Export a run's trunk and embedder in PyTorch's layout (torchvision / Cadene trunk,
    /// nn.Linear embedder) as safetensors, with the lines of PyTorch that load them.
    Export(commands::export::ExportArgs),
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
/// Tuning times every candidate kernel of each new shape the first time it is seen; on an H100
/// `minimal` made the default run over twice as fast as `balanced` and its steps no slower
/// (`docs/performance-log.md`).
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

fn main() -> ExitCode {
    // Before any tensor: CPU training steps reuse their freed buffers instead of re-mapping them.
    dml_backend::retain_freed_memory();
    quiet_default_device();
    quick_autotune();
    let cli = Cli::parse();
    if let Some(warning) = dml_kernels::conv::winograd_switch_warning() {
        eprintln!("warning: {warning}");
    }
    let result = match &cli.command {
        None => commands::train::run_train(&cli.train),
        Some(Command::Train(args)) => commands::train::run_train(args),
        Some(Command::Config(args)) => commands::train::run_config(args),
        Some(Command::Explain(command)) => commands::explain::run(command),
        Some(Command::Analyze(args)) => commands::analyze::run(args),
        Some(Command::Eval(args)) => commands::eval::run(args),
        Some(Command::Import(args)) => commands::import::run(args),
        Some(Command::Embed(args)) => commands::embed::run(args),
        Some(Command::Check(args)) => commands::check::run(args),
        Some(Command::Export(args)) => commands::export::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            if let Some(dml_train::TrainError::Interrupted { .. }) = e.downcast_ref::<dml_train::TrainError>() {
                eprintln!("{e:#}");
                return ExitCode::from(stop::STOPPED_STATUS);
            }
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
