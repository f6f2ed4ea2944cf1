use std::path::PathBuf;

/// Everything that can go wrong when reading a dataset from disk.
///
/// Every variant names the input at fault (file, line, column) so that a user can fix
/// the data without reading the code.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// An I/O error on a named file.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory being read or written.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A manifest line is malformed or inconsistent.
    #[error("{path}:{line}: {message}")]
    Manifest {
        /// The manifest file.
        path: PathBuf,
        /// 1-based line number in the file (the header is line 1).
        line: u64,
        /// What is wrong with that line.
        message: String,
    },
    /// The manifest as a whole violates an invariant (e.g. a class with one image).
    #[error("{path}: {message}")]
    Invalid {
        /// The manifest file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// An image file could not be decoded.
    #[error("cannot decode image {path}: {message}")]
    Decode {
        /// The image file.
        path: PathBuf,
        /// The decoder's explanation.
        message: String,
    },
    /// A configuration value is out of range.
    #[error("invalid configuration: {0}")]
    Config(String),
}

impl DataError {
    /// Wraps an I/O error with the path it concerns.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        DataError::Io {
            path: path.into(),
            source,
        }
    }
}
