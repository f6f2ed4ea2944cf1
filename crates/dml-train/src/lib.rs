//! The run library (as `burn-train` is Burn's): everything a deep-metric-learning run is, with no
//! command line and no printing.
//!
//! - [`config`]: a run's configuration ([`TrainConfig`]: the embedded default, a TOML file, the
//!   shortcut flags and `--set` overrides, resume rules, each loss's paper miner);
//! - [`checkpoint`]: the run directory (`config.toml`, `metrics.jsonl`, atomic checkpoints) and
//!   [`model`]: a run's model restored from one of them ([`model::RunRef`] → [`model::RunModel`]);
//! - [`check`]: a run directory verified without building its model (`train check`);
//! - [`data`]: the dataset of a run (prepared on first use) and its splits;
//! - [`training`]: the loop ([`train`]) with DIML, similarity mining and AVSL in the loss;
//! - [`retrieval`] and [`evaluation`]: embedding a split, scoring retrieval (with DIML or AVSL
//!   re-ranking), the `eval` request and the `.npy` export;
//! - [`embedding`]: a run's embeddings of images or a split as `.npy` (`train embed`);
//! - [`import`]: a model trained in PyTorch (pytorch-metric-learning's trunk and embedder) written
//!   as a run, and [`export`]: a run's trunk and embedder back in PyTorch's layout.
//!
//! Progress and notes reach the caller through [`progress::Progress`], which a command line
//! implements (bars, printed lines) and tests leave [`progress::Silent`]. The device is chosen at
//! run time ([`device::parse_device`]); the same code path serves flex, ndarray, wgpu and cuda.
#![warn(missing_docs)]

pub mod avsl_module;
pub mod check;
pub mod checkpoint;
pub mod config;
pub mod data;
pub mod device;
pub mod embedding;
pub mod error;
pub mod evaluation;
pub mod export;
pub mod import;
pub mod metrics;
pub mod model;
pub mod npy;
pub mod progress;
pub mod retrieval;
pub mod run_lock;
pub mod training;

pub use config::{Shortcuts, TrainConfig};
pub use error::TrainError;
pub use model::{RunModel, RunRef};
pub use progress::{Progress, Silent};
pub use training::{Learner, RunOptions, RunSummary, train};
