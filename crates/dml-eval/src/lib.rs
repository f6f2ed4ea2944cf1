//! Evaluation of deep-metric-learning embeddings: exact, chunked k-NN retrieval metrics with the
//! semantics of pytorch-metric-learning 2.x `AccuracyCalculator`, Recall@K, and clustering scores
//! (NMI, AMI) with scikit-learn's semantics.
//!
//! * [`Embeddings`] wraps a row-major `&[f32]` after validating its shape and finiteness.
//! * [`evaluate`] computes the metrics chosen in an [`AccuracyConfig`] for an [`EvalSets`] (query set =
//!   reference set with self-matches excluded by index, or separate query and gallery sets) and returns
//!   an [`AccuracyReport`] that serialises to JSON. [`evaluate_with_reranker`] applies a [`Reranker`] to
//!   the head of every neighbour list first.
//! * [`knn`] / [`knn_with`] return plain neighbour lists for small `k`.
//! * [`kmeans`], [`normalized_mutual_info`] and [`adjusted_mutual_info`] are the clustering pieces.
//!
//! The search processes blocks of queries against all references and keeps only each query's candidates,
//! so an evaluation of 60,000 × 128 embeddings with `k` ≈ 6,000 never holds an n × n distance matrix or
//! n × k neighbour lists; neighbours are ordered by `(distance, reference index)`, so ties are broken by
//! the lower index. Distances come from a fused AVX-512 kernel when the CPU has AVX-512F (the `gemm`
//! crate only uses AVX2/FMA on stable Rust) and from the `gemm` crate otherwise; [`SearchOptions`] sets
//! the block size, thread count and kernel, none of which changes any result.
#![warn(missing_docs)]

mod cluster;
mod distance;
mod embeddings;
mod error;
mod kernel;
mod knn;
mod metrics;
mod mutual_info;
mod rerank;
mod search;
mod select;

pub use cluster::{KMeansConfig, KMeansResult, kmeans};
pub use distance::Distance;
pub use embeddings::Embeddings;
pub use error::EvalError;
pub use knn::{Neighbours, knn, knn_with};
pub use metrics::{AccuracyConfig, AccuracyReport, EvalSets, KPolicy, Metric, evaluate, evaluate_with_reranker};
pub use mutual_info::{adjusted_mutual_info, ln_gamma, normalized_mutual_info};
pub use rerank::{Neighbour, Reranker};
pub use search::{Kernel, SearchOptions, SearchStats};
