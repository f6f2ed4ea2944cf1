//! Fashion-MNIST from its IDX files (Debian's `dataset-fashion-mnist` package ships them
//! gzipped in [`DEFAULT_SOURCE`]).
//!
//! The DML protocol is zero-shot: classes 0–4 (T-shirt/top … Coat) train, classes 5–9
//! (Sandal … Ankle boot) test, pooling the official train and t10k files (70,000 images).

use std::io::Read;
use std::path::{Path, PathBuf};

use dml_data::{Manifest, Record, Split};
use rayon::prelude::*;

use crate::error::{DatasetError, Result};
use crate::{PrepareOptions, Staging, check_counts};

/// The dataset's name, as in `data/fashion-mnist` and in error messages.
pub const NAME: &str = "fashion-mnist";

/// Where Debian's `dataset-fashion-mnist` package installs the IDX files.
pub const DEFAULT_SOURCE: &str = "/usr/share/datasets/fashion-mnist";

/// The ten class names in label order.
pub const CLASS_NAMES: [&str; 10] = [
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
];

/// The images per split of the official release under the zero-shot split.
pub const OFFICIAL_COUNTS: [(Split, usize); 2] = [(Split::Train, 35_000), (Split::Test, 35_000)];

/// The two official parts, in manifest order.
const PARTS: [&str; 2] = ["train", "t10k"];

/// The side of every image in pixels.
const SIDE: usize = 28;

/// The IDX magic numbers: unsigned bytes in 3 dimensions (images) and 1 (labels).
const IMAGES_MAGIC: u32 = 0x0803;
const LABELS_MAGIC: u32 = 0x0801;

/// Prepares Fashion-MNIST from the IDX files in `src` into `out`: builds it in a staging
/// directory, checks the official counts (unless `options.verify_counts` is off), holds
/// out `options.val_classes` classes and moves the result into place. Returns the manifest
/// as written.
pub fn prepare(src: &Path, out: &Path, options: &PrepareOptions) -> Result<Manifest> {
    let staging = Staging::new(out, options.force)?;
    let mut manifest = build(src, staging.dir())?;
    if options.verify_counts {
        check_counts(NAME, &OFFICIAL_COUNTS, &manifest)?;
    }
    manifest.hold_out_val_classes(options.val_classes)?;
    staging.commit(manifest)
}

/// Reads the four IDX files under `src` and writes one grayscale PNG per image into
/// `dir/images/<part>/<index>.png`; returns the manifest (not yet written).
pub fn build(src: &Path, dir: &Path) -> Result<Manifest> {
    let mut manifest = Manifest::new(dir, vec![]);
    for part in PARTS {
        let images_path = find(src, &format!("{part}-images-idx3-ubyte"))?;
        let labels_path = find(src, &format!("{part}-labels-idx1-ubyte"))?;
        let (dims, pixels) = read_idx(&images_path, IMAGES_MAGIC)?;
        let (label_dims, labels) = read_idx(&labels_path, LABELS_MAGIC)?;
        if !(dims.len() == 3 && dims[1] == SIDE && dims[2] == SIDE) {
            return Err(malformed(
                &images_path,
                format!("expected images of shape [N, 28, 28], found {dims:?}"),
            ));
        }
        if label_dims != [dims[0]] {
            return Err(malformed(
                &labels_path,
                format!(
                    "{} labels for {} images in {}",
                    label_dims.first().copied().unwrap_or(0),
                    dims[0],
                    images_path.display()
                ),
            ));
        }
        // A different count is legitimate for a subset: the caller's count check (on the
        // manifest returned) decides whether it is an error.
        if let Some((i, &bad)) = labels.iter().enumerate().find(|&(_, &l)| l > 9) {
            return Err(malformed(
                &labels_path,
                format!("label {bad} of image {i} is not a class 0–9"),
            ));
        }
        let part_dir = dir.join("images").join(part);
        std::fs::create_dir_all(&part_dir).map_err(|e| DatasetError::io("create", &part_dir, e))?;
        pixels.par_chunks(SIDE * SIDE).enumerate().try_for_each(|(i, chunk)| {
            let path = part_dir.join(format!("{i:05}.png"));
            image::save_buffer(&path, chunk, SIDE as u32, SIDE as u32, image::ColorType::L8)
                .map_err(|error| DatasetError::Image { path, error })
        })?;
        for (i, &label) in labels.iter().enumerate() {
            manifest.records.push(Record {
                path: format!("images/{part}/{i:05}.png"),
                class_id: label as u32,
                class_name: CLASS_NAMES[label as usize].to_string(),
                split: if label < 5 { Split::Train } else { Split::Test },
                properties: vec![],
            });
        }
    }
    Ok(manifest)
}

fn malformed(path: &Path, message: String) -> DatasetError {
    DatasetError::Malformed {
        path: path.to_path_buf(),
        message,
    }
}

/// Finds `name` or `name.gz` in `src`.
fn find(src: &Path, name: &str) -> Result<PathBuf> {
    [src.join(name), src.join(format!("{name}.gz"))]
        .into_iter()
        .find(|candidate| candidate.is_file())
        .ok_or_else(|| DatasetError::MissingSource {
            dir: src.to_path_buf(),
            name: name.to_string(),
        })
}

/// Reads an IDX file of unsigned bytes (gzipped if the name ends in `.gz`): checks the
/// magic number, returns the dimensions and the data.
fn read_idx(path: &Path, magic: u32) -> Result<(Vec<usize>, Vec<u8>)> {
    let file = std::fs::File::open(path).map_err(|e| DatasetError::io("open", path, e))?;
    let mut bytes = Vec::new();
    let read = if path.extension().is_some_and(|e| e == "gz") {
        flate2::read::GzDecoder::new(file).read_to_end(&mut bytes)
    } else {
        std::io::BufReader::new(file).read_to_end(&mut bytes)
    };
    read.map_err(|e| malformed(path, format!("corrupt or truncated file: {e}")))?;
    parse_idx(&bytes, magic).map_err(|why| malformed(path, format!("malformed IDX file: {why}")))
}

/// Parses an IDX image in memory; the error says what is wrong, without the file name.
fn parse_idx(bytes: &[u8], magic: u32) -> std::result::Result<(Vec<usize>, Vec<u8>), String> {
    if bytes.len() < 4 {
        return Err(format!("file of {} bytes has no IDX header", bytes.len()));
    }
    let found = u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
    if found != magic {
        return Err(format!("magic number {found:#010x}, expected {magic:#010x}"));
    }
    let ndims = (magic & 0xff) as usize;
    let header = 4 + 4 * ndims;
    if bytes.len() < header {
        return Err(format!("header of {ndims} dimensions is truncated"));
    }
    let dims: Vec<usize> = (0..ndims)
        .map(|d| u32::from_be_bytes(bytes[4 + 4 * d..8 + 4 * d].try_into().expect("4 bytes")) as usize)
        .collect();
    let len = dims
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| "dimensions overflow".to_string())?;
    let data = &bytes[header..];
    if data.len() != len {
        return Err(format!(
            "dimensions {dims:?} need {len} data bytes, the file has {}",
            data.len()
        ));
    }
    Ok((dims, data.to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn idx(magic: u32, dims: &[u32], data: &[u8]) -> Vec<u8> {
        let mut out = magic.to_be_bytes().to_vec();
        for d in dims {
            out.extend(d.to_be_bytes());
        }
        out.extend(data);
        out
    }

    #[test]
    fn parses_and_rejects_idx() {
        let ok = idx(0x0803, &[2, 1, 3], &[1, 2, 3, 4, 5, 6]);
        assert_eq!(parse_idx(&ok, 0x0803).unwrap(), (vec![2, 1, 3], vec![1, 2, 3, 4, 5, 6]));
        let e = parse_idx(&ok, 0x0801).unwrap_err();
        assert!(e.contains("magic"), "{e}");
        let e = parse_idx(&ok[..ok.len() - 1], 0x0803).unwrap_err();
        assert!(e.contains("need 6 data bytes") && e.contains("has 5"), "{e}");
        assert!(parse_idx(&ok[..6], 0x0803).is_err());
        assert!(parse_idx(&[], 0x0803).is_err());
    }
}
