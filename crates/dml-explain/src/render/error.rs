//! The one error type of rendering; every message names the input it is about.

use std::path::PathBuf;

/// Why a map, an image or a figure could not be rendered or written.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// A map's slice does not hold `h * w` values for the shape it was given.
    #[error("map has {len} values but its shape [{h}, {w}] needs {}", h * w)]
    MapLength {
        /// The slice's length.
        len: usize,
        /// The map's height (rows) as given.
        h: usize,
        /// The map's width (columns) as given.
        w: usize,
    },
    /// A map or image has a zero side, so there is nothing to resample or draw.
    #[error("{what} has an empty shape [{h}, {w}]")]
    EmptyShape {
        /// Which input (e.g. "map", "image").
        what: &'static str,
        /// Its height.
        h: usize,
        /// Its width.
        w: usize,
    },
    /// A normalised CHW image does not hold `3 * h * w` values.
    #[error("normalised image has {len} values but its shape [3, {h}, {w}] needs {}", 3 * h * w)]
    ImageLength {
        /// The slice's length.
        len: usize,
        /// The image's height as given.
        h: usize,
        /// The image's width as given.
        w: usize,
    },
    /// A size does not fit the `u32` sides of an [`image::RgbImage`].
    #[error("{what} of shape [{h}, {w}] is too large for an image")]
    TooLarge {
        /// Which input.
        what: &'static str,
        /// Its height.
        h: usize,
        /// Its width.
        w: usize,
    },
    /// The blending weight of an overlay is not a number in `[0, 1]`.
    #[error("overlay alpha {0} is not in [0, 1]")]
    Alpha(f32),
    /// A value range has a non-finite end or its minimum above its maximum.
    #[error("value range [{min}, {max}] is not a finite range with min <= max")]
    Range {
        /// The lower end as given.
        min: f32,
        /// The upper end as given.
        max: f32,
    },
    /// A figure's inputs do not fit together; the message names them.
    #[error("{0}")]
    Config(String),
    /// A panel was asked for a number of images it does not lay out.
    #[error("a panel shows 1 to 4 images, got {0}")]
    PanelCount(usize),
    /// One image of a panel could not be rendered; `source` says why.
    #[error("panel image {index} (caption {caption:?}): {source}")]
    PanelItem {
        /// The image's position in the panel (0-based).
        index: usize,
        /// Its caption, to find it among the inputs.
        caption: String,
        /// The underlying error.
        #[source]
        source: Box<RenderError>,
    },
    /// Creating, writing or renaming a file failed.
    #[error("cannot write {}: {source}", path.display())]
    Io {
        /// The file (the temporary file or the destination) that failed.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// PNG encoding failed.
    #[error("cannot encode {} as PNG: {source}", path.display())]
    Encode {
        /// The destination file.
        path: PathBuf,
        /// The encoder's error.
        #[source]
        source: image::ImageError,
    },
}
