//! GML-Cont (Kim & Song 2022, App. I Eq. I.1): the contrastive loss on the squared distance
//! scaled by the geodesic factor,
//! `1/N_p Σ ϕ_s D²_ap + 1/N_n Σ [β1 - ϕ_s D²_an]_+ - ε2 Σ_{i=1}^{kp} λ_i`,
//! each term averaged over its non-zero entries (PML's `AvgNonZeroReducer`, so that `ϕ_s = 1`,
//! `ε2 = 0` is the catalogue's contrastive loss with `pos_margin = 0`, `neg_margin = β1` on
//! the squared distance).

use super::contrastive::{check_margins, contrastive};
use super::kinds::{Batch, Context, on_pairs};
use super::gml::{batch_factor, subtract_eigenvalues, validate};
use super::gml_tri::scaled;
use super::{LossModule, LossOutput, RegisteredLoss};
use crate::distance::Distance;
use crate::error::LossError;
use crate::geodesic::GeodesicFactorConfig;
use crate::reducer::Reducer;

dml_config::config! {
    /// Configuration of GML-Cont.
    #[derive(Clone, Debug, PartialEq)]
    pub struct GmlContrastiveLossConfig {
        /// The margin `β1` of the negative hinge (the paper gives no value; 0.8 as GML-Tri).
        pub beta1: f64 = 0.8,
        /// The weight `ε2` of the eigenvalue term (Sec. IV-B).
        pub eps2: f64 = 1e-6,
        /// Distance override (else the squared Euclidean distance of normalised embeddings).
        pub distance: Option<Distance> = None,
        /// Reducer override (else the average of the non-zero terms, per sub-loss).
        pub reducer: Option<Reducer> = None,
        /// The geodesic factor.
        pub factor: GeodesicFactorConfig = GeodesicFactorConfig::default(),
    }
}

/// GML-Cont on its own.
pub type GmlContrastiveLoss = LossModule<GmlContrastiveLossConfig>;

impl RegisteredLoss for GmlContrastiveLossConfig {
    const NAME: &'static str = "gml_contrastive";
    const DEFAULT_DISTANCE: Distance = Distance::squared_euclidean();
    const DEFAULT_REDUCER: Reducer = Reducer::AvgNonZero;
    const PAIR_BASED: bool = true;

    fn distance(&self) -> Option<&Distance> {
        self.distance.as_ref()
    }

    fn reducer(&self) -> Option<&Reducer> {
        self.reducer.as_ref()
    }

    fn validate(&self, _distance: &Distance) -> Result<(), LossError> {
        check_margins(0.0, self.beta1)?;
        validate(Self::NAME, self.eps2, &self.factor)
    }

    fn evaluate(&self, ctx: &Context<'_>, batch: Batch<'_>) -> Result<LossOutput, LossError> {
        let factor = batch_factor(&self.factor, ctx, &batch)?;
        let out = on_pairs(self, ctx, batch, |c, input| {
            contrastive(0.0, c.beta1, &scaled(input, factor.phi_s))
        })?;
        Ok(subtract_eigenvalues(out, self.eps2, &factor))
    }
}
