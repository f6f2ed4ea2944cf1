//! Embedding a split with a model and scoring retrieval on it.

use std::sync::Arc;

use burn::tensor::{Device, Tensor, TensorData};
use dml_data::{BatchLoader, BatchSampler, ImageDataset, LoaderConfig, Manifest, ShuffledSampler, Split};
use dml_eval::{AccuracyConfig, AccuracyReport, Distance, Embeddings, EvalSets, KPolicy, Metric};
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

/// The metrics of every reported evaluation (training's `metrics.jsonl`, `eval`'s table by
/// default).
pub const REPORTED: [Metric; 3] = [
    Metric::PrecisionAt1,
    Metric::RPrecision,
    Metric::MeanAveragePrecisionAtR,
];

/// Every metric `dml-eval` computes, as `eval` writes them into `metrics.json`: PML's five k-NN
/// metrics, Recall@1, 2, 4 and 8 (the DML literature's R@K) and NMI / AMI of a k-means clustering.
pub fn all_metrics() -> Vec<Metric> {
    let mut all = Metric::PML_KNN.to_vec();
    all.extend([1, 2, 4, 8].map(Metric::RecallAt));
    all.extend([Metric::Nmi, Metric::Ami]);
    all
}

/// The value of `metric` in `report` (`None` when it was not computed).
pub fn metric_value(report: &AccuracyReport, metric: Metric) -> Option<f64> {
    match metric {
        Metric::PrecisionAt1 => report.precision_at_1,
        Metric::RPrecision => report.r_precision,
        Metric::MeanAveragePrecisionAtR => report.mean_average_precision_at_r,
        Metric::MeanAveragePrecision => report.mean_average_precision,
        Metric::MeanReciprocalRank => report.mean_reciprocal_rank,
        Metric::RecallAt(k) => report.recall_at_k.get(&k).copied(),
        Metric::Nmi => report.nmi,
        Metric::Ami => report.ami,
    }
}

/// The name `eval --metrics` accepts and its table prints for `metric`.
pub fn metric_name(metric: Metric) -> String {
    match metric {
        Metric::PrecisionAt1 => "p@1".into(),
        Metric::RPrecision => "r-precision".into(),
        Metric::MeanAveragePrecisionAtR => "map@r".into(),
        Metric::MeanAveragePrecision => "map".into(),
        Metric::MeanReciprocalRank => "mrr".into(),
        Metric::RecallAt(k) => format!("recall@{k}"),
        Metric::Nmi => "nmi".into(),
        Metric::Ami => "ami".into(),
    }
}

/// Parses `eval --metrics`: a comma-separated list of `p@1`, `r-precision`, `map@r`, `map`, `mrr`,
/// `recall@K` (any K ≥ 1), `nmi`, `ami`, or `all` (every metric of [`all_metrics`]).
pub fn parse_metrics(list: &str) -> Result<Vec<Metric>, TrainError> {
    let mut out = Vec::new();
    for item in list
        .split(',')
        .map(|s| s.trim().to_ascii_lowercase())
        .filter(|s| !s.is_empty())
    {
        let metric = match item.as_str() {
            "all" => {
                out.extend(all_metrics());
                continue;
            }
            "p@1" | "precision@1" => Metric::PrecisionAt1,
            "r-precision" | "r_precision" => Metric::RPrecision,
            "map@r" => Metric::MeanAveragePrecisionAtR,
            "map" => Metric::MeanAveragePrecision,
            "mrr" => Metric::MeanReciprocalRank,
            "nmi" => Metric::Nmi,
            "ami" => Metric::Ami,
            other => match other.strip_prefix("recall@").map(str::parse::<usize>) {
                Some(Ok(k)) if k > 0 => Metric::RecallAt(k),
                _ => {
                    return Err(TrainError::Config(format!(
                        "--metrics: unknown metric {other:?}; expected p@1, r-precision, map@r, map, mrr, \
                         recall@K, nmi, ami or all"
                    )));
                }
            },
        };
        out.push(metric);
    }
    if out.is_empty() {
        return Err(TrainError::Config("--metrics: no metric named".into()));
    }
    let mut unique = Vec::new();
    for m in out {
        if !unique.contains(&m) {
            unique.push(m);
        }
    }
    Ok(unique)
}

impl Metrics {
    /// The reported three of a report (NaN where one was not computed).
    pub fn from_report(report: &AccuracyReport) -> Self {
        let get = |v: Option<f64>| v.unwrap_or(f64::NAN);
        Self {
            precision_at_1: get(report.precision_at_1),
            r_precision: get(report.r_precision),
            map_at_r: get(report.mean_average_precision_at_r),
        }
    }
}

/// The accuracy configuration of an evaluation computing `metrics`.
pub fn accuracy_config(distance: Distance, metrics: &[Metric]) -> AccuracyConfig {
    AccuracyConfig::new(distance)
        .with_metrics(metrics.iter().copied())
        .with_k(KPolicy::MaxBinCount)
}

/// Scores query embeddings against a gallery (`None`: the query set is the gallery) with the
/// [`REPORTED`] metrics.
pub fn score(
    query: &SplitEmbeddings,
    gallery: Option<&SplitEmbeddings>,
    distance: Distance,
    reranker: Option<&dyn dml_eval::Reranker>,
) -> Result<Metrics, TrainError> {
    score_report(query, gallery, distance, reranker, &REPORTED).map(|r| Metrics::from_report(&r))
}

/// [`score`] computing any `metrics`, as the full report.
pub fn score_report(
    query: &SplitEmbeddings,
    gallery: Option<&SplitEmbeddings>,
    distance: Distance,
    reranker: Option<&dyn dml_eval::Reranker>,
    metrics: &[Metric],
) -> Result<AccuracyReport, TrainError> {
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
    let config = accuracy_config(distance, metrics);
    Ok(match reranker {
        None => dml_eval::evaluate(&sets, &config)?,
        Some(r) => dml_eval::evaluate_with_reranker(&sets, &config, r)?,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric_names_parse_back_and_unknown_ones_are_listed() {
        for m in all_metrics() {
            assert_eq!(parse_metrics(&metric_name(m)).unwrap(), vec![m]);
        }
        assert_eq!(parse_metrics("all").unwrap(), all_metrics());
        assert_eq!(
            parse_metrics("p@1, recall@16,p@1").unwrap(),
            vec![Metric::PrecisionAt1, Metric::RecallAt(16)]
        );
        let e = parse_metrics("p@2").unwrap_err().to_string();
        assert!(e.contains("\"p@2\"") && e.contains("recall@K"), "{e}");
    }
}
