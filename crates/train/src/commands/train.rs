//! `train [train] …` and `train config …`: resolving a run's configuration from the command line,
//! training it and printing its summary.

use std::path::PathBuf;

use clap::Args;
use dml_train::{RunOptions, Shortcuts, TrainConfig};

use crate::terminal::{Terminal, wall_time};

/// What a run is: the configuration layers (the embedded default, a TOML file, the shortcut flags
/// and `--set` overrides), shared by training and `config`.
#[derive(Debug, Clone, Args)]
pub struct ConfigArgs {
    /// A TOML file overriding the embedded default key by key.
    #[arg(long, short)]
    pub config: Option<PathBuf>,
    /// Override any key: `--set loss.margin=0.1 --set miner=none` (`miner=NAME` is shorthand for
    /// that miner with its default parameters).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
    /// flex (CPU, default) | ndarray | wgpu | wgpu:cpu | wgpu:discrete[:N] | wgpu:integrated[:N] |
    /// cuda[:N] (a build with --features cuda).
    #[arg(long)]
    pub device: Option<String>,
    /// synth | synth-parts | fashion-mnist | the name of a set prepared under data.root (e.g. cub200 after
    /// `cargo xtask prepare cub200`) | path/to/manifest.csv.
    #[arg(long)]
    pub dataset: Option<String>,
    /// small_cnn | resnet18 | resnet50 | bn_inception.
    #[arg(long)]
    pub backbone: Option<String>,
    /// The loss by name; its parameters reset to their defaults and, unless a miner is given, the
    /// miner to the loss's paper default (margin: distance_weighted, triplet_margin: semihard
    /// triplet_margin, multi_similarity and gml_ms: multi_similarity, every other loss: none).
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(dml_train::config::loss_names()))]
    pub loss: Option<String>,
    /// The miner by name with its default parameters, or none: triplet_margin | batch_hard |
    /// multi_similarity | pair_margin | distance_weighted | random_triplets | none.
    #[arg(long)]
    pub miner: Option<String>,
    /// Training epochs.
    #[arg(long)]
    pub epochs: Option<usize>,
    /// Images per batch.
    #[arg(long)]
    pub batch_size: Option<usize>,
    /// Seed of every random choice.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Run name (directory under run_dir).
    #[arg(long)]
    pub name: Option<String>,
    /// Parent directory of runs.
    #[arg(long)]
    pub run_dir: Option<PathBuf>,
}

#[derive(Debug, Clone, Args)]
pub struct TrainArgs {
    #[command(flatten)]
    pub run: ConfigArgs,
    /// Continue the run from its latest checkpoint, as its saved config.toml configured it (only
    /// --epochs may grow; any other change is refused).
    #[arg(long)]
    pub resume: bool,
    /// No progress bars.
    #[arg(long)]
    pub quiet: bool,
    /// Stop after N completed epochs (resume later with --resume).
    #[arg(long, value_name = "N")]
    pub stop_after: Option<usize>,
}

/// The configuration of a run from the command line: a resumed run's saved `config.toml` is the
/// base the command line's settings are checked against (not the embedded default), a new run
/// starts from the embedded default.
pub fn resolve(args: &ConfigArgs, resume: bool) -> anyhow::Result<TrainConfig> {
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

/// Trains (or resumes) the run the flags describe and prints its summary.
pub fn run_train(args: &TrainArgs) -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    let config = resolve(&args.run, args.resume)?;
    println!("{}", config.loss_and_miner());
    let options = RunOptions {
        resume: args.resume,
        stop_after_epochs: args.stop_after,
        stop: Some(crate::stop::install()),
    };
    let summary = match dml_train::train(&config, &options, &Terminal { bars: !args.quiet }) {
        Err(e @ dml_train::TrainError::Interrupted { .. }) => {
            eprintln!(
                "resume with: train --resume --name {} --run-dir {}",
                config.name,
                config.run_dir.display()
            );
            return Err(e.into());
        }
        other => other?,
    };
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
    println!("wall time: {}", wall_time(started.elapsed()));
    Ok(())
}

/// Prints the resolved configuration (default + file + overrides).
pub fn run_config(args: &ConfigArgs) -> anyhow::Result<()> {
    print!("{}", resolve(args, false)?.to_toml()?);
    Ok(())
}
