//! Embedding a dataset with a model in inference mode: global embeddings and, for DIML
//! re-ranking, local ones.

use std::sync::Arc;

use burn::tensor::{Device, Tensor, TensorData};
use dml_data::{BatchLoader, BatchSampler, ImageDataset, LoaderConfig, ShuffledSampler};
use dml_eval::Embeddings;
use dml_models::EmbeddingModel;
use dml_ot::GridPool;

use crate::error::TrainError;

/// The embeddings of one split.
#[derive(Debug, Clone)]
pub struct SplitEmbeddings {
    /// Row-major `[rows, dim]`.
    pub data: Vec<f32>,
    /// Embedding dimension.
    pub dim: usize,
    /// Class id of each row (the manifest's ids).
    pub labels: Vec<u32>,
    /// DIML's local embeddings of each row, when requested from [`embed`].
    pub locals: Option<LocalEmbeddings>,
}

/// The local embeddings of a split: the last feature map reduced to `G × G` and projected by the
/// head's linear layer at every location (DIML's `z`, Eq. 2), for structural re-ranking.
#[derive(Debug, Clone)]
pub struct LocalEmbeddings {
    /// Row-major `[rows, dim, locations]`, the layout [`dml_ot::FeatureBank::maps`] takes.
    pub data: Vec<f32>,
    /// Locations per image (`G·G`).
    pub locations: usize,
}

impl SplitEmbeddings {
    /// The rows as a [`dml_ot::FeatureBank`]; `None` without local embeddings.
    pub fn feature_bank(&self) -> Option<dml_ot::FeatureBank<'_>> {
        self.locals.as_ref().map(|l| dml_ot::FeatureBank {
            maps: &l.data,
            embeddings: &self.data,
            rows: self.rows(),
            channels: self.dim,
            locations: l.locations,
            embedding_dim: self.dim,
        })
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.labels.len()
    }

    /// The `dml-eval` view of the rows.
    pub fn view(&self) -> Result<Embeddings<'_>, TrainError> {
        Ok(Embeddings::new(&self.data, self.rows(), self.dim)?)
    }
}

/// Embeds every image of `dataset` in order, `batch_size` at a time, with the model in
/// inference mode (batch norm with running statistics) on `device`. With `grid`, the last
/// feature map is also reduced to `G × G` and projected to local embeddings
/// ([`SplitEmbeddings::locals`]).
pub fn embed(
    model: &EmbeddingModel,
    dataset: &Arc<ImageDataset>,
    batch_size: usize,
    threads: usize,
    device: &Device,
    grid: Option<&GridPool>,
) -> Result<SplitEmbeddings, TrainError> {
    let mut data = Vec::new();
    let mut dim = 0;
    let mut locals = grid.map(|g| LocalEmbeddings {
        data: Vec::new(),
        locations: g.grid() * g.grid(),
    });
    let labels = each_batch(dataset, batch_size, threads, device, |images, items| {
        let (out, maps) = model.forward_with_features(images);
        dim = out.dims()[1];
        let values = read_finite(out.into_data(), "embedding", items, dim)?;
        data.extend(values);
        if let (Some(pool), Some(locals)) = (grid, locals.as_mut()) {
            // `[B, G·G, D]` → `[B, D, G·G]`, the channel-major layout of a feature map.
            let z = model
                .head
                .project_locations(dml_ot::to_locations(pool.forward(maps.last().clone())))
                .swap_dims(1, 2);
            let per_row = dim * locals.locations;
            locals
                .data
                .extend(read_finite(z.into_data(), "local embedding", items, per_row)?);
        }
        Ok(())
    })?;
    Ok(SplitEmbeddings {
        data,
        dim,
        labels,
        locals,
    })
}

/// Runs `f` on every batch of `dataset` in order (`batch_size` images as a `[B, 3, H, W]` tensor on
/// `device`, with their dataset indices) and returns the labels of all images in that order.
pub fn each_batch(
    dataset: &Arc<ImageDataset>,
    batch_size: usize,
    threads: usize,
    device: &Device,
    mut f: impl FnMut(Tensor<4>, &[usize]) -> Result<(), TrainError>,
) -> Result<Vec<u32>, TrainError> {
    let sampler = ShuffledSampler::new(dataset.len(), batch_size, false, false, 0)?;
    let loader = BatchLoader::new(
        dataset.clone(),
        sampler.batches(0),
        0,
        &LoaderConfig { threads, prefetch: 2 },
    )?;
    let mut labels = Vec::with_capacity(dataset.len());
    for batch in loader {
        let batch = batch?;
        let images = Tensor::<4>::from_data(TensorData::new(batch.images, batch.shape), device);
        f(images, &batch.items)?;
        labels.extend(batch.labels);
    }
    Ok(labels)
}

/// Reads a tensor back as `f32`, failing on the first non-finite value with the dataset index
/// of its image (`per_row` values per image).
fn read_finite(data: TensorData, what: &str, items: &[usize], per_row: usize) -> Result<Vec<f32>, TrainError> {
    let values = data
        .try_to_vec::<f32>()
        .map_err(|e| TrainError::NonFinite(format!("cannot read {what}s back: {e:?}")))?;
    if let Some(i) = values.iter().position(|v| !v.is_finite()) {
        return Err(TrainError::NonFinite(format!(
            "the model produced a non-finite {what} value for image {} of the split",
            items[i / per_row.max(1)]
        )));
    }
    Ok(values)
}
