//! Image datasets: manifest records → decoded, transformed tensors.

use std::sync::Arc;

use image::RgbImage;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::error::DataError;
use crate::jpeg::check_jpeg_structure;
use crate::manifest::{Manifest, Split};
use crate::transform::Pipeline;

/// One batch of images, ready to become a tensor.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    /// Row-major images of shape [`Batch::shape`] = `[B, 3, H, W]`.
    pub images: Vec<f32>,
    /// `[B, 3, H, W]`.
    pub shape: [usize; 4],
    /// Class ids `[B]`.
    pub labels: Vec<u32>,
    /// Dataset item indices `[B]` (positions in [`ImageDataset`], not manifest lines).
    pub items: Vec<usize>,
}

/// The images of some splits of a manifest, with a transform pipeline.
#[derive(Debug, Clone)]
pub struct ImageDataset {
    manifest: Arc<Manifest>,
    records: Vec<usize>,
    labels: Vec<u32>,
    pipeline: Pipeline,
}

/// Decodes an image file (JPEG or PNG; grayscale and alpha are converted to RGB).
///
/// JPEG files must have a complete marker structure ([`crate::check_jpeg_structure`]):
/// the underlying decoder would otherwise turn a truncated file into grey pixels
/// silently.
pub fn decode_rgb(path: &std::path::Path) -> Result<RgbImage, DataError> {
    let decode_error = |message: String| DataError::Decode {
        path: path.to_path_buf(),
        message,
    };
    let bytes = std::fs::read(path).map_err(|e| DataError::io(path, e))?;
    if bytes.starts_with(&[0xFF, 0xD8]) {
        check_jpeg_structure(&bytes).map_err(decode_error)?;
    }
    let image = image::ImageReader::new(std::io::Cursor::new(&bytes))
        .with_guessed_format()
        .map_err(|e| DataError::io(path, e))?
        .decode()
        .map_err(|e| decode_error(e.to_string()))?;
    Ok(image.into_rgb8())
}

impl ImageDataset {
    /// The records of `manifest` whose split is in `splits`, in manifest order.
    pub fn new(manifest: Arc<Manifest>, splits: &[Split], pipeline: Pipeline) -> Self {
        let records: Vec<usize> = (0..manifest.records.len())
            .filter(|&i| splits.contains(&manifest.records[i].split))
            .collect();
        let labels = records.iter().map(|&i| manifest.records[i].class_id).collect();
        Self {
            manifest,
            records,
            labels,
            pipeline,
        }
    }

    /// Number of images.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether the dataset has no image.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Class id of every item, `[len]`.
    pub fn labels(&self) -> &[u32] {
        &self.labels
    }

    /// The manifest the items come from.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// The manifest record index of item `item`.
    pub fn record_index(&self, item: usize) -> usize {
        self.records[item]
    }

    /// Decodes and transforms item `item` with random choices seeded by `seed`, giving
    /// `[3, H, W]` and `(H, W)`.
    pub fn load(&self, item: usize, seed: u64) -> Result<(Vec<f32>, (u32, u32)), DataError> {
        let record = &self.manifest.records[self.records[item]];
        let path = self.manifest.image_path(record);
        let image = decode_rgb(&path)?;
        let size = self.pipeline.output_size(image.width(), image.height());
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        Ok((self.pipeline.apply(&image, &mut rng), size))
    }

    /// Loads `items` into one batch, decoding in parallel on the current rayon pool.
    /// Position `k` of the batch uses the augmentation seed `mix(seed, k)`, so the result
    /// does not depend on the thread count, and an item drawn twice (sampling with
    /// replacement) gets two different augmentations. Images of different output sizes are
    /// an error naming the first file that differs.
    pub fn batch(&self, items: &[usize], seed: u64) -> Result<Batch, DataError> {
        use rayon::prelude::*;
        let loaded: Vec<(Vec<f32>, (u32, u32))> = items
            .par_iter()
            .enumerate()
            .map(|(k, &item)| self.load(item, mix(seed, k as u64)))
            .collect::<Result<_, _>>()?;
        let (h, w) = loaded.first().map_or((0, 0), |l| l.1);
        let mut images = Vec::with_capacity(items.len() * 3 * (h * w) as usize);
        for (k, (pixels, size)) in loaded.into_iter().enumerate() {
            if size != (h, w) {
                let record = &self.manifest.records[self.records[items[k]]];
                return Err(DataError::Decode {
                    path: self.manifest.image_path(record),
                    message: format!(
                        "transformed to {}×{} but the batch's first image is {h}×{w}; \
                         configure a crop or resize so that all images share one size",
                        size.0, size.1
                    ),
                });
            }
            images.extend_from_slice(&pixels);
        }
        Ok(Batch {
            images,
            shape: [items.len(), 3, h as usize, w as usize],
            labels: items.iter().map(|&i| self.labels[i]).collect(),
            items: items.to_vec(),
        })
    }
}

/// Mixes two 64-bit values into a well-spread seed (SplitMix64 finaliser), so that
/// neighbouring items and epochs get unrelated random streams.
pub fn mix(a: u64, b: u64) -> u64 {
    let mut z = a ^ b
        .wrapping_add(0x9E37_79B9_7F4A_7C15)
        .wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::Record;
    use crate::transform::TransformConfig;

    #[test]
    fn grayscale_png_becomes_three_equal_channels() {
        let dir = std::env::temp_dir().join(format!("dml-data-gray-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let gray = image::GrayImage::from_fn(5, 4, |x, y| image::Luma([(x * 40 + y) as u8]));
        gray.save(dir.join("g.png")).unwrap();
        std::fs::write(dir.join("bad.png"), b"\x89PNG\r\n\x1a\nnot really").unwrap();
        let record = |path: &str| Record {
            path: path.into(),
            class_id: 3,
            class_name: "c".into(),
            split: Split::Test,
            properties: vec![],
        };
        let mut manifest = Manifest::new(&dir, vec![]);
        manifest.records = vec![record("g.png"), record("bad.png")];
        let pipeline = Pipeline::new(TransformConfig {
            mean: [0.0; 3],
            std: [1.0; 3],
            ..TransformConfig::identity()
        })
        .unwrap();
        let ds = ImageDataset::new(Arc::new(manifest), &[Split::Test], pipeline);
        let batch = ds.batch(&[0], 0).unwrap();
        assert_eq!(batch.shape, [1, 3, 4, 5]);
        assert_eq!(batch.labels, vec![3]);
        let plane = 20;
        for i in 0..plane {
            let want = gray.as_raw()[i] as f32 / 255.0;
            for c in 0..3 {
                assert!((batch.images[c * plane + i] - want).abs() < 1e-6);
            }
        }
        let e = ds.batch(&[0, 1], 0).unwrap_err();
        assert!(
            matches!(&e, DataError::Decode { path, .. } if path.ends_with("bad.png")),
            "{e}"
        );
    }
}
