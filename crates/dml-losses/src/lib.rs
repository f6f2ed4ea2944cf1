//! Distances, miners, reducers and metric-learning losses at pytorch-metric-learning (PML)
//! parity, plus the quadruplet loss.
//!
//! The decomposition follows PML with types instead of strings: a [`Distance`] (which knows
//! whether it is a similarity) turns embeddings `[N, D]` into an `[N, N]` matrix; an
//! optional [`Miner`] selects typed [`Pairs`] or [`Triplets`] from a detached copy of it;
//! the loss computes per-element values on the graph; a [`Reducer`] turns them into the
//! scalar of [`LossOutput`]. Everything is selected by name from TOML through
//! [`LossConfig`] and [`MinerConfig`]; learnable state (proxies, class weights, β) lives in
//! the [`MetricLoss`] module so that training can give it its own learning-rate group.
//!
//! Each loss is also a module of its own (`dml_losses::margin`, `dml_losses::proxy_anchor`,
//! …) with its configuration, its facts as a [`RegisteredLoss`] and a [`LossModule`] type
//! (`MarginLoss`, `ProxyAnchorLoss`, …) that builds and evaluates it without the catalogue.
#![warn(missing_docs)]

mod attach;
mod distance;
mod error;
mod gemm;
pub mod geodesic;
mod host;
mod host_grad;
mod losses;
mod miners;
mod ops;
mod reducer;
mod tuples;

pub use distance::Distance;
pub use error::LossError;
pub use host::HostMatrix;
pub use losses::*;
pub use miners::*;
pub use reducer::Reducer;
pub use tuples::{Pairs, Triplets, Tuples};
