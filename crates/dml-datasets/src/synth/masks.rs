//! Where the object mask of a synthetic image lives, and reading it back.
//!
//! [`generate`](super::generate) writes the mask of `images/<rel>` to `masks/<rel>` in the
//! same staged tree, so a set on disk either has every mask or (when it was generated
//! before masks existed) none. An old set is not regenerated behind the user's back:
//! [`read_mask`] reports the missing file and says how to regenerate the set.

use std::path::{Component, Path, PathBuf};

use image::GrayImage;

use super::gray::read_gray;
use super::parts::labels::{LABELS, object_view};
use super::render::{MASK_BACKGROUND, MASK_OBJECT};
use crate::error::{DatasetError, Result};

/// The directory, relative to the dataset root, that holds the images.
pub const IMAGES_DIR: &str = "images";
/// The directory, relative to the dataset root, that holds the object masks; it mirrors
/// the layout of [`IMAGES_DIR`].
pub const MASKS_DIR: &str = "masks";

/// The object mask of the image at `image_rel_path`, a manifest record path relative to
/// `dataset_root` (the directory of `manifest.csv`, i.e. `Manifest::root`).
///
/// `images/<rel>` maps to `<dataset_root>/masks/<rel>`; a record path that does not start
/// with `images/` is placed under `masks/` as a whole, so every image path has exactly one
/// mask path and distinct images never share one. Nothing is read from disk.
pub fn mask_path(dataset_root: &Path, image_rel_path: impl AsRef<Path>) -> PathBuf {
    let mut components = image_rel_path
        .as_ref()
        .components()
        .skip_while(|c| matches!(c, Component::CurDir))
        .peekable();
    if components.peek() == Some(&Component::Normal(IMAGES_DIR.as_ref())) {
        components.next();
    }
    let mut path = dataset_root.join(MASKS_DIR);
    path.extend(components);
    path
}

/// Reads the object mask at `path` (see [`mask_path`]): an 8-bit grayscale PNG holding
/// only 0 (background) and 255 (object), as [`render_with_mask`](super::render_with_mask)
/// defines them, or a part mask of the parts set, which is returned as its object view
/// ([`object_view`]: body and attached parts 255, background and distractors 0).
///
/// A missing file is a [`DatasetError::MissingMask`] whose message says to regenerate
/// the set, since sets generated before masks existed have none; a file that is not a
/// decodable PNG, not 8-bit grayscale, or holds other values is
/// [`DatasetError::Malformed`]. Every error names the file.
pub fn read_mask(path: impl AsRef<Path>) -> Result<GrayImage> {
    let path = path.as_ref();
    let mask = read_gray(path)?;
    let binary = |v: u8| v == MASK_BACKGROUND || v == MASK_OBJECT;
    if mask.pixels().all(|p| binary(p.0[0])) {
        return Ok(mask);
    }
    // A part mask of the parts set: its object view is the object mask.
    if mask.pixels().all(|p| LABELS.contains(&p.0[0])) {
        return Ok(object_view(&mask));
    }
    // Neither: name the first pixel that no object mask holds, or, where every value is one
    // of either kind, the first 255 of a mask that otherwise looks like a part mask.
    let (x, y, value) = mask
        .enumerate_pixels()
        .find(|(_, _, p)| !binary(p.0[0]) && !LABELS.contains(&p.0[0]))
        .or_else(|| mask.enumerate_pixels().find(|(_, _, p)| p.0[0] == MASK_OBJECT))
        .map(|(x, y, p)| (x, y, p.0[0]))
        .unwrap_or_default();
    Err(DatasetError::Malformed {
        path: path.to_path_buf(),
        message: format!(
            "pixel ({x}, {y}) has value {value}, but an object mask holds only {MASK_BACKGROUND} and {MASK_OBJECT}, \
         and a part mask only {LABELS:?}"
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mask_path_mirrors_the_image_layout() {
        let root = Path::new("/data/synth");
        assert_eq!(
            mask_path(root, "images/000007.png"),
            Path::new("/data/synth/masks/000007.png")
        );
        assert_eq!(
            mask_path(root, Path::new("./images/a/b.png")),
            Path::new("/data/synth/masks/a/b.png")
        );
        // Only a leading `images` component is replaced; one deeper down is kept.
        assert_eq!(
            mask_path(root, "other/images/x.png"),
            Path::new("/data/synth/masks/other/images/x.png")
        );
    }
}
