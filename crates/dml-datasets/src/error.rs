//! The errors of dataset generation; each names the file, directory or setting at fault.

use std::path::PathBuf;

/// What can go wrong while generating or preparing a dataset.
///
/// The messages carry their cause inline (an I/O or image error is part of the text rather
/// than a separate `source`), so that printing the error once, with `{}` or with anyhow's
/// `{:#}`, says everything exactly once.
#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    /// The output directory exists and replacing it was not asked for.
    #[error("output directory {} already exists (pass --force to replace it)", path.display())]
    OutputExists {
        /// The existing directory.
        path: PathBuf,
    },
    /// The output path ends in `..` or is a root, so it names no directory to create.
    #[error("output path {} has no directory name", path.display())]
    NoDirectoryName {
        /// The output path as given.
        path: PathBuf,
    },
    /// A file or directory cannot be created, read, written, moved or deleted.
    #[error("cannot {action} {}: {error}", path.display())]
    Io {
        /// What was attempted (`create`, `open`, `write`, …).
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The operating system's reason.
        error: std::io::Error,
    },
    /// A directory cannot be renamed (moved into place, or an old output moved aside).
    #[error("cannot rename {} to {}: {error}", from.display(), to.display())]
    Rename {
        /// The directory being moved.
        from: PathBuf,
        /// Its new path.
        to: PathBuf,
        /// The operating system's reason.
        error: std::io::Error,
    },
    /// An image cannot be encoded or written.
    #[error("cannot write {}: {error}", path.display())]
    Image {
        /// The image file.
        path: PathBuf,
        /// The encoder's reason.
        error: image::ImageError,
    },
    /// A source file is missing from the source directory.
    #[error("{}: neither {name} nor {name}.gz found", dir.display())]
    MissingSource {
        /// The source directory searched.
        dir: PathBuf,
        /// The file name looked for (with or without `.gz`).
        name: String,
    },
    /// A source file is corrupt, truncated or does not have the expected layout.
    #[error("{}: {message}", path.display())]
    Malformed {
        /// The source file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// An object mask of the synthetic set is missing, typically because the set was
    /// generated before masks existed.
    #[error(
        "object mask {} does not exist: the synthetic set was generated before masks existed \
         (or is incomplete); regenerate it with `cargo xtask synth --force` and the --out, --n, \
         --seed and --size it was made with, or delete its directory so that training \
         generates it again",
        path.display()
    )]
    MissingMask {
        /// The mask file looked for.
        path: PathBuf,
    },
    /// A generation setting is out of its range.
    #[error("{setting} = {value}: {reason}")]
    InvalidSetting {
        /// The setting (the field of the configuration, which is also the name of its
        /// command-line flag).
        setting: &'static str,
        /// The value given.
        value: String,
        /// Why it is refused, with the accepted range.
        reason: String,
    },
    /// The source holds other image counts than the official release.
    #[error(
        "{dataset}: the source does not match the official release ({mismatches}); \
         pass --no-verify-counts to prepare a subset deliberately"
    )]
    CountMismatch {
        /// The dataset's name.
        dataset: String,
        /// Every split whose count differs, with the expected and the found count.
        mismatches: String,
    },
    /// The written dataset fails the manifest's validation (a bug of the generator, since
    /// the generator wrote both the images and the manifest).
    #[error("the prepared dataset in {} is inconsistent: {error}", dir.display())]
    Inconsistent {
        /// The staging directory that was validated.
        dir: PathBuf,
        /// The validation error.
        error: dml_data::DataError,
    },
    /// The manifest cannot be written or its validation classes cannot be held out.
    #[error(transparent)]
    Data(#[from] dml_data::DataError),
}

impl DatasetError {
    /// An I/O error of `action` (a verb such as `create`) on `path`.
    pub fn io(action: &'static str, path: impl Into<PathBuf>, error: std::io::Error) -> Self {
        Self::Io {
            action,
            path: path.into(),
            error,
        }
    }
}

/// The result of every fallible operation of this crate.
pub type Result<T> = std::result::Result<T, DatasetError>;
