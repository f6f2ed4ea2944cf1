//! Checks that every prepared image decodes.
//!
//! A corrupt image in a dataset of a hundred thousand is found far more cheaply at
//! preparation time, with its name, than hours into a training run. Every image is
//! decoded with `dml_data::decode_rgb`, the decoder the loaders use, which also checks
//! JPEG files for a complete marker structure.

use std::path::Path;

use anyhow::bail;
use dml_data::Manifest;
use rayon::prelude::*;

/// How many undecodable images an error lists by name before it only counts the rest.
const FAILURES_SHOWN: usize = 10;

/// Decodes every image of `manifest` (paths resolved against `manifest.root`) in
/// parallel. The error counts the images that fail and names the first few, each with
/// the reason, by their manifest paths: those keep the official file names, whereas the
/// root is usually a staging directory that disappears with the failure.
pub(crate) fn verify_images(manifest: &Manifest) -> anyhow::Result<()> {
    let failures: Vec<String> = manifest
        .records
        .par_iter()
        .filter_map(|record| {
            check_image(&manifest.image_path(record))
                .err()
                .map(|reason| format!("{} ({reason})", record.path))
        })
        .collect();
    if failures.is_empty() {
        return Ok(());
    }
    let shown = &failures[..failures.len().min(FAILURES_SHOWN)];
    let more = failures.len() - shown.len();
    let tail = if more > 0 {
        format!(" … and {more} more")
    } else {
        String::new()
    };
    bail!(
        "{} of {} images cannot be decoded: {}{tail}",
        failures.len(),
        manifest.records.len(),
        shown.join("; ")
    )
}

/// Decodes one image exactly as training will (including the JPEG structure check);
/// the error is the reason, without the path.
fn check_image(path: &Path) -> Result<(), String> {
    match dml_data::decode_rgb(path) {
        Ok(_) => Ok(()),
        Err(dml_data::DataError::Decode { message, .. }) => Err(message),
        Err(dml_data::DataError::Io { source, .. }) => Err(format!("cannot read: {source}")),
        Err(other) => Err(other.to_string()),
    }
}
