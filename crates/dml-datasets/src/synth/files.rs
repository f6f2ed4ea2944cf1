//! Writing a rendered set: every image and its mask into a staging directory, in parallel, then
//! the manifest, and the directory moved into place.

use std::path::Path;

use dml_data::{Manifest, Record, Split};
use image::{GrayImage, ImageEncoder, RgbImage};
use rayon::prelude::*;

use super::masks::{IMAGES_DIR, MASKS_DIR, mask_path};
use crate::error::{DatasetError, Result};
use crate::staging::Staging;

/// What the manifest says of one image besides its path.
pub(crate) struct Entry {
    /// The class id.
    pub class_id: u32,
    /// The class name.
    pub class_name: String,
    /// Whether the class belongs to the `train` split (else `test`).
    pub train: bool,
    /// The level of every property column.
    pub levels: Vec<u32>,
}

/// Renders every item of `params` into a staging directory next to `out` (refused when `out`
/// exists and `force` is false), writes the manifest (`property_names` as its columns, one
/// record per item from `describe`) and moves the directory into place; returns the manifest.
pub(crate) fn write_set<P: Sync>(
    out: &Path,
    force: bool,
    params: &[P],
    property_names: Vec<String>,
    render: impl Fn(&P) -> (RgbImage, GrayImage) + Sync,
    describe: impl Fn(&P) -> Entry,
) -> Result<Manifest> {
    let staging = Staging::new(out, force)?;
    write_rendered(&staging, params, render)?;
    let mut manifest = Manifest::new(staging.dir(), property_names);
    manifest.records = params
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let entry = describe(p);
            Record {
                path: image_path(i),
                class_id: entry.class_id,
                class_name: entry.class_name,
                split: if entry.train { Split::Train } else { Split::Test },
                properties: entry.levels.iter().map(u32::to_string).collect(),
            }
        })
        .collect();
    staging.commit(manifest)
}

/// The manifest-relative path of image `index`.
pub(crate) fn image_path(index: usize) -> String {
    format!("{IMAGES_DIR}/{index:06}.png")
}

/// Encodes `pixels` (`width`×`height` pixels of `colour`) as PNG and writes them to `path`.
pub(crate) fn write_png(
    path: &Path,
    pixels: &[u8],
    (width, height): (u32, u32),
    colour: image::ExtendedColorType,
) -> Result<()> {
    let mut png = Vec::new();
    image::codecs::png::PngEncoder::new(&mut png)
        .write_image(pixels, width, height, colour)
        .map_err(|error| DatasetError::Image {
            path: path.to_path_buf(),
            error,
        })?;
    std::fs::write(path, png).map_err(|e| DatasetError::io("write", path, e))
}

/// Renders every item of `params` with `render` (an RGB image and its mask) and writes them
/// to `images/<index>.png` and `masks/<index>.png` under the staging directory.
fn write_rendered<P: Sync>(
    staging: &Staging,
    params: &[P],
    render: impl Fn(&P) -> (RgbImage, GrayImage) + Sync,
) -> Result<()> {
    for dir in [IMAGES_DIR, MASKS_DIR] {
        let dir = staging.dir().join(dir);
        std::fs::create_dir_all(&dir).map_err(|e| DatasetError::io("create", &dir, e))?;
    }
    params.par_iter().enumerate().try_for_each(|(i, p)| -> Result<()> {
        let rel = image_path(i);
        let (image, mask) = render(p);
        write_png(
            &staging.dir().join(&rel),
            image.as_raw(),
            image.dimensions(),
            image::ExtendedColorType::Rgb8,
        )?;
        write_png(
            &mask_path(staging.dir(), &rel),
            mask.as_raw(),
            mask.dimensions(),
            image::ExtendedColorType::L8,
        )
    })
}
