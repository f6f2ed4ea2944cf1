//! The datasets a run can create by itself: the rendered synthetic shapes set
//! ([`synth::generate`]) and Fashion-MNIST converted from its IDX files
//! ([`fashion_mnist::prepare`]).
//!
//! Both write `<out>/manifest.csv` plus `<out>/images/`, the layout `dml_data::Manifest`
//! reads; the synthetic set adds each image's object mask under `<out>/masks/`
//! ([`synth::mask_path`]). Everything is written into a staging directory next to the
//! output ([`Staging`]) and renamed into place only when every file was written and the
//! manifest validated, so an interrupted or failed run never leaves a half-written dataset
//! behind, and a training run that finds `manifest.csv` can trust the directory to be
//! complete (a synthetic set generated before masks existed has none at all, which
//! [`synth::read_mask`] reports with the command that regenerates it).
//!
//! The crate holds only what a training run needs on first use; the converters of the
//! archive-based datasets (CUB-200, Cars196, SOP, In-shop), with their zip, tar and
//! checksum dependencies, stay in the `xtask` command-line tool.
#![warn(missing_docs)]

pub mod error;
pub mod fashion_mnist;
pub mod folder;
pub mod staging;
pub mod synth;

use std::collections::BTreeMap;

use dml_data::{Manifest, Split};

pub use error::{DatasetError, Result};
pub use staging::Staging;

/// How a prepared dataset is written, besides its source and output directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrepareOptions {
    /// Hold out the last N training classes as the `val` split (0: none).
    pub val_classes: usize,
    /// Replace an existing output directory instead of refusing to touch it.
    pub force: bool,
    /// Refuse a source whose image counts differ from the official release, which catches
    /// a truncated download before hours of training on it.
    pub verify_counts: bool,
}

impl Default for PrepareOptions {
    /// No validation classes, no overwriting, counts verified: the safe choices.
    fn default() -> Self {
        Self {
            val_classes: 0,
            force: false,
            verify_counts: true,
        }
    }
}

/// Compares the images per split of `manifest` with the official release of `dataset`
/// (`expected`) and lists every mismatch.
pub fn check_counts(dataset: &str, expected: &[(Split, usize)], manifest: &Manifest) -> Result<()> {
    let found: BTreeMap<Split, usize> = manifest.split_counts();
    let mismatches: Vec<String> = expected
        .iter()
        .filter_map(|&(split, want)| {
            let got = found.get(&split).copied().unwrap_or(0);
            (got != want).then(|| format!("{split}: expected {want} images, found {got}"))
        })
        .collect();
    if mismatches.is_empty() {
        Ok(())
    } else {
        Err(DatasetError::CountMismatch {
            dataset: dataset.to_string(),
            mismatches: mismatches.join("; "),
        })
    }
}
