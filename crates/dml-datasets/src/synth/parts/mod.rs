//! A fine-grained rendered set whose renderer knows *why* two images differ (`cargo xtask synth
//! --parts`, and the `synth-parts` dataset a training run generates on first use).
//!
//! Every image shows one object assembled from a body and four part slots ([`Slot`]: a crest, a
//! front piece, a pair of side pieces, a tail), each empty or filled with one of four
//! interchangeable part types ([`PartType`]: cone, ball, plate, ring) — as FunnyBirds (Hesse et
//! al., ICCV 2023) assembles birds from beaks, wings and tails. A class is a combination of
//! part types ([`class_table`]): 128 classes drawn as sibling pairs that differ in one slot, the
//! first 64 the `train` split and the last 64 the `test` split, so retrieval on the test split
//! is zero-shot over new combinations of known parts.
//!
//! Everything else is drawn uniformly and independently of the class ([`PartsParams`]): yaw,
//! tilt, scale, the place of the object in the frame (it is not always centred, so a centre
//! prior does not find it), body, part and background colours, the light, and 0–2 distractors:
//! loose parts of the same vocabulary lying on the ground, belonging to no object. Each is a
//! property column of the manifest, followed by one column per slot (its type's level) and the
//! invisible `control` ([`property_names`]).
//!
//! Every image gets a part mask `masks/<index>.png` ([`labels`]: background, distractor, body
//! and each slot its own value), whose object view the shapes set's mask readers get
//! ([`read_mask`](super::read_mask)). [`render_counterfactual`] renders any image again with one
//! slot removed or its type swapped, everything else unchanged.
//!
//! Output is a pure function of [`PartsConfig`], as for the shapes set: the same settings give
//! the same bytes.

mod classes;
mod counterfactual;
mod geometry;
pub mod labels;
mod scene;
mod vocabulary;

use std::path::Path;

use dml_data::Manifest;
use image::{GrayImage, RgbImage};

pub use classes::{CLASSES, Combination, TRAIN_CLASSES, class_name, class_table, neighbours};
pub use counterfactual::Edit;
pub use scene::{CONTROL, DISTRACTOR_SPOTS, Distractor, PROPERTIES, PartsParams, property_names};
pub use vocabulary::{PartType, Slot};

use super::files::{Entry, write_set};
use super::keyed::{balanced_classes, keyed_rng};
use super::settings::check_settings;
use super::tracer::Tracer;
use crate::error::{DatasetError, Result};
use geometry::PartsGeometry;
use labels::LABEL_BACKGROUND;

/// Default number of images: about 31 per class.
pub const DEFAULT_N: usize = 4000;
/// Smallest accepted image side: below it a part is under four pixels across.
pub const MIN_SIZE: u32 = 48;
/// Largest accepted image side, which keeps a typo from rendering for hours.
pub const MAX_SIZE: u32 = super::MAX_SIZE;
/// Every class needs two images for a positive pair in its split.
pub const MIN_IMAGES_PER_CLASS: usize = 2;

/// Stream tags of the class shuffle, the visible draws and the control (see
/// [`keyed_rng`]); distinct from the shapes set's so that the two sets of one seed share no
/// draw.
const CLASS_STREAM: u64 = 11;
const IMAGE_STREAM: u64 = 12;
const CONTROL_STREAM: u64 = 13;

/// What determines a parts set: the same configuration renders the same bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartsConfig {
    /// Number of images, at least [`MIN_IMAGES_PER_CLASS`] per class.
    pub n: usize,
    /// Random seed of the class assignment and of every image's properties.
    pub seed: u64,
    /// Image side in pixels, in `MIN_SIZE..=MAX_SIZE`.
    pub size: u32,
}

impl Default for PartsConfig {
    /// [`DEFAULT_N`] images of 64 pixels with seed 0.
    fn default() -> Self {
        Self {
            n: DEFAULT_N,
            seed: 0,
            size: super::DEFAULT_SIZE,
        }
    }
}

impl PartsConfig {
    /// Checks the settings before anything is written.
    pub fn validate(&self) -> Result<()> {
        let note = format!(": below {MIN_SIZE} the parts are too small to see");
        check_settings(
            self.n,
            self.size,
            CLASSES,
            MIN_IMAGES_PER_CLASS,
            MIN_SIZE..=MAX_SIZE,
            &note,
        )
    }

    /// The parameters of image `index`, or an error naming an index outside the set.
    pub fn image(&self, index: usize) -> Result<PartsParams> {
        self.validate()?;
        if index >= self.n {
            return Err(DatasetError::InvalidSetting {
                setting: "index",
                value: index.to_string(),
                reason: format!("outside the set of {} images (0..{})", self.n, self.n),
            });
        }
        // The class shuffle is a permutation of the whole set; the other draws are the
        // image's own, so only its own are made.
        let class = balanced_classes(self.seed, CLASS_STREAM, self.n, CLASSES)[index];
        Ok(sample(self.seed, index, class))
    }
}

/// The parameters of every image of a set, in image order: a seeded shuffle of balanced class
/// ids (`n / 128` or one more per class), every other property from the image's own stream.
pub fn plan(seed: u64, n: usize) -> Vec<PartsParams> {
    balanced_classes(seed, CLASS_STREAM, n, CLASSES)
        .iter()
        .enumerate()
        .map(|(i, &class)| sample(seed, i, class))
        .collect()
}

/// The parameters of image `index` of class `class`, from the image's own streams.
fn sample(seed: u64, index: usize, class: usize) -> PartsParams {
    PartsParams::sample(
        class,
        &mut keyed_rng(seed, IMAGE_STREAM, index as u64),
        &mut keyed_rng(seed, CONTROL_STREAM, index as u64),
    )
}

/// Renders one square RGB image of `size`×`size` pixels and its part mask ([`labels`]).
pub fn render(params: &PartsParams, size: u32) -> (RgbImage, GrayImage) {
    let (geometry, view) = PartsGeometry::new(params);
    Tracer {
        geometry: &geometry,
        view: &view,
    }
    .render(size, LABEL_BACKGROUND)
}

/// Image `index` of the set of `config` rendered with `edit` applied, and its part mask; an
/// index outside the set is an error naming it.
pub fn render_counterfactual(config: &PartsConfig, index: usize, edit: Edit) -> Result<(RgbImage, GrayImage)> {
    Ok(render(&edit.apply(&config.image(index)?), config.size))
}

/// Renders the set of `config` into `out` and returns its manifest. An existing `out` is
/// replaced when `force` is true and refused otherwise.
///
/// Writes `out/manifest.csv`, the images `out/images/<index>.png` and their part masks
/// `out/masks/<index>.png`, all through a staging directory moved into place only when every
/// file was written and the manifest validated, so a failure leaves no output.
pub fn generate(config: &PartsConfig, out: &Path, force: bool) -> Result<Manifest> {
    config.validate()?;
    let params = plan(config.seed, config.n);
    let table = class_table();
    write_set(
        out,
        force,
        &params,
        property_names(),
        |p| render(p, config.size),
        |p| Entry {
            class_id: p.class as u32,
            class_name: class_name(&table[p.class]),
            train: p.class < TRAIN_CLASSES,
            levels: p.levels(),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::labels::{LABEL_DISTRACTOR, SLOT_LABELS, is_object};
    use super::*;

    /// The object must never leave the frame (a part cut off would change what the image
    /// shows of its class), and it must not always sit in the same place (a centre prior must
    /// not find it): its mask's centre moves by a sizeable part of the frame.
    #[test]
    fn object_stays_in_frame_and_moves_around() {
        let size = 48;
        let mut centres = Vec::new();
        // Closest approach to the left, top, right and bottom border.
        let mut margins = [u32::MAX; 4];
        for p in plan(1, 400) {
            let (_, labels) = render(&p, size);
            let (mut sx, mut sy, mut count) = (0.0, 0.0, 0.0);
            for (x, y, l) in labels.enumerate_pixels() {
                if is_object(l.0[0]) {
                    for (m, d) in margins.iter_mut().zip([x, y, size - 1 - x, size - 1 - y]) {
                        *m = (*m).min(d);
                    }
                    sx += x as f64;
                    sy += y as f64;
                    count += 1.0;
                }
            }
            assert!(count > 0.0, "{:?}: no object pixel", p.parts);
            centres.push((sx / count, sy / count));
        }
        assert!(
            margins.iter().all(|&m| m >= 1),
            "an object touches the border (left, top, right, bottom margins {margins:?} px)"
        );
        let spread = |f: fn(&(f64, f64)) -> f64| {
            let (lo, hi) = centres
                .iter()
                .map(f)
                .fold((f64::MAX, f64::MIN), |(a, b), v| (a.min(v), b.max(v)));
            (hi - lo) / size as f64
        };
        assert!(spread(|c| c.0) > 0.25, "horizontal spread {}", spread(|c| c.0));
        assert!(spread(|c| c.1) > 0.15, "vertical spread {}", spread(|c| c.1));
        eprintln!("margins {margins:?}, spread {} {}", spread(|c| c.0), spread(|c| c.1));
    }

    /// Every filled slot shows up in the part mask (parts are visible at the smallest size),
    /// and so do distractors.
    #[test]
    fn filled_slots_and_distractors_are_visible() {
        let mut seen = [0usize; 4];
        let mut filled = [0usize; 4];
        let (mut distractor_images, mut distractor_seen) = (0, 0);
        for p in plan(2, 300) {
            let (_, labels) = render(&p, MIN_SIZE);
            for slot in Slot::ALL {
                if p.parts[slot.index()] != PartType::None {
                    filled[slot.index()] += 1;
                    let px = labels.pixels().filter(|l| l.0[0] == SLOT_LABELS[slot.index()]).count();
                    seen[slot.index()] += usize::from(px >= 4);
                } else {
                    assert!(labels.pixels().all(|l| l.0[0] != SLOT_LABELS[slot.index()]));
                }
            }
            if !p.distractors.is_empty() {
                distractor_images += 1;
                distractor_seen += usize::from(labels.pixels().any(|l| l.0[0] == LABEL_DISTRACTOR));
            }
        }
        for slot in Slot::ALL {
            let (s, f) = (seen[slot.index()], filled[slot.index()]);
            // A side piece can hide behind the body in a few poses; the others hardly ever.
            assert!(s as f64 >= 0.9 * f as f64, "{slot}: visible in {s} of {f} images");
            eprintln!("{slot}: visible in {s} of {f}");
        }
        assert!(distractor_seen as f64 >= 0.9 * distractor_images as f64);
    }
}
