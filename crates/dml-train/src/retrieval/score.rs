//! Scoring retrieval on embedded splits (PML `AccuracyCalculator` semantics through `dml-eval`).

use burn::tensor::Device;
use dml_eval::{AccuracyConfig, AccuracyReport, Distance, EvalSets, KPolicy, Metric};
use dml_models::EmbeddingModel;

use crate::data::EvalData;
use crate::error::TrainError;
use crate::metrics::{Metrics, REPORTED};

use super::embed::{SplitEmbeddings, embed};

/// The distance retrieval uses: cosine for normalised embeddings, else Euclidean.
pub fn distance_for(normalized: bool) -> Distance {
    if normalized {
        Distance::Cosine
    } else {
        Distance::Euclidean
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
    let (query, gallery) = data.embed_each(|ds| embed(model, ds, batch_size, threads, device, None))?;
    score(&query, gallery.as_ref(), distance_for(normalized), None)
}
