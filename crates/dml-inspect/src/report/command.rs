//! What `train explain report` is asked to do and how its folder is produced: the run's model is
//! loaded once, the pair or query view is written into a staging folder beside the destination, and
//! only a complete report replaces the destination.

use std::path::PathBuf;
use std::time::Instant;

use dml_train::{Progress, RunRef};

use crate::error::InspectError;
use crate::io::existing_images;

use super::output::Staging;
use super::pair::PairExplainer;
use super::pair_report::{PairReport, ReportOptions};
use super::query::query_report;
use super::query_report::{QueryOptions, QueryReport};
use super::write;

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
    /// The run, its checkpoint and the device.
    pub run: RunRef,
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

/// Builds the report of `req` (see the module documentation) into `req.out`.
pub fn explain_report(req: &ReportRequest, progress: &dyn Progress) -> Result<ReportResult, InspectError> {
    let started = Instant::now();
    // Cheap checks of the inputs come before loading the model, so a typo fails at once.
    if let ReportMode::Pair(images) = &req.mode {
        existing_images(images.iter().map(PathBuf::as_path))?;
    }
    if let ReportMode::Query(q) = &req.mode
        && !q.query.is_file()
    {
        return Err(InspectError::Argument(format!(
            "query image {}: no such file",
            q.query.display()
        )));
    }
    let run = req.run.load(progress)?;
    let run_dir = &req.run.run;
    let mut explainer = PairExplainer::new(&run, run_dir, req.options.clone(), progress)?;
    let staging = Staging::new(&req.out)?;
    let outcome = match &req.mode {
        ReportMode::Pair(images) => {
            let report = explainer.explain([&images[0], &images[1]], ["image 1", "image 2"], staging.dir())?;
            write::pair_files(staging.dir(), &report, run_dir, None)?;
            ReportOutcome::Pair(Box::new(report))
        }
        ReportMode::Query(q) => {
            ReportOutcome::Query(Box::new(query_report(&mut explainer, run_dir, q, staging.dir())?))
        }
    };
    let dir = staging.commit()?;
    Ok(ReportResult {
        outcome,
        dir,
        seconds: started.elapsed().as_secs_f64(),
    })
}
