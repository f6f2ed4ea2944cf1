//! Writing a view's `report.json` and `report.html` beside its figures.

use std::path::Path;

use crate::error::InspectError;
use crate::io::write_json;

use super::html;
use super::pair_report::PairReport;
use super::query_report::QueryReport;

/// Writes `text` to `path` atomically.
fn write_page(path: &Path, text: &str) -> Result<(), InspectError> {
    dml_data::write_atomic(path, text.as_bytes()).map_err(|e| InspectError::io(path, e))
}

/// Writes a pair's `report.json` and `report.html` into `dir` (where its figures are); `back` links
/// the page to the report that opened it.
pub fn pair_files(dir: &Path, report: &PairReport, run: &Path, back: Option<&str>) -> Result<(), InspectError> {
    write_json(&dir.join("report.json"), report)?;
    write_page(
        &dir.join("report.html"),
        &html::pair_page(report, &run.display().to_string(), back),
    )
}

/// Writes a query's `report.html` and `report.json` into `dir` (where its pair views are).
pub fn query_files(dir: &Path, report: &QueryReport) -> Result<(), InspectError> {
    write_page(&dir.join("report.html"), &html::query_page(report))?;
    write_json(&dir.join("report.json"), report)
}
