//! What every inspection command shares: reading a tuple of images as a run's evaluation transform
//! sees them, reading tensors back, and writing JSON atomically.

use std::path::{Path, PathBuf};

use burn::tensor::Tensor;
use dml_data::{Pipeline, decode_rgb};
use dml_explain::render::denormalize;
use dml_train::TrainConfig;
use rand::SeedableRng;
use serde::Serialize;

use crate::error::InspectError;

/// The images of one tuple, decoded and transformed as evaluation transforms them.
pub struct TupleImages {
    /// `[n, 3, H, W]` normalised, row-major.
    pub values: Vec<f32>,
    /// Number of images.
    pub n: usize,
    /// Rows of every image.
    pub height: usize,
    /// Columns of every image.
    pub width: usize,
}

impl TupleImages {
    /// Every image as shown to a person: the run's normalisation undone.
    pub fn rgb(&self, config: &TrainConfig) -> Result<Vec<image::RgbImage>, InspectError> {
        let plane = 3 * self.height * self.width;
        self.values
            .chunks(plane)
            .map(|chw| denormalize(chw, self.height, self.width, config.data.mean, config.data.std))
            .collect::<Result<_, _>>()
            .map_err(InspectError::from)
    }
}

/// Decodes `paths` and transforms them with `pipeline` (a run's evaluation transform) into one
/// tuple; images that transform to different sizes are an error naming the image.
pub fn load_images(paths: &[PathBuf], pipeline: &Pipeline) -> Result<TupleImages, InspectError> {
    let mut values = Vec::new();
    let mut size = None;
    for path in paths {
        let image = decode_rgb(path)?;
        let (h, w) = pipeline.output_size(image.width(), image.height());
        // The evaluation transform has no random choice; the generator is only its argument.
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
        values.extend(pipeline.apply(&image, &mut rng));
        match size {
            None => size = Some((h as usize, w as usize)),
            Some(s) if s != (h as usize, w as usize) => {
                return Err(InspectError::Argument(format!(
                    "{}: transforms to {h}x{w}, but the first image to {}x{}; the run's data.image_size should make them equal",
                    path.display(),
                    s.0,
                    s.1
                )));
            }
            Some(_) => {}
        }
    }
    let (height, width) = size.ok_or_else(|| InspectError::Argument("no image given".into()))?;
    Ok(TupleImages {
        values,
        n: paths.len(),
        height,
        width,
    })
}

/// The values of a tensor as `f32`, row-major (a host read).
pub fn values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data().iter::<f32>().collect()
}

/// Writes `value` as pretty JSON to `path` atomically (staged, then renamed).
pub fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), InspectError> {
    let text = serde_json::to_string_pretty(value).map_err(|e| InspectError::io(path, e))?;
    dml_data::write_atomic(path, text.as_bytes()).map_err(|e| InspectError::io(path, e))?;
    Ok(())
}

/// Checks that every image of a request exists, naming the first that does not.
pub fn existing_images<'a>(paths: impl IntoIterator<Item = &'a Path>) -> Result<(), InspectError> {
    for path in paths {
        if !path.is_file() {
            return Err(InspectError::Argument(format!(
                "image {}: no such file",
                path.display()
            )));
        }
    }
    Ok(())
}
