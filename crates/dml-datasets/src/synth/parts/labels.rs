//! The part mask of a parts image: which component of the scene every pixel centre sees.
//!
//! `masks/<index>.png` is an 8-bit grayscale PNG of the image's size holding one of these
//! values per pixel (spaced so that the file can be looked at as it is):
//!
//! | value | what the pixel centre sees |
//! |---|---|
//! | 0 | background: the ground, the sky, a shadow |
//! | 30 | a distractor: a loose part on the ground |
//! | 60 | the body |
//! | 100 | the crest |
//! | 140 | the front piece |
//! | 180 | a side piece |
//! | 220 | the tail |
//!
//! The object is the body and its attached parts (not the distractors); [`object_view`] turns a
//! part mask into the object mask of the shapes set (255 object, 0 everything else), which is
//! what [`read_mask`](crate::synth::read_mask) returns for a part mask, so every reader of
//! object masks works on the parts set unchanged.

use std::path::Path;

use image::GrayImage;

use super::vocabulary::Slot;
use crate::error::{DatasetError, Result};
use crate::synth::gray::read_gray;

/// Label of the ground, the sky and shadows.
pub const LABEL_BACKGROUND: u8 = 0;
/// Label of a loose part lying on the ground.
pub const LABEL_DISTRACTOR: u8 = 30;
/// Label of the body.
pub const LABEL_BODY: u8 = 60;
/// Labels of the slots, in [`Slot::ALL`] order.
pub const SLOT_LABELS: [u8; 4] = [100, 140, 180, 220];
/// Every label a part mask can hold.
pub const LABELS: [u8; 7] = [
    LABEL_BACKGROUND,
    LABEL_DISTRACTOR,
    LABEL_BODY,
    SLOT_LABELS[0],
    SLOT_LABELS[1],
    SLOT_LABELS[2],
    SLOT_LABELS[3],
];

/// The label of the parts in `slot`.
pub fn slot_label(slot: Slot) -> u8 {
    SLOT_LABELS[slot.index()]
}

/// Whether a label belongs to the object: its body or one of its attached parts.
pub fn is_object(label: u8) -> bool {
    label == LABEL_BODY || SLOT_LABELS.contains(&label)
}

/// The object mask of a part mask: 255 where [`is_object`], 0 elsewhere (background and
/// distractors).
pub fn object_view(labels: &GrayImage) -> GrayImage {
    let mut mask = labels.clone();
    for p in mask.pixels_mut() {
        p.0[0] = if is_object(p.0[0]) { 255 } else { 0 };
    }
    mask
}

/// The mask of one slot's parts: 255 where a pixel centre sees them, 0 elsewhere.
pub fn slot_view(labels: &GrayImage, slot: Slot) -> GrayImage {
    let mut mask = labels.clone();
    let label = slot_label(slot);
    for p in mask.pixels_mut() {
        p.0[0] = if p.0[0] == label { 255 } else { 0 };
    }
    mask
}

/// Reads the part mask at `path` ([`mask_path`](crate::synth::mask_path) of an image of the
/// parts set). A missing file, a file that is not an 8-bit grayscale PNG, or one holding a value
/// outside [`LABELS`] (an object mask of the shapes set, say) is an error naming the file.
pub fn read_part_mask(path: impl AsRef<Path>) -> Result<GrayImage> {
    let path = path.as_ref();
    let mask = read_gray(path)?;
    if let Some((x, y, p)) = mask.enumerate_pixels().find(|(_, _, p)| !LABELS.contains(&p.0[0])) {
        return Err(DatasetError::Malformed {
            path: path.to_path_buf(),
            message: format!(
                "pixel ({x}, {y}) has value {}, but a part mask holds only {LABELS:?} (is this a set of \
                 `cargo xtask synth --parts`?)",
                p.0[0]
            ),
        });
    }
    Ok(mask)
}
