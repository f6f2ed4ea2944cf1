//! The geodesic factor of PPGML (Kim & Song 2022, "Probabilistic Principal Geodesic Deep
//! Metric Learning", Sec. III-A): host-side geometry with nalgebra, one concept per file.
//!
//! - [`isomap`]: k-NN graph, shortest paths, classical MDS;
//! - [`pip`]: the PIP criterion that picks the LDS dimension (Eq. 5);
//! - [`stiefel`]: the Stiefel manifold, the lifting map (Eq. 6) and the intrinsic mean;
//! - [`lda`]: the discriminant eigenpairs and their Rayleigh-quotient gradient;
//! - [`factor`]: the whole factor `ϕ_s` of a batch (Eq. 7–8), its fallback and counters.
//!
//! The GML losses (`gml_tri`, `gml_contrastive`, `gml_ms`, `gml_pa`) compute it from the
//! batch's detached distances inside their evaluation.

pub mod factor;
pub mod isomap;
pub mod lda;
pub mod pip;
pub mod stiefel;

pub use factor::{
    Degeneracy, FactorCounts, FactorScale, GeodesicFactor, GeodesicFactorConfig, euclidean_from_matrix, factor_counts,
    geodesic_factor,
};
