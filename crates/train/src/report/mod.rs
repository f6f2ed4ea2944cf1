//! `train explain report`: every explanation method of the workspace side by side, for a pair of
//! images or for a query and its retrievals, as one self-contained HTML page with its figures and a
//! `report.json` of every number shown.
//!
//! * [`command`]: the request, the two modes and the atomic output folder around them;
//! * [`pair`]: the methods applied to one pair ([`PairReport`]);
//! * [`query`]: the three rankings of a query and the pair view of each hit ([`QueryReport`]);
//! * [`figures`]: the PNG figures of a pair; [`html`]: the pages; [`output`]: the staging folder.

pub mod command;
pub mod figures;
pub mod html;
pub mod output;
pub mod pair;
pub mod query;

pub(crate) use command::write_pair_files;
pub use command::{ReportMode, ReportOutcome, ReportRequest, ReportResult, explain_report};
pub use pair::{Availability, PairExplainer, PairReport, ReportOptions};
pub use query::{QueryOptions, QueryReport};
