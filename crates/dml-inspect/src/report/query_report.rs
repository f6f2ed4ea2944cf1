//! What the query view of a report holds: the query's hits by every ranking ([`QueryReport`],
//! written as `report.json`).

use std::path::PathBuf;

use serde::Serialize;

use super::pair_report::Availability;

/// What the query view is asked to do.
#[derive(Debug, Clone)]
pub struct QueryOptions {
    /// The query image.
    pub query: PathBuf,
    /// The split searched (its images are the gallery; a dataset with query and gallery rows
    /// searches its gallery for `test`).
    pub split: String,
    /// Hits shown per ranking.
    pub top: usize,
    /// Neighbours by global distance that DIML re-scores (its truncation number K).
    pub diml_k: usize,
}

/// One retrieved image.
#[derive(Debug, Clone, Serialize)]
pub struct Hit {
    /// 1-based rank in its list.
    pub rank: usize,
    /// Its row in the searched split (manifest order).
    pub row: usize,
    /// The image file.
    pub path: PathBuf,
    /// Its class id.
    pub label: u32,
    /// Its class name.
    pub class_name: String,
    /// Whether it has the query's class (`None` when the query's class is unknown).
    pub correct: Option<bool>,
    /// The ranking's score (see [`Ranking::score`]).
    pub score: f64,
    /// The hit as the model sees it, relative to the query report.
    pub image: String,
    /// The pair view of query and hit, relative to the query report.
    pub pair_page: String,
    /// `(method, figure)` thumbnails of the pair view, relative to the query report.
    pub thumbnails: Vec<(String, String)>,
}

/// The hits of one ranking, best first.
#[derive(Debug, Clone, Serialize)]
pub struct HitList {
    /// The hits.
    pub hits: Vec<Hit>,
}

/// One ranking method's list.
#[derive(Debug, Clone, Serialize)]
pub struct Ranking {
    /// `global`, `diml` or `avsl`.
    pub method: String,
    /// Its heading.
    pub title: String,
    /// What the score is and which way is better.
    pub score: String,
    /// The hits, or why the run has no such ranking.
    pub hits: Availability<HitList>,
}

/// Everything the query view shows (`report.json` of a query report).
#[derive(Debug, Clone, Serialize)]
pub struct QueryReport {
    /// The run directory.
    pub run: String,
    /// The checkpoint explained.
    pub checkpoint: PathBuf,
    /// The query file.
    pub query: PathBuf,
    /// The query as the model sees it, relative to the report.
    pub query_image: String,
    /// The query's class id, when the file is one of the dataset's images.
    pub query_label: Option<u32>,
    /// Its class name, likewise.
    pub query_class: Option<String>,
    /// The split searched.
    pub split: String,
    /// The dataset.
    pub dataset: String,
    /// Images searched (the query itself excluded when it is one of them).
    pub gallery_size: usize,
    /// Hits per ranking.
    pub top: usize,
    /// Global, DIML and AVSL rankings.
    pub rankings: Vec<Ranking>,
}
