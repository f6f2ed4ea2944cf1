//! Writing figures so that a reader (a browser, a report generator) never sees half a PNG.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use image::codecs::png::PngEncoder;
use image::{ExtendedColorType, ImageEncoder, RgbImage};

use super::error::RenderError;

/// Distinguishes temporary files of concurrent saves within one process (threads rendering
/// figures in parallel); the process id distinguishes processes.
static SAVE_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Writes `img` as an 8-bit RGB PNG to `path` atomically: the PNG goes to a hidden temporary
/// file in the same directory (`.<name>.<pid>.<n>.tmp`), is flushed and synced, and is then
/// renamed over `path`, so `path` holds either its old content or the whole new figure. The
/// temporary file is in the same directory because a rename is only atomic within one file
/// system. On failure the temporary file is removed.
///
/// Errors name the file that failed: the directory not existing or not writable, encoding, or
/// the rename.
pub fn save_png_atomic(img: &RgbImage, path: &Path) -> Result<(), RenderError> {
    let Some(name) = path.file_name() else {
        let source = std::io::Error::new(std::io::ErrorKind::InvalidInput, "the path names no file");
        return Err(RenderError::Io {
            path: path.to_path_buf(),
            source,
        });
    };
    let directory = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let n = SAVE_COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut temp_name = std::ffi::OsString::from(".");
    temp_name.push(name);
    temp_name.push(format!(".{}.{n}.tmp", std::process::id()));
    let temp = directory.join(temp_name);

    let written = (|| {
        let file = File::create(&temp).map_err(io_error(&temp))?;
        let mut writer = BufWriter::new(file);
        PngEncoder::new(&mut writer)
            .write_image(img.as_raw(), img.width(), img.height(), ExtendedColorType::Rgb8)
            .map_err(|source| RenderError::Encode {
                path: path.to_path_buf(),
                source,
            })?;
        writer.flush().map_err(io_error(&temp))?;
        writer.get_ref().sync_all().map_err(io_error(&temp))?;
        std::fs::rename(&temp, path).map_err(io_error(path))
    })();
    if written.is_err() {
        // Best effort: the temporary file may not exist (creation failed), which is fine.
        let _ = std::fs::remove_file(&temp);
    }
    written
}

/// An error-mapping function for I/O on `path`.
fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> RenderError + '_ {
    move |source| RenderError::Io {
        path: path.to_path_buf(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use image::Rgb;

    fn scratch_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("render-save-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn round_trips_and_leaves_no_temporary_file() {
        let dir = scratch_dir("roundtrip");
        let img = RgbImage::from_fn(7, 5, |x, y| Rgb([x as u8 * 30, y as u8 * 40, 99]));
        let path = dir.join("figure.png");
        save_png_atomic(&img, &path).unwrap();
        // Overwriting an existing figure works the same way.
        save_png_atomic(&img, &path).unwrap();
        let back = image::open(&path).unwrap().to_rgb8();
        assert_eq!(back, img);
        let entries: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(entries, vec![std::ffi::OsString::from("figure.png")]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_missing_directory_is_an_error_naming_the_path() {
        let dir = scratch_dir("missing");
        let path = dir.join("no/such/dir/figure.png");
        let err = save_png_atomic(&RgbImage::new(2, 2), &path).unwrap_err();
        let message = err.to_string();
        assert!(
            message.starts_with("cannot write ") && message.contains("no/such/dir"),
            "{message}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
