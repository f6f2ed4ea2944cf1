//! Inspecting trained runs, over `dml-train`'s run library: why two images are (dis)similar for a
//! model, whether an explanation is right, and whether different losses learn different features.
//!
//! - [`attention`]: similarity attention of a pair, triplet or quadruplet (Zheng et al.);
//! - [`faithfulness`]: its localisation against the synthetic set's object masks and its
//!   deletion curves, next to a centre prior and random erasure;
//! - [`avsl`]: AVSL's similarity graph of two images (Zhang et al.);
//! - [`benchmark`]: every explanation method scored against ground truth, the model itself and
//!   sanity baselines, side by side;
//! - [`report`]: every method side by side for a pair or a query, as one HTML page;
//! - [`analyze`]: Kobs et al.'s comparison of the features of several runs.
//!
//! Every command loads its model through [`dml_train::RunRef`], reads its images and writes its
//! JSON through [`io`], and reports notes through [`dml_train::Progress`]; nothing here prints.
#![warn(missing_docs)]

pub mod analyze;
pub mod attention;
pub mod avsl;
pub mod benchmark;
pub mod error;
pub mod faithfulness;
pub mod io;
pub mod report;
mod triplets;

pub use error::InspectError;
