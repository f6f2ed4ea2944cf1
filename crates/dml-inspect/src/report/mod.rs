//! `train explain report`: every explanation method of the workspace side by side, for a pair of
//! images or for a query and its retrievals, as one self-contained HTML page with its figures and a
//! `report.json` of every number shown.
//!
//! * [`command`]: the request, the two modes and the atomic output folder around them;
//! * [`pair_report`] and [`query_report`]: what the two views hold;
//! * [`pair`]: the methods applied to one pair ([`PairReport`]);
//! * [`query`]: the three rankings of a query and the pair view of each hit ([`QueryReport`]);
//! * [`figures`]: the PNG figures of a pair; [`html`]: the pages; [`write`]: writing a view's
//!   page and JSON; [`output`]: the staging folder.

pub mod command;
pub mod figures;
pub mod html;
pub mod output;
pub mod pair;
pub mod pair_report;
pub mod query;
pub mod query_report;
pub mod write;

pub use command::{ReportMode, ReportOutcome, ReportRequest, ReportResult, explain_report};
pub use pair::PairExplainer;
pub use pair_report::{Availability, PairReport, ReportOptions};
pub use query_report::{QueryOptions, QueryReport};
