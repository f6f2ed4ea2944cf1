//! `cargo xtask synth`: a procedurally rendered image set with known properties.
//!
//! The analogue of the rendered-cars set of Kobs et al. (ICCV 2021, Table 5): every
//! image shows one of ten shaded 3-D shapes, and every other factor of the image — the
//! object's rotation and colour, the background colour, the light direction and the
//! camera height — is drawn uniformly and independently of the shape and of each other.
//! The manifest lists each factor as a property column (the level index), so that
//! Normalized R-Precision can tell which factors an embedding clusters by. Since colour,
//! lighting and background carry no information about the class, the only class cue is
//! the shape: a model has to learn it.
//!
//! Classes 0–4 (sphere, cube, cylinder, cone, torus) form the `train` split and classes
//! 5–9 (octahedron, capsule, hexagonal prism, square pyramid, ellipsoid) the `test` split,
//! a zero-shot DML split.
//!
//! Output is a pure function of `(seed, n, size)`: each image's properties come from a
//! ChaCha8 stream keyed by the seed and the image index, so the images can be rendered
//! in parallel and still be byte-identical from run to run.

mod render;
mod scene;
mod shapes;
mod vec3;

use std::path::PathBuf;

use anyhow::{Context, bail};
use dml_data::{Manifest, Record, Split};
use image::ImageEncoder;
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

pub use render::render;
pub use scene::{ColourLevels, PROPERTIES, Property, SceneParams, hsv_to_rgb, property_names};
pub use shapes::Shape;

use crate::prepare::Staging;

/// Default output directory.
pub const DEFAULT_OUT: &str = "data/synth";
/// Default number of images.
pub const DEFAULT_N: usize = 2000;
/// Default image side in pixels.
pub const DEFAULT_SIZE: u32 = 64;
/// Smallest accepted image side: below it the shapes are a handful of pixels.
pub const MIN_SIZE: u32 = 16;
/// Largest accepted image side, which keeps a typo from rendering for hours.
pub const MAX_SIZE: u32 = 2048;
/// Number of classes of the training split (the first class ids); the rest are test.
pub const TRAIN_CLASSES: usize = 5;
/// Every class needs two images for a positive pair in its split.
pub const MIN_IMAGES_PER_CLASS: usize = 2;

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

/// Stream tags that keep the class shuffle and the per-image draws independent even
/// though both are keyed by the same seed.
const CLASS_STREAM: u64 = 1;
const IMAGE_STREAM: u64 = 2;

/// A ChaCha8 generator keyed by the seed, a stream tag and an index. ChaCha is a
/// pseudo-random function of its key, so distinct keys give independent streams.
fn keyed_rng(seed: u64, stream: u64, index: u64) -> ChaCha8Rng {
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    key[8..16].copy_from_slice(&stream.to_le_bytes());
    key[16..24].copy_from_slice(&index.to_le_bytes());
    ChaCha8Rng::from_seed(key)
}

/// Checks the arguments before anything is written.
fn check_args(args: &SynthArgs) -> anyhow::Result<()> {
    let min_n = Shape::ALL.len() * MIN_IMAGES_PER_CLASS;
    if args.n < min_n {
        bail!(
            "--n {}: need at least {min_n} images ({MIN_IMAGES_PER_CLASS} per class for each of the {} classes), \
             since every class needs a positive pair in its split",
            args.n,
            Shape::ALL.len()
        );
    }
    if u32::try_from(args.n).is_err() {
        bail!("--n {} is too large (at most {})", args.n, u32::MAX);
    }
    if !(MIN_SIZE..=MAX_SIZE).contains(&args.size) {
        bail!("--size {} is out of range ({MIN_SIZE}..={MAX_SIZE} pixels)", args.size);
    }
    Ok(())
}

/// The parameters of every image of a dataset, in image order.
///
/// The classes are balanced: a seeded shuffle of `0, 1, …, 9, 0, 1, …` assigns `n / 10`
/// or `n / 10 + 1` images to every class, so each image's class is still uniform over the
/// ten shapes and independent of everything else, while no class can come out with fewer
/// than two images. Every other property is drawn independently and uniformly from the
/// image's own stream.
pub fn plan(seed: u64, n: usize) -> Vec<SceneParams> {
    let classes = Shape::ALL.len();
    let mut class_of: Vec<usize> = (0..n).map(|i| i % classes).collect();
    class_of.shuffle(&mut keyed_rng(seed, CLASS_STREAM, 0));
    class_of
        .iter()
        .enumerate()
        .map(|(i, &class)| SceneParams::sample(Shape::ALL[class], &mut keyed_rng(seed, IMAGE_STREAM, i as u64)))
        .collect()
}

/// The manifest-relative path of image `index`.
fn image_path(index: usize) -> String {
    format!("images/{index:06}.png")
}

/// Renders the dataset into `args.out` and returns its manifest.
///
/// Everything is written into a staging directory that is moved into place only after
/// every image was written and the manifest validated, so a failure leaves no output.
pub fn run(args: &SynthArgs) -> anyhow::Result<Manifest> {
    check_args(args)?;
    let staging = Staging::new(&args.out, args.force)?;
    let images = staging.dir().join("images");
    std::fs::create_dir_all(&images).with_context(|| format!("cannot create {}", images.display()))?;

    let params = plan(args.seed, args.n);
    params
        .par_iter()
        .enumerate()
        .try_for_each(|(i, p)| -> anyhow::Result<()> {
            let image = render(p, args.size);
            let mut png = Vec::new();
            image::codecs::png::PngEncoder::new(&mut png)
                .write_image(image.as_raw(), args.size, args.size, image::ExtendedColorType::Rgb8)
                .with_context(|| format!("cannot encode image {i}"))?;
            let path = staging.dir().join(image_path(i));
            std::fs::write(&path, png).with_context(|| format!("cannot write {}", path.display()))
        })?;

    let mut manifest = Manifest::new(staging.dir(), property_names());
    manifest.records = params
        .iter()
        .enumerate()
        .map(|(i, p)| Record {
            path: image_path(i),
            class_id: p.shape.class_id(),
            class_name: p.shape.name().to_string(),
            split: if (p.shape.class_id() as usize) < TRAIN_CLASSES {
                Split::Train
            } else {
                Split::Test
            },
            properties: p.levels().iter().map(u32::to_string).collect(),
        })
        .collect();
    staging.commit(manifest)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Balancing must hold for any n, and the plan must be a pure function of the seed.
    #[test]
    fn plan_is_balanced_and_deterministic() {
        let a = plan(7, 53);
        assert_eq!(a, plan(7, 53));
        assert_ne!(a, plan(8, 53));
        let mut counts = [0usize; 10];
        for p in &a {
            counts[p.shape.class_id() as usize] += 1;
        }
        assert!(counts.iter().all(|&c| c == 5 || c == 6), "{counts:?}");
    }
}
