//! Embedding a split with a model and scoring retrieval on it.

use std::sync::Arc;

use burn::tensor::{Device, Tensor, TensorData};
use dml_data::{BatchLoader, BatchSampler, ImageDataset, LoaderConfig, Manifest, ShuffledSampler, Split};
use dml_eval::{AccuracyConfig, Distance, Embeddings, EvalSets, KPolicy, Metric};
use dml_models::EmbeddingModel;
use dml_ot::GridPool;
use serde::{Deserialize, Serialize};

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

/// The images a reported evaluation runs on: one set (every image queries all others)
/// or, for datasets such as In-shop, separate query and gallery sets.
#[derive(Debug, Clone)]
pub enum EvalData {
    /// Query = reference.
    Single(Arc<ImageDataset>),
    /// Query against gallery.
    QueryGallery {
        /// The query images.
        query: Arc<ImageDataset>,
        /// The gallery images.
        gallery: Arc<ImageDataset>,
    },
}

impl EvalData {
    /// The images of `split`; `test` on a manifest without test rows but with query and
    /// gallery rows means query against gallery. `None` when the split has no image.
    pub fn of_split(
        manifest: &Arc<Manifest>,
        split: Split,
        transform: &dml_data::TransformConfig,
    ) -> Result<Option<Self>, TrainError> {
        let get = |s| crate::data::split_dataset(manifest, s, transform.clone());
        if let Some(ds) = get(split)? {
            return Ok(Some(Self::Single(ds)));
        }
        if split == Split::Test
            && let (Some(query), Some(gallery)) = (get(Split::Query)?, get(Split::Gallery)?)
        {
            return Ok(Some(Self::QueryGallery { query, gallery }));
        }
        Ok(None)
    }
}

/// Retrieval metrics of one evaluation (PML `AccuracyCalculator` semantics).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    /// Precision@1.
    pub precision_at_1: f64,
    /// R-Precision.
    pub r_precision: f64,
    /// MAP@R.
    pub map_at_r: f64,
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
        .map_err(|e| TrainError::Config(format!("cannot read {what}s back: {e:?}")))?;
    if let Some(i) = values.iter().position(|v| !v.is_finite()) {
        return Err(TrainError::Config(format!(
            "the model produced a non-finite {what} value for image {} of the split",
            items[i / per_row.max(1)]
        )));
    }
    Ok(values)
}

/// The distance retrieval uses: cosine for normalised embeddings, else Euclidean.
pub fn distance_for(normalized: bool) -> Distance {
    if normalized {
        Distance::Cosine
    } else {
        Distance::Euclidean
    }
}

/// The accuracy configuration of every reported evaluation.
pub fn accuracy_config(distance: Distance) -> AccuracyConfig {
    AccuracyConfig::new(distance)
        .with_metrics([
            Metric::PrecisionAt1,
            Metric::RPrecision,
            Metric::MeanAveragePrecisionAtR,
        ])
        .with_k(KPolicy::MaxBinCount)
}

/// Scores query embeddings against a gallery (`None`: the query set is the gallery).
pub fn score(
    query: &SplitEmbeddings,
    gallery: Option<&SplitEmbeddings>,
    distance: Distance,
    reranker: Option<&dyn dml_eval::Reranker>,
) -> Result<Metrics, TrainError> {
    let sets = match gallery {
        None => EvalSets::QueryIsReference {
            embeddings: query.view()?,
            labels: &query.labels,
        },
        Some(g) => EvalSets::QueryGallery {
            query: query.view()?,
            query_labels: &query.labels,
            gallery: g.view()?,
            gallery_labels: &g.labels,
        },
    };
    let config = accuracy_config(distance);
    let report = match reranker {
        None => dml_eval::evaluate(&sets, &config)?,
        Some(r) => dml_eval::evaluate_with_reranker(&sets, &config, r)?,
    };
    let get = |v: Option<f64>| v.unwrap_or(f64::NAN);
    Ok(Metrics {
        precision_at_1: get(report.precision_at_1),
        r_precision: get(report.r_precision),
        map_at_r: get(report.mean_average_precision_at_r),
    })
}

/// Embeds and scores `data` with the model in inference mode.
pub fn evaluate(
    model: &EmbeddingModel,
    data: &EvalData,
    batch_size: usize,
    threads: usize,
    device: &Device,
    normalized: bool,
) -> Result<Metrics, TrainError> {
    let distance = distance_for(normalized);
    match data {
        EvalData::Single(ds) => {
            let e = embed(model, ds, batch_size, threads, device, None)?;
            score(&e, None, distance, None)
        }
        EvalData::QueryGallery { query, gallery } => {
            let q = embed(model, query, batch_size, threads, device, None)?;
            let g = embed(model, gallery, batch_size, threads, device, None)?;
            score(&q, Some(&g), distance, None)
        }
    }
}
