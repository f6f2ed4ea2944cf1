//! Embedding a split with a model and scoring retrieval on it.

use std::sync::Arc;

use burn::tensor::{Device, Tensor, TensorData};
use dml_data::{BatchLoader, BatchSampler, ImageDataset, LoaderConfig, Manifest, ShuffledSampler, Split};
use dml_eval::{AccuracyConfig, Distance, Embeddings, EvalSets, KPolicy, Metric};
use dml_models::EmbeddingModel;
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
}

impl SplitEmbeddings {
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
/// inference mode (batch norm with running statistics) on `device`.
pub fn embed(
    model: &EmbeddingModel,
    dataset: &Arc<ImageDataset>,
    batch_size: usize,
    threads: usize,
    device: &Device,
) -> Result<SplitEmbeddings, TrainError> {
    let sampler = ShuffledSampler::new(dataset.len(), batch_size, false, false, 0)?;
    let loader = BatchLoader::new(
        dataset.clone(),
        sampler.batches(0),
        0,
        &LoaderConfig { threads, prefetch: 2 },
    )?;
    let mut data = Vec::new();
    let mut labels = Vec::with_capacity(dataset.len());
    let mut dim = 0;
    for batch in loader {
        let batch = batch?;
        let images = Tensor::<4>::from_data(TensorData::new(batch.images, batch.shape), device);
        let out = model.forward(images);
        dim = out.dims()[1];
        let values = out
            .into_data()
            .try_to_vec::<f32>()
            .map_err(|e| TrainError::Config(format!("cannot read embeddings back: {e:?}")))?;
        if let Some(i) = values.iter().position(|v| !v.is_finite()) {
            return Err(TrainError::Config(format!(
                "the model produced a non-finite embedding value for image {} of the split",
                batch.items[i / dim.max(1)]
            )));
        }
        data.extend(values);
        labels.extend(batch.labels);
    }
    Ok(SplitEmbeddings { data, dim, labels })
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
            let e = embed(model, ds, batch_size, threads, device)?;
            score(&e, None, distance, None)
        }
        EvalData::QueryGallery { query, gallery } => {
            let q = embed(model, query, batch_size, threads, device)?;
            let g = embed(model, gallery, batch_size, threads, device)?;
            score(&q, Some(&g), distance, None)
        }
    }
}
