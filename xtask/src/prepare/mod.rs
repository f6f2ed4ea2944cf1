//! `cargo xtask prepare <dataset>`: official archives → `manifest.csv` + `images/`.
//!
//! Every dataset module exposes `build(src, dir)`, which reads the official layout under
//! `src` (an archive or an extracted directory), copies the images into `dir/images/` and
//! returns the manifest; this module adds what is common: the staging directory, the
//! check of the official image counts and the `--val-classes` hold-out.

mod archive;
mod cars196;
mod cub200;
mod inshop;
pub mod mat;
mod sop;
mod verify;

use std::path::{Path, PathBuf};

use clap::Subcommand;
use dml_data::{Manifest, Split};
use dml_datasets::{PrepareOptions, fashion_mnist};

pub use dml_datasets::{Staging, check_counts};
pub(crate) use verify::verify_images;

use crate::CommonArgs;

/// The datasets `prepare` knows.
#[derive(Debug, Subcommand)]
pub enum Dataset {
    /// CUB-200-2011: classes 1–100 train, 101–200 test.
    Cub200 {
        /// `CUB_200_2011.tgz` or the extracted `CUB_200_2011` directory.
        #[arg(long)]
        src: PathBuf,
    },
    /// Cars196: classes 1–98 train, 99–196 test.
    Cars196 {
        /// Directory holding `cars_annos.mat` and `car_ims.tgz` or `car_ims/`.
        #[arg(long)]
        src: PathBuf,
    },
    /// Stanford Online Products: Ebay_train.txt / Ebay_test.txt.
    Sop {
        /// The `Stanford_Online_Products` directory or its zip archive.
        #[arg(long)]
        src: PathBuf,
    },
    /// In-shop Clothes Retrieval: list_eval_partition.txt (train / query / gallery).
    Inshop {
        /// Directory holding `list_eval_partition.txt` (or `Eval/…`) and `img/` or `img.zip`.
        #[arg(long)]
        src: PathBuf,
    },
    /// Fashion-MNIST from IDX files: classes 0–4 train, 5–9 test.
    FashionMnist {
        /// Directory with the four IDX files (gzipped or not).
        #[arg(long, default_value = fashion_mnist::DEFAULT_SOURCE)]
        src: PathBuf,
    },
}

impl Dataset {
    /// The default output directory name under `data/`.
    pub fn name(&self) -> &'static str {
        match self {
            Dataset::Cub200 { .. } => "cub200",
            Dataset::Cars196 { .. } => "cars196",
            Dataset::Sop { .. } => "sop",
            Dataset::Inshop { .. } => "inshop",
            Dataset::FashionMnist { .. } => fashion_mnist::NAME,
        }
    }

    /// The image counts per split of the official release.
    pub fn official_counts(&self) -> &'static [(Split, usize)] {
        match self {
            Dataset::Cub200 { .. } => &[(Split::Train, 5_864), (Split::Test, 5_924)],
            Dataset::Cars196 { .. } => &[(Split::Train, 8_054), (Split::Test, 8_131)],
            Dataset::Sop { .. } => &[(Split::Train, 59_551), (Split::Test, 60_502)],
            Dataset::Inshop { .. } => &[(Split::Train, 25_882), (Split::Query, 14_218), (Split::Gallery, 12_612)],
            Dataset::FashionMnist { .. } => &fashion_mnist::OFFICIAL_COUNTS,
        }
    }
}

impl From<&CommonArgs> for PrepareOptions {
    fn from(common: &CommonArgs) -> Self {
        Self {
            val_classes: common.val_classes,
            force: common.force,
            verify_counts: !common.no_verify_counts,
        }
    }
}

/// A dataset module's `build(src, dir)`.
type Build = fn(&Path, &Path) -> anyhow::Result<Manifest>;

/// Prepares one dataset: build into a staging directory, check the counts, hold out
/// validation classes, and commit. Returns the manifest as written.
pub fn run(dataset: &Dataset, common: &CommonArgs) -> anyhow::Result<Manifest> {
    let out = common
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("data").join(dataset.name()));
    let options = PrepareOptions::from(common);
    let (build, src): (Build, &Path) = match dataset {
        Dataset::Cub200 { src } => (cub200::build, src),
        Dataset::Cars196 { src } => (cars196::build, src),
        Dataset::Sop { src } => (sop::build, src),
        Dataset::Inshop { src } => (inshop::build, src),
        // Fashion-MNIST is prepared by the library a training run also calls on first use,
        // so that both write the same dataset.
        Dataset::FashionMnist { src } => return Ok(fashion_mnist::prepare(src, &out, &options)?),
    };
    let staging = Staging::new(&out, options.force)?;
    let mut manifest = build(src, staging.dir())?;
    if options.verify_counts {
        check_counts(dataset.name(), dataset.official_counts(), &manifest)?;
    }
    manifest.hold_out_val_classes(options.val_classes)?;
    Ok(staging.commit(manifest)?)
}
