//! `cargo xtask synth`: the command line of the synthetic property set, whose renderer
//! lives in [`dml_datasets::synth`] (so that a training run can generate the set on first
//! use without linking this tool).

use std::path::PathBuf;

use dml_data::Manifest;

pub use dml_datasets::synth::{
    ColourLevels, DEFAULT_N, DEFAULT_SIZE, MASK_BACKGROUND, MASK_OBJECT, MASKS_DIR, MAX_SIZE, MIN_IMAGES_PER_CLASS,
    MIN_SIZE, PROPERTIES, Property, SceneParams, Shape, SynthConfig, TRAIN_CLASSES, hsv_to_rgb, mask_path, plan,
    property_names, read_mask, render, render_with_mask,
};

/// Default output directory.
pub const DEFAULT_OUT: &str = "data/synth";

/// Arguments of `cargo xtask synth`.
#[derive(Debug, Clone, clap::Args)]
pub struct SynthArgs {
    /// Output directory.
    #[arg(long, default_value = DEFAULT_OUT)]
    pub out: PathBuf,
    /// Number of images.
    #[arg(long, default_value_t = DEFAULT_N)]
    pub n: usize,
    /// Random seed; the same seed gives byte-identical output.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Image side in pixels.
    #[arg(long, default_value_t = DEFAULT_SIZE)]
    pub size: u32,
    /// Replace an existing output directory.
    #[arg(long)]
    pub force: bool,
}

impl Default for SynthArgs {
    /// The arguments of `cargo xtask synth` without flags.
    fn default() -> Self {
        Self {
            out: PathBuf::from(DEFAULT_OUT),
            n: DEFAULT_N,
            seed: 0,
            size: DEFAULT_SIZE,
            force: false,
        }
    }
}

impl SynthArgs {
    /// The dataset these arguments describe (everything but where it goes).
    pub fn config(&self) -> SynthConfig {
        SynthConfig {
            n: self.n,
            seed: self.seed,
            size: self.size,
        }
    }
}

/// Renders the dataset (manifest, images and their object masks) into `args.out` and
/// returns its manifest (see [`dml_datasets::synth::generate`]).
pub fn run(args: &SynthArgs) -> anyhow::Result<Manifest> {
    Ok(dml_datasets::synth::generate(&args.config(), &args.out, args.force)?)
}
