//! A procedurally rendered image set with known properties (`cargo xtask synth`, and the
//! `synth` dataset a training run generates on first use).
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
//! One more column, `control` (levels `0..8`), is a negative control for property
//! analyses: it is drawn uniformly and independently like the others but changes no
//! pixel, since the renderer never reads it, so its NR-Precision on any embedding must be
//! ≈ 0. It comes from a ChaCha8 stream of its own (keyed by the seed, the image index and
//! a tag no other draw uses), which left every other property, image and mask exactly as
//! they were before the column existed.
//!
//! Classes 0–4 (sphere, cube, cylinder, cone, torus) form the `train` split and classes
//! 5–9 (octahedron, capsule, hexagonal prism, square pyramid, ellipsoid) the `test` split,
//! a zero-shot DML split.
//!
//! Besides `manifest.csv` and `images/<index>.png`, every image gets its object mask
//! `masks/<index>.png` (see [`mask_path`]): 8-bit grayscale of the image's size, 255 where
//! the primary ray through the pixel centre hits the object and 0 on the ground, the sky
//! and shadows ([`render_with_mask`]). Masks are written into the same staging directory
//! as the images, so a set on disk has all of them or, if it predates masks, none;
//! [`read_mask`] then names the missing file and says to regenerate the set.
//!
//! Output is a pure function of [`SynthConfig`] (`seed`, `n`, `size`): each image's
//! properties come from a ChaCha8 stream keyed by the seed and the image index, so the
//! images can be rendered in parallel and still be byte-identical from run to run.

mod files;
mod gray;
mod keyed;
mod masks;
pub mod parts;
mod render;
mod scene;
mod settings;
mod shapes;
mod tracer;
mod vec3;

use std::path::Path;

use dml_data::Manifest;

use files::{Entry, write_set};
use keyed::{balanced_classes, keyed_rng};
use settings::check_settings;

pub use masks::{IMAGES_DIR, MASKS_DIR, mask_path, read_mask};
pub use render::{MASK_BACKGROUND, MASK_OBJECT, render, render_with_mask};
pub use scene::{
    CONTROL_LEVELS, ColourLevels, PROPERTIES, Property, SceneParams, TILT_DEGREES, hsv_to_rgb, property_names,
};
pub use shapes::Shape;

use crate::error::Result;

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

/// What determines a synthetic set: the same configuration renders the same bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SynthConfig {
    /// Number of images, at least two per class.
    pub n: usize,
    /// Random seed of the class assignment and of every image's properties.
    pub seed: u64,
    /// Image side in pixels, in `MIN_SIZE..=MAX_SIZE`.
    pub size: u32,
}

impl Default for SynthConfig {
    /// [`DEFAULT_N`] images of [`DEFAULT_SIZE`] pixels with seed 0, the set of
    /// `cargo xtask synth` without flags.
    fn default() -> Self {
        Self {
            n: DEFAULT_N,
            seed: 0,
            size: DEFAULT_SIZE,
        }
    }
}

impl SynthConfig {
    /// Checks the settings before anything is written.
    pub fn validate(&self) -> Result<()> {
        check_settings(
            self.n,
            self.size,
            Shape::ALL.len(),
            MIN_IMAGES_PER_CLASS,
            MIN_SIZE..=MAX_SIZE,
            "",
        )
    }
}

/// Stream tags that keep the class shuffle, the per-image draws of the visible
/// properties and the per-image draw of the invisible control independent even though
/// all are keyed by the same seed. The control has a tag of its own (rather than a later
/// draw from the image's stream) so that a new column cannot shift any existing draw.
const CLASS_STREAM: u64 = 1;
const IMAGE_STREAM: u64 = 2;
const CONTROL_STREAM: u64 = 3;

/// The parameters of every image of a dataset, in image order.
///
/// The classes are balanced: a seeded shuffle of `0, 1, …, 9, 0, 1, …` assigns `n / 10`
/// or `n / 10 + 1` images to every class, so each image's class is still uniform over the
/// ten shapes and independent of everything else, while no class can come out with fewer
/// than two images. Every visible property is drawn independently and uniformly from the
/// image's own stream, and the control from a second stream of the image's own.
pub fn plan(seed: u64, n: usize) -> Vec<SceneParams> {
    balanced_classes(seed, CLASS_STREAM, n, Shape::ALL.len())
        .iter()
        .enumerate()
        .map(|(i, &class)| {
            SceneParams::sample(
                Shape::ALL[class],
                &mut keyed_rng(seed, IMAGE_STREAM, i as u64),
                &mut keyed_rng(seed, CONTROL_STREAM, i as u64),
            )
        })
        .collect()
}

/// Renders the set of `config` into `out` and returns its manifest. An existing `out` is
/// replaced when `force` is true and refused otherwise.
///
/// Writes `out/manifest.csv`, the images `out/images/<index>.png` (the manifest's record
/// paths) and their object masks `out/masks/<index>.png` ([`mask_path`],
/// [`render_with_mask`]). Everything is written into a staging directory that is moved
/// into place only after every image and every mask was written and the manifest
/// validated, so a failure leaves no output.
pub fn generate(config: &SynthConfig, out: &Path, force: bool) -> Result<Manifest> {
    config.validate()?;
    let params = plan(config.seed, config.n);
    write_set(
        out,
        force,
        &params,
        property_names(),
        |p| render_with_mask(p, config.size),
        |p| Entry {
            class_id: p.shape.class_id(),
            class_name: p.shape.name().to_string(),
            train: (p.shape.class_id() as usize) < TRAIN_CLASSES,
            levels: p.levels().to_vec(),
        },
    )
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

    /// The control must come from its own keyed stream: drawn from the image's stream it
    /// would either shift the visible draws (and change every image) or, as a first draw,
    /// repeat the rotation.
    #[test]
    fn control_comes_from_its_own_stream() {
        use rand::Rng;
        let (seed, n) = (5, 64);
        for (i, p) in plan(seed, n).iter().enumerate() {
            let expected = keyed_rng(seed, CONTROL_STREAM, i as u64).random_range(0..CONTROL_LEVELS);
            assert_eq!(p.control, expected, "image {i}");
        }
    }

    #[test]
    fn settings_out_of_range_are_named() {
        let too_few = SynthConfig {
            n: 3,
            ..SynthConfig::default()
        };
        let e = too_few.validate().unwrap_err().to_string();
        assert!(e.starts_with("n = 3:") && e.contains("need at least 20 images"), "{e}");
        let tiny = SynthConfig {
            size: 4,
            ..SynthConfig::default()
        };
        let e = tiny.validate().unwrap_err().to_string();
        assert!(e.starts_with("size = 4:") && e.contains("16..=2048"), "{e}");
        SynthConfig::default().validate().unwrap();
    }
}
