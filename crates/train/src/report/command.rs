//! What `train explain report` is asked to do and how its folder is produced: the run's model is
//! loaded once, the pair or query view is written into a staging folder beside the destination, and
//! only a complete report replaces the destination.

use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::error::TrainError;
use crate::explain::{load_run_model, write_json};

use super::html;
use super::output::Staging;
use super::pair::{PairExplainer, PairReport, ReportOptions};
use super::query::{QueryOptions, QueryReport, query_report};

/// The two views of the report.
#[derive(Debug, Clone)]
pub enum ReportMode {
    /// Two images explained side by side.
    Pair([PathBuf; 2]),
    /// A query image, its retrievals by every ranking, and the pair view of each hit.
    Query(QueryOptions),
}

/// What `train explain report` is asked to do.
#[derive(Debug, Clone)]
pub struct ReportRequest {
    /// The run directory.
    pub run: PathBuf,
    /// `best`, `latest` or a checkpoint directory.
    pub checkpoint: String,
    /// Device override.
    pub device: Option<String>,
    /// The report's folder (replaced as a whole when the report is complete).
    pub out: PathBuf,
    /// Pair or query.
    pub mode: ReportMode,
    /// The methods' settings.
    pub options: ReportOptions,
}

/// What was written.
#[derive(Debug, Clone)]
pub enum ReportOutcome {
    /// A pair report.
    Pair(Box<PairReport>),
    /// A query report.
    Query(Box<QueryReport>),
}

/// The result of [`explain_report`]: the report, its folder and how long it took.
#[derive(Debug, Clone)]
pub struct ReportResult {
    /// The numbers of the report.
    pub outcome: ReportOutcome,
    /// The folder holding `report.html`, `report.json` and the figures.
    pub dir: PathBuf,
    /// Seconds from loading the model to the committed folder.
    pub seconds: f64,
}

/// Writes a pair's `report.json` and `report.html` into `dir` (where its figures are); `back` links
/// the page to the report that opened it.
pub(crate) fn write_pair_files(
    dir: &Path,
    report: &PairReport,
    run: &Path,
    back: Option<&str>,
) -> Result<(), TrainError> {
    write_json(&dir.join("report.json"), report)?;
    let page = html::pair_page(report, &run.display().to_string(), back);
    dml_data::write_atomic(&dir.join("report.html"), page.as_bytes())?;
    Ok(())
}

/// Builds the report of `req` (see the module documentation) into `req.out`.
pub fn explain_report(req: &ReportRequest) -> Result<ReportResult, TrainError> {
    let started = Instant::now();
    // Cheap checks of the inputs come before loading the model, so a typo fails at once.
    if let ReportMode::Pair(images) = &req.mode {
        for path in images {
            if !path.is_file() {
                return Err(TrainError::Config(format!("image {}: no such file", path.display())));
            }
        }
    }
    if let ReportMode::Query(q) = &req.mode
        && !q.query.is_file()
    {
        return Err(TrainError::Config(format!(
            "query image {}: no such file",
            q.query.display()
        )));
    }
    let run = load_run_model(&req.run, &req.checkpoint, req.device.as_deref())?;
    let mut explainer = PairExplainer::new(&run, &req.run, req.options.clone())?;
    let staging = Staging::new(&req.out)?;
    let outcome = match &req.mode {
        ReportMode::Pair(images) => {
            let report = explainer.explain([&images[0], &images[1]], ["image 1", "image 2"], staging.dir())?;
            write_pair_files(staging.dir(), &report, &req.run, None)?;
            ReportOutcome::Pair(Box::new(report))
        }
        ReportMode::Query(q) => {
            ReportOutcome::Query(Box::new(query_report(&mut explainer, &req.run, q, staging.dir())?))
        }
    };
    let dir = staging.commit()?;
    Ok(ReportResult {
        outcome,
        dir,
        seconds: started.elapsed().as_secs_f64(),
    })
}
