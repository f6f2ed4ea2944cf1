//! The `train` package: the training and evaluation tools over the `dml-*` libraries.
//!
//! A run is described by a [`config::TrainConfig`] (the embedded default, a TOML file and
//! command-line overrides) and lives in a run directory holding the resolved
//! `config.toml`, `metrics.jsonl` and atomic checkpoints ([`checkpoint`]). The device is
//! chosen at run time ([`device::parse_device`]); the same code path serves flex,
//! ndarray, wgpu and cuda.
#![warn(missing_docs)]

pub mod analyze;
pub mod avsl;
pub mod avsl_eval;
pub mod checkpoint;
pub mod config;
pub mod data;
pub mod device;
pub mod diml;
pub mod error;
pub mod eval;
pub mod evaluate;
pub mod explain;
pub mod explain_avsl;
pub mod host_adam;
pub mod mining;
pub mod npy;
pub mod paper_miner;
pub mod report;
pub mod rerank;
pub mod trainer;

pub use config::{Shortcuts, TrainConfig};
pub use error::TrainError;
pub use trainer::{Learner, RunOptions, RunSummary, train};
