//! Reading an 8-bit grayscale PNG mask, with errors that name the file.

use std::path::Path;

use image::GrayImage;

use crate::error::{DatasetError, Result};

/// Reads the 8-bit grayscale PNG at `path`: a missing file is [`DatasetError::MissingMask`],
/// anything else that is not an L8 PNG [`DatasetError::Malformed`], both naming the file.
pub(crate) fn read_gray(path: &Path) -> Result<GrayImage> {
    let bytes = std::fs::read(path).map_err(|error| {
        if error.kind() == std::io::ErrorKind::NotFound {
            DatasetError::MissingMask {
                path: path.to_path_buf(),
            }
        } else {
            DatasetError::io("read", path, error)
        }
    })?;
    let malformed = |message: String| DatasetError::Malformed {
        path: path.to_path_buf(),
        message,
    };
    let image = image::load_from_memory_with_format(&bytes, image::ImageFormat::Png)
        .map_err(|e| malformed(format!("not a decodable PNG object mask: {e}")))?;
    let colour = image.color();
    let image::DynamicImage::ImageLuma8(mask) = image else {
        return Err(malformed(format!(
            "holds {colour:?} pixels, but an object mask is 8-bit grayscale (L8)"
        )));
    };
    Ok(mask)
}
