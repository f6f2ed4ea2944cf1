//! `cargo xtask synth`: the command line of the rendered sets, whose renderers live in
//! [`dml_datasets::synth`] (the shapes set) and [`dml_datasets::synth::parts`] (the parts set,
//! `--parts`), so that a training run can generate them on first use without linking this tool.

use std::path::{Path, PathBuf};

use anyhow::Context;
use dml_data::Manifest;
use dml_datasets::synth::parts::{Edit, PartsConfig};

pub use dml_datasets::synth::{
    ColourLevels, DEFAULT_N, DEFAULT_SIZE, MASK_BACKGROUND, MASK_OBJECT, MASKS_DIR, MAX_SIZE, MIN_IMAGES_PER_CLASS,
    MIN_SIZE, PROPERTIES, Property, SceneParams, Shape, SynthConfig, TRAIN_CLASSES, hsv_to_rgb, mask_path, plan,
    property_names, read_mask, render, render_with_mask,
};

/// Default output directory of the shapes set.
pub const DEFAULT_OUT: &str = "data/synth";
/// Default output directory of the parts set.
pub const DEFAULT_PARTS_OUT: &str = "data/synth-parts";

/// Arguments of `cargo xtask synth`.
#[derive(Debug, Clone, clap::Args)]
pub struct SynthArgs {
    /// Output directory (default data/synth, or data/synth-parts with --parts); with
    /// --counterfactual, the PNG file to write.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Number of images (default 2000, or 4000 with --parts).
    #[arg(long)]
    pub n: Option<usize>,
    /// Random seed; the same seed gives byte-identical output.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Image side in pixels.
    #[arg(long, default_value_t = DEFAULT_SIZE)]
    pub size: u32,
    /// Replace an existing output directory (or file).
    #[arg(long)]
    pub force: bool,
    /// Render the fine-grained parts set: objects assembled from a body and four part slots,
    /// 128 classes, with part masks.
    #[arg(long)]
    pub parts: bool,
    /// Render image INDEX of the parts set (the one --n, --seed and --size describe) again with
    /// one slot changed (--remove or --swap), into the PNG file --out.
    #[arg(long, value_name = "INDEX", requires = "parts")]
    pub counterfactual: Option<usize>,
    /// With --counterfactual: empty this slot (crest, front, sides, tail).
    #[arg(long, value_name = "SLOT", requires = "counterfactual", conflicts_with = "swap")]
    pub remove: Option<String>,
    /// With --counterfactual: give this slot another part type (none, cone, ball, plate, ring).
    #[arg(long, value_name = "SLOT=TYPE", requires = "counterfactual")]
    pub swap: Option<String>,
    /// Write the docs' figure of the parts set (sibling classes, a part mask, each slot
    /// removed) to this PNG file instead of rendering the set.
    #[arg(long, value_name = "FILE.png", requires = "parts", conflicts_with = "counterfactual")]
    pub figure: Option<PathBuf>,
}

impl Default for SynthArgs {
    /// The arguments of `cargo xtask synth` without flags.
    fn default() -> Self {
        Self {
            out: None,
            n: None,
            seed: 0,
            size: DEFAULT_SIZE,
            force: false,
            parts: false,
            counterfactual: None,
            remove: None,
            swap: None,
            figure: None,
        }
    }
}

/// What `cargo xtask synth` wrote.
#[derive(Debug)]
pub enum Written {
    /// A set: its manifest.
    Set(Manifest),
    /// A counterfactual render: the file and the edit.
    Counterfactual(PathBuf, Edit),
    /// The docs' figure: the file.
    Figure(PathBuf),
}

impl SynthArgs {
    /// The shapes set these arguments describe (everything but where it goes).
    pub fn config(&self) -> SynthConfig {
        SynthConfig {
            n: self.n.unwrap_or(DEFAULT_N),
            seed: self.seed,
            size: self.size,
        }
    }

    /// The parts set these arguments describe.
    pub fn parts_config(&self) -> PartsConfig {
        PartsConfig {
            n: self.n.unwrap_or(dml_datasets::synth::parts::DEFAULT_N),
            seed: self.seed,
            size: self.size,
        }
    }

    /// The output path: `--out`, or the set's default directory.
    pub fn out(&self) -> PathBuf {
        self.out
            .clone()
            .unwrap_or_else(|| PathBuf::from(if self.parts { DEFAULT_PARTS_OUT } else { DEFAULT_OUT }))
    }
}

/// Renders the set the arguments describe (manifest, images and masks) into `args.out()`, or,
/// with `--counterfactual`, one edited image into the file `--out`.
pub fn run(args: &SynthArgs) -> anyhow::Result<Written> {
    if let Some(index) = args.counterfactual {
        return counterfactual(args, index);
    }
    if let Some(path) = &args.figure {
        check_png_out(path, args.force)?;
        write_atomically(path, &crate::synth_figure::figure(&args.parts_config())?)?;
        return Ok(Written::Figure(path.clone()));
    }
    let out = args.out();
    let manifest = if args.parts {
        dml_datasets::synth::parts::generate(&args.parts_config(), &out, args.force)?
    } else {
        dml_datasets::synth::generate(&args.config(), &out, args.force)?
    };
    Ok(Written::Set(manifest))
}

/// `--counterfactual INDEX --remove SLOT | --swap SLOT=TYPE --out FILE.png`.
fn counterfactual(args: &SynthArgs, index: usize) -> anyhow::Result<Written> {
    let edit = match (&args.remove, &args.swap) {
        (Some(slot), None) => Edit::parse_remove(slot)?,
        (None, Some(swap)) => Edit::parse_swap(swap)?,
        _ => anyhow::bail!("--counterfactual needs --remove SLOT or --swap SLOT=TYPE"),
    };
    let Some(out) = &args.out else {
        anyhow::bail!("--counterfactual needs --out FILE.png");
    };
    check_png_out(out, args.force)?;
    let (image, _) = dml_datasets::synth::parts::render_counterfactual(&args.parts_config(), index, edit)?;
    write_atomically(out, &image)?;
    Ok(Written::Counterfactual(out.clone(), edit))
}

/// Refuses an output file that is not a `.png`, or that exists without `--force`.
fn check_png_out(out: &Path, force: bool) -> anyhow::Result<()> {
    if out.extension().is_none_or(|e| !e.eq_ignore_ascii_case("png")) {
        anyhow::bail!("{}: the image is written as PNG; name a .png file", out.display());
    }
    if out.exists() && !force {
        anyhow::bail!("{} already exists (pass --force to replace it)", out.display());
    }
    Ok(())
}

/// Encodes `image` as PNG and writes it with [`dml_data::write_atomic`] (a temporary sibling
/// and a rename), so that `out` is either the whole new image or untouched.
fn write_atomically(out: &Path, image: &image::RgbImage) -> anyhow::Result<()> {
    if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
    }
    let mut png = std::io::Cursor::new(Vec::new());
    image
        .write_to(&mut png, image::ImageFormat::Png)
        .with_context(|| format!("cannot encode {}", out.display()))?;
    Ok(dml_data::write_atomic(out, png.get_ref())?)
}
