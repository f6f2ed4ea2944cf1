//! Fashion-MNIST from its IDX files (Debian's `dataset-fashion-mnist` package ships them
//! gzipped in `/usr/share/datasets/fashion-mnist`).
//!
//! The DML protocol is zero-shot: classes 0–4 (T-shirt/top … Coat) train, classes 5–9
//! (Sandal … Ankle boot) test, pooling the official train and t10k files (70,000 images).

use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail, ensure};
use dml_data::{Manifest, Record, Split};
use rayon::prelude::*;

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

/// The two official parts, in manifest order, with their expected image counts.
const PARTS: [(&str, usize); 2] = [("train", 60_000), ("t10k", 10_000)];

/// Reads the four IDX files under `src` and writes one grayscale PNG per image into
/// `dir/images/<part>/<index>.png`.
pub fn build(src: &Path, dir: &Path) -> anyhow::Result<Manifest> {
    let mut manifest = Manifest::new(dir, vec![]);
    for (part, count) in PARTS {
        let images_path = find(src, &format!("{part}-images-idx3-ubyte"))?;
        let labels_path = find(src, &format!("{part}-labels-idx1-ubyte"))?;
        let (dims, pixels) = read_idx(&images_path, 0x0803)?;
        let (label_dims, labels) = read_idx(&labels_path, 0x0801)?;
        ensure!(
            dims.len() == 3 && dims[1] == 28 && dims[2] == 28,
            "{}: expected images of shape [N, 28, 28], found {dims:?}",
            images_path.display()
        );
        ensure!(
            label_dims == [dims[0]],
            "{}: {} labels for {} images in {}",
            labels_path.display(),
            label_dims.first().copied().unwrap_or(0),
            dims[0],
            images_path.display()
        );
        if dims[0] != count {
            eprintln!(
                "warning: {} holds {} images, the official file holds {count}",
                images_path.display(),
                dims[0]
            );
        }
        if let Some((i, &bad)) = labels.iter().enumerate().find(|&(_, &l)| l > 9) {
            bail!("{}: label {bad} of image {i} is not a class 0–9", labels_path.display());
        }
        let part_dir = dir.join("images").join(part);
        std::fs::create_dir_all(&part_dir).with_context(|| format!("cannot create {}", part_dir.display()))?;
        pixels.par_chunks(28 * 28).enumerate().try_for_each(|(i, chunk)| {
            let path = part_dir.join(format!("{i:05}.png"));
            image::save_buffer(&path, chunk, 28, 28, image::ColorType::L8)
                .with_context(|| format!("cannot write {}", path.display()))
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

/// Finds `name` or `name.gz` in `src`.
fn find(src: &Path, name: &str) -> anyhow::Result<PathBuf> {
    for candidate in [src.join(name), src.join(format!("{name}.gz"))] {
        if candidate.is_file() {
            return Ok(candidate);
        }
    }
    bail!("{}: neither {name} nor {name}.gz found", src.display())
}

/// Reads an IDX file of unsigned bytes (gzipped if the name ends in `.gz`): checks the
/// magic number, returns the dimensions and the data.
fn read_idx(path: &Path, magic: u32) -> anyhow::Result<(Vec<usize>, Vec<u8>)> {
    let file = std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut bytes = Vec::new();
    let read = if path.extension().is_some_and(|e| e == "gz") {
        flate2::read::GzDecoder::new(file).read_to_end(&mut bytes)
    } else {
        std::io::BufReader::new(file).read_to_end(&mut bytes)
    };
    read.with_context(|| format!("{}: corrupt or truncated file", path.display()))?;
    parse_idx(&bytes, magic).with_context(|| format!("{}: malformed IDX file", path.display()))
}

fn parse_idx(bytes: &[u8], magic: u32) -> anyhow::Result<(Vec<usize>, Vec<u8>)> {
    ensure!(bytes.len() >= 4, "file of {} bytes has no IDX header", bytes.len());
    let found = u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
    ensure!(found == magic, "magic number {found:#010x}, expected {magic:#010x}");
    let ndims = (magic & 0xff) as usize;
    let header = 4 + 4 * ndims;
    ensure!(bytes.len() >= header, "header of {ndims} dimensions is truncated");
    let dims: Vec<usize> = (0..ndims)
        .map(|d| u32::from_be_bytes(bytes[4 + 4 * d..8 + 4 * d].try_into().expect("4 bytes")) as usize)
        .collect();
    let len = dims
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .context("dimensions overflow")?;
    let data = &bytes[header..];
    ensure!(
        data.len() == len,
        "dimensions {dims:?} need {len} data bytes, the file has {}",
        data.len()
    );
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
        let e = parse_idx(&ok, 0x0801).unwrap_err().to_string();
        assert!(e.contains("magic"), "{e}");
        let e = parse_idx(&ok[..ok.len() - 1], 0x0803).unwrap_err().to_string();
        assert!(e.contains("need 6 data bytes") && e.contains("has 5"), "{e}");
        assert!(parse_idx(&ok[..6], 0x0803).is_err());
        assert!(parse_idx(&[], 0x0803).is_err());
    }
}
