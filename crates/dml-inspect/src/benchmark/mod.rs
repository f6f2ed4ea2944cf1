//! `train explain benchmark`: every explanation method of a run scored against ground truth (the
//! rendered sets' object masks, and the parts set's parts through counterfactual renders), against
//! the model itself (ROAD's curves of the pair's similarity, cascading parameter randomisation,
//! partner sensitivity) and next to baselines that know nothing of the model (a uniform map, a
//! random map, a centre prior, an edge detector), on N same-class and N different-class test pairs.
//!
//! - [`methods`](MethodSettings): the methods, each a map of the query explaining its similarity
//!   to the partner;
//! - [`baseline_map`]: the baselines;
//! - the table's metrics ([`METRICS`]) and per-pair records ([`PairRecord`]), their means with 95 %
//!   intervals ([`Cell`]), the figure, and the staged output folder.

mod baselines;
mod command;
mod figure;
mod ground_truth;
mod methods;
mod scores;
mod summary;
mod types;

pub use baselines::{BASELINES, baseline_map};
pub use command::{BenchmarkReport, BenchmarkRequest, RunBenchmark, benchmark};
pub use methods::MethodSettings;
pub use scores::RoadSettings;
pub use summary::{CascadeTable, Cell, Row, Table};
pub use types::{METRICS, Metric, PairRecord, RANDOMISATION_METRICS, RandomisationRecord, Scores, TOP_K_FRACTION};
