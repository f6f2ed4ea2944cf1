//! GML-Tri (Kim & Song 2022, Eq. 9 / App. I Eq. I.3): the triplet-style loss on the squared
//! distance scaled by the geodesic factor,
//! `1/N_p Σ [ϕ_s D²_ap - β1]_+ + 1/N_n Σ [β1 - ϕ_s D²_an]_+ - ε2 Σ_{i=1}^{kp} λ_i`,
//! each term averaged over its non-zero entries.
//!
//! Choice: the sums run over ordered positive and negative pairs (PML's contrastive loss with
//! both margins `β1` on `ϕ_s D²`), not over triplets. With balanced classes the two readings
//! coincide (each positive pair meets the same number of negatives); with unbalanced ones only
//! the pair reading reduces exactly to a baseline of the catalogue at `ϕ_s = 1`, `ε2 = 0`.

use super::contrastive::{check_margins, contrastive};
use super::kinds::{Batch, Context, PairInput, on_pairs};
use super::gml::{batch_factor, subtract_eigenvalues, validate};
use super::{LossModule, LossOutput, RegisteredLoss};
use crate::distance::Distance;
use crate::error::LossError;
use crate::geodesic::GeodesicFactorConfig;
use crate::reducer::Reducer;

dml_config::config! {
    /// Configuration of GML-Tri.
    #[derive(Clone, Debug, PartialEq)]
    pub struct GmlTriLossConfig {
        /// The margin `β1` of both hinges (the paper gives no value; 0.8 on the squared distance
        /// of normalised embeddings, as in the reference cases).
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

/// GML-Tri on its own.
pub type GmlTriLoss = LossModule<GmlTriLossConfig>;

impl RegisteredLoss for GmlTriLossConfig {
    const NAME: &'static str = "gml_tri";
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
        check_margins(self.beta1, self.beta1)?;
        validate(Self::NAME, self.eps2, &self.factor)
    }

    fn evaluate(&self, ctx: &Context<'_>, batch: Batch<'_>) -> Result<LossOutput, LossError> {
        let factor = batch_factor(&self.factor, ctx, &batch)?;
        let out = on_pairs(self, ctx, batch, |c, input| {
            contrastive(c.beta1, c.beta1, &scaled(input, factor.phi_s))
        })?;
        Ok(subtract_eigenvalues(out, self.eps2, &factor))
    }
}

/// The pair input with its matrix multiplied by `ϕ_s` (shared with GML-Cont); at `ϕ_s = 1` the
/// matrix is passed on untouched, so that the loss is its baseline bit for bit.
pub(crate) fn scaled<'a>(input: &PairInput<'a>, phi_s: f64) -> PairInput<'a> {
    PairInput {
        mat: if phi_s == 1.0 {
            input.mat.clone()
        } else {
            input.mat.clone() * phi_s
        },
        sim: input.sim,
        power: input.power,
        labels: input.labels,
        tuples: input.tuples,
        seed: input.seed,
    }
}
