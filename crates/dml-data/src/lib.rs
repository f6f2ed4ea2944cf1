//! Datasets for deep metric learning.
//!
//! A dataset is a [`Manifest`]: a CSV file listing every image with its class and split
//! (plus optional property columns, e.g. the rendering parameters of the synthetic set).
//! From it an [`ImageDataset`] decodes and augments images ([`transform`]), a sampler
//! ([`MPerClassSampler`] or [`ShuffledSampler`]) chooses the images of each batch, and a
//! [`BatchLoader`] decodes batches in parallel on a thread pool while earlier batches are
//! consumed, so that a CPU training epoch is not bound by JPEG decoding.
//!
//! Batches are plain row-major `f32` buffers of shape `[B, 3, H, W]`; the training code
//! turns them into tensors of whatever backend it runs on, which keeps this crate free of
//! the deep-learning framework and quick to build for data tooling.
#![warn(missing_docs)]

mod dataset;
mod error;
mod jpeg;
mod loader;
mod manifest;
mod sampler;
pub mod transform;

pub use dataset::{Batch, ImageDataset, decode_rgb, mix};
pub use error::DataError;
pub use jpeg::check_jpeg_structure;
pub use loader::{BatchLoader, LoaderConfig};
pub use manifest::{Manifest, Record, Split, ValidationOptions, write_atomic};
pub use sampler::{BatchSampler, MPerClassSampler, ShuffledSampler};
pub use transform::{Crop, Pipeline, TransformConfig};
