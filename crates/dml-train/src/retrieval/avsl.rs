//! Retrieval with AVSL's overall distance `d̂` (Zhang et al., Eq. 9): every image of a split is
//! reduced to its [`AvslBank`] row (per-level normalised embeddings and CAM certainties), the
//! first-stage ranking is by the concatenated level embedding (squared distance `Σ_l d^l`), and
//! the head of each query's list is re-scored with `d̂` through the same [`Reranker`] hook DIML's
//! re-ranking uses: all of it for sets up to `avsl.exact_limit` images (an exact evaluation), the
//! top `avsl.rerank_k` above. Memory is the banks (`2 Σ_l r_l` floats per image) plus the
//! evaluator's neighbour lists, whatever the set's size.

use std::sync::Arc;

use burn::tensor::Device;
use dml_data::ImageDataset;
use dml_eval::{Neighbour, Reranker};
use dml_explain::avsl::certainty::Certainty;
use dml_explain::avsl::scorer::{AvslBank, AvslScorer};
use dml_models::EmbeddingModel;

use crate::avsl_module::AvslModule;
use crate::config::AvslConfig;
use crate::data::EvalData;
use crate::error::TrainError;
use crate::metrics::{Metrics, REPORTED};

use super::embed::{SplitEmbeddings, each_batch};
use super::score as scoring;

/// The banks of one split: their concatenated embeddings and labels for the first stage, and the
/// bank `d̂` reads.
pub struct AvslSplit {
    /// The concatenated level embeddings `[rows, Σ r]` and the labels.
    pub embeddings: SplitEmbeddings,
    /// The per-level embeddings and certainties.
    pub bank: AvslBank,
}

/// Embeds every image of `dataset` with the backbone of `model` and the AVSL embedder of `module`
/// (both in inference mode, on `device`).
pub fn embed(
    model: &EmbeddingModel,
    module: &AvslModule,
    certainty: Certainty,
    dataset: &Arc<ImageDataset>,
    batch_size: usize,
    threads: usize,
    device: &Device,
) -> Result<AvslSplit, TrainError> {
    let mut bank = AvslBank::new();
    let labels = each_batch(dataset, batch_size, threads, device, |images, items| {
        let maps = model.backbone.forward_features(images);
        let outputs = module.embedder.forward(&maps);
        bank.push(&outputs, certainty).map_err(|e| {
            TrainError::NonFinite(format!(
                "AVSL embedding of images {}..={} of the split: {e}",
                items.first().copied().unwrap_or(0),
                items.last().copied().unwrap_or(0)
            ))
        })
    })?;
    let dim = bank.dims().iter().sum();
    Ok(AvslSplit {
        embeddings: SplitEmbeddings {
            data: bank.concatenated(),
            dim,
            labels,
            locals: None,
        },
        bank,
    })
}

/// The scorer of a trained module: its edges' top-k normalisation `W̃` and its reliability.
pub fn scorer(module: &AvslModule, config: &AvslConfig) -> Result<AvslScorer, TrainError> {
    let fail = |e| TrainError::method("avsl", e);
    let links = module.memory.stars(config.topk).map_err(fail)?;
    AvslScorer::new(&links, &module.reliability.regressions(), config.gamma).map_err(fail)
}

/// `d̂` as the evaluator's [`Reranker`]: the first `depth` neighbours of each query are re-scored.
pub struct AvslReranker<'a> {
    /// The trained graph.
    pub scorer: &'a AvslScorer,
    /// The query rows' bank.
    pub query: &'a AvslBank,
    /// The reference rows' bank.
    pub reference: &'a AvslBank,
    /// Neighbours re-scored per query.
    pub depth: usize,
}

impl Reranker for AvslReranker<'_> {
    fn depth(&self) -> usize {
        self.depth
    }

    fn rerank(&self, query: usize, neighbours: &mut [Neighbour]) {
        let rows: Vec<u32> = neighbours.iter().map(|nb| nb.index).collect();
        let mut scores = vec![0.0f32; rows.len()];
        self.scorer
            .distances(self.query, query, self.reference, &rows, &mut scores);
        for (nb, s) in neighbours.iter_mut().zip(scores) {
            nb.score = s;
        }
    }
}

/// How `d̂` is applied to a split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Depth {
    /// Only the concatenated level embedding (no `d̂`).
    Off,
    /// The top `K` of each query re-scored with `d̂`.
    Top(usize),
    /// Every reference scored with `d̂`.
    Exact,
}

impl Depth {
    /// The run's choice for a set of `images` images: exact up to `avsl.exact_limit`, else the top
    /// `avsl.rerank_k`.
    pub fn for_size(config: &AvslConfig, images: usize) -> Self {
        if images <= config.exact_limit {
            Depth::Exact
        } else {
            Depth::Top(config.rerank_k)
        }
    }
}

/// Scores query banks against reference banks (`None`: the query set is the reference set).
pub fn score(
    scorer: &AvslScorer,
    query: &AvslSplit,
    gallery: Option<&AvslSplit>,
    depth: Depth,
) -> Result<Metrics, TrainError> {
    score_report(scorer, query, gallery, depth, &REPORTED).map(|r| Metrics::from_report(&r))
}

/// [`score`] computing any `metrics`, as the full report.
pub fn score_report(
    scorer: &AvslScorer,
    query: &AvslSplit,
    gallery: Option<&AvslSplit>,
    depth: Depth,
    metrics: &[dml_eval::Metric],
) -> Result<dml_eval::AccuracyReport, TrainError> {
    let reference = gallery.unwrap_or(query);
    scorer
        .check(&query.bank, "query")
        .and_then(|()| scorer.check(&reference.bank, "reference"))
        .map_err(|e| TrainError::method("avsl", e))?;
    let depth = match depth {
        Depth::Off => None,
        Depth::Top(k) => Some(k),
        Depth::Exact => Some(reference.bank.rows()),
    };
    let reranker = depth.map(|depth| AvslReranker {
        scorer,
        query: &query.bank,
        reference: &reference.bank,
        depth,
    });
    scoring::score_report(
        &query.embeddings,
        gallery.map(|g| &g.embeddings),
        dml_eval::Distance::Euclidean,
        reranker.as_ref().map(|r| r as &dyn Reranker),
        metrics,
    )
}

/// Embeds and scores `data` with `d̂` (the run's [`Depth::for_size`]).
#[allow(clippy::too_many_arguments)]
pub fn evaluate(
    model: &EmbeddingModel,
    module: &AvslModule,
    config: &AvslConfig,
    data: &EvalData,
    batch_size: usize,
    threads: usize,
    device: &Device,
) -> Result<Metrics, TrainError> {
    let scorer = scorer(module, config)?;
    let (query, gallery) =
        data.embed_each(|ds| embed(model, module, config.certainty, ds, batch_size, threads, device))?;
    let references = gallery.as_ref().unwrap_or(&query).bank.rows();
    score(&scorer, &query, gallery.as_ref(), Depth::for_size(config, references))
}
