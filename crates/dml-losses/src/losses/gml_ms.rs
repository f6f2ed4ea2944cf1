//! GML-MS (Kim & Song 2022, App. I Eq. I.2): the multi-similarity loss with its sums of
//! exponentials scaled by the geodesic factor, per anchor
//! `1/α log(1 + ϕ_s Σ_p e^{-α(S_ap - λ_ms)}) + 1/β log(1 + ϕ_s Σ_n e^{β(S_an - λ_ms)})`,
//! averaged over anchors, minus `ε2 Σ_{i=1}^{kp} λ_i`.
//!
//! Choice: Eq. I.2 prints `e^{-α <z, z_p> λ_ms}`; it is read as `e^{-α (<z, z_p> - λ_ms)}`,
//! the multi-similarity threshold, the only reading for which `ϕ_s = 1` gives the MS loss. The
//! paper's values α = 2, β = 50, λ_ms = 1 are the defaults; all pairs, no miner (configure one
//! to use one).

use super::kinds::{Batch, Context, on_host};
use super::gml::{batch_factor, subtract_eigenvalues, validate};
use super::multi_similarity::MultiSimilarityLossConfig;
use super::{LossModule, LossOutput, RegisteredLoss};
use crate::distance::Distance;
use crate::error::LossError;
use crate::geodesic::GeodesicFactorConfig;
use crate::reducer::Reducer;

dml_config::config! {
    /// Configuration of GML-MS.
    #[derive(Clone, Debug, PartialEq)]
    pub struct GmlMsLossConfig {
        /// Weight `α_ms` of positive pairs (App. I).
        pub alpha: f64 = 2.0,
        /// Weight `β_ms` of negative pairs.
        pub beta: f64 = 50.0,
        /// The threshold `λ_ms`.
        pub base: f64 = 1.0,
        /// The weight `ε2` of the eigenvalue term (Sec. IV-B).
        pub eps2: f64 = 1e-6,
        /// Distance override (else cosine similarity).
        pub distance: Option<Distance> = None,
        /// Reducer override (else the mean over anchors).
        pub reducer: Option<Reducer> = None,
        /// The geodesic factor.
        pub factor: GeodesicFactorConfig = GeodesicFactorConfig::default(),
    }
}

/// GML-MS on its own.
pub type GmlMsLoss = LossModule<GmlMsLossConfig>;

impl GmlMsLossConfig {
    /// The multi-similarity loss with the same α, β and threshold (the baseline at `ϕ_s = 1`).
    fn baseline(&self) -> MultiSimilarityLossConfig {
        MultiSimilarityLossConfig {
            alpha: self.alpha,
            beta: self.beta,
            base: self.base,
            distance: self.distance.clone(),
            reducer: self.reducer.clone(),
        }
    }
}

impl RegisteredLoss for GmlMsLossConfig {
    const NAME: &'static str = "gml_ms";
    const DEFAULT_DISTANCE: Distance = Distance::cosine();
    const DEFAULT_REDUCER: Reducer = Reducer::Mean;
    const PAIR_BASED: bool = true;
    const HOST_EVALUATED: bool = true;

    fn distance(&self) -> Option<&Distance> {
        self.distance.as_ref()
    }

    fn reducer(&self) -> Option<&Reducer> {
        self.reducer.as_ref()
    }

    fn validate(&self, distance: &Distance) -> Result<(), LossError> {
        self.baseline().validate(distance)?;
        validate(Self::NAME, self.eps2, &self.factor)
    }

    fn evaluate(&self, ctx: &Context<'_>, batch: Batch<'_>) -> Result<LossOutput, LossError> {
        let factor = batch_factor(&self.factor, ctx, &batch)?;
        let baseline = self.baseline();
        let log_phi = factor.phi_s.ln();
        let out = on_host(self, ctx, batch, |_, input| (baseline.host(input, log_phi), Vec::new()))?;
        Ok(subtract_eigenvalues(out, self.eps2, &factor))
    }
}
