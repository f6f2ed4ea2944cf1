//! Dataset tooling behind `cargo xtask`.
//!
//! Every command writes into a staging directory next to its output and renames it into
//! place only when everything succeeded, so an interrupted or failed run never leaves a
//! half-written dataset behind.
#![warn(missing_docs)]

pub mod fetch_weights;
pub mod prepare;
pub mod synth;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Command line of `cargo xtask`.
#[derive(Debug, Parser)]
#[command(name = "xtask", about = "Dataset preparation and generation for the dml workspace")]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The xtask subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Convert an official dataset archive into `<out>/manifest.csv` + `<out>/images/`.
    Prepare(PrepareArgs),
    /// Render the synthetic property set (Kobs et al. Table 5 analogue).
    Synth(synth::SynthArgs),
    /// Validate an existing `manifest.csv` (e.g. a dataset you assembled yourself).
    Check(CheckArgs),
    /// Download torchvision's ImageNet weights (pinned URL and SHA-256) into `weights/`.
    FetchWeights(fetch_weights::FetchArgs),
}

/// Arguments of `cargo xtask check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The manifest to validate: every line's syntax, every listed file's existence,
    /// duplicate paths, class names, splits disjoint by class, ≥ 2 images per class.
    pub manifest: PathBuf,
    /// Also decode every image (in parallel), as training would.
    #[arg(long)]
    pub decode: bool,
}

/// Arguments of `cargo xtask prepare`.
#[derive(Debug, Args)]
pub struct PrepareArgs {
    /// Which dataset.
    #[command(subcommand)]
    pub dataset: prepare::Dataset,
    /// Options shared by every dataset.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// Options shared by every `prepare` subcommand.
#[derive(Debug, Clone, Args)]
pub struct CommonArgs {
    /// Output directory (default: `data/<dataset>`).
    #[arg(long, global = true)]
    pub out: Option<PathBuf>,
    /// Hold out the last N training classes as the `val` split for model selection.
    #[arg(long, global = true, default_value_t = 0)]
    pub val_classes: usize,
    /// Replace an existing output directory.
    #[arg(long, global = true)]
    pub force: bool,
    /// Skip the check of the official image counts (for subsets and test archives).
    #[arg(long, global = true)]
    pub no_verify_counts: bool,
}

/// "train 35000, test 35000": the images per split, for the commands' reports.
fn split_summary(manifest: &dml_data::Manifest) -> String {
    let counts: Vec<String> = manifest
        .split_counts()
        .iter()
        .map(|(split, n)| format!("{split} {n}"))
        .collect();
    counts.join(", ")
}

/// Runs one parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Prepare(args) => {
            let manifest = prepare::run(&args.dataset, &args.common)?;
            println!(
                "wrote {} ({} images: {})",
                manifest.root.join("manifest.csv").display(),
                manifest.records.len(),
                split_summary(&manifest)
            );
            Ok(())
        }
        Command::Check(args) => {
            let manifest = dml_data::Manifest::read(&args.manifest)?;
            if args.decode {
                prepare::verify_images(&manifest)?;
            }
            println!(
                "{} is valid ({} images{}: {})",
                args.manifest.display(),
                manifest.records.len(),
                if args.decode { ", all decoded" } else { "" },
                split_summary(&manifest)
            );
            Ok(())
        }
        Command::FetchWeights(args) => {
            let path = fetch_weights::run(&args)?;
            println!(
                "{} verified (SHA-256 {})",
                path.display(),
                fetch_weights::pinned(&args.model)?.sha256
            );
            Ok(())
        }
        Command::Synth(args) => {
            let manifest = synth::run(&args)?;
            println!(
                "wrote {} ({} images)",
                manifest.root.join("manifest.csv").display(),
                manifest.records.len()
            );
            Ok(())
        }
    }
}
