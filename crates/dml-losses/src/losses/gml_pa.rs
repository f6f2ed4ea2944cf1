//! GML-PA (Kim & Song 2022, Eq. 10 / App. I Eq. I.8): Proxy-Anchor with its sums of
//! exponentials scaled by the geodesic factor,
//! `1/|P+| Σ_{p∈P+} log(1 + ϕ_s Σ_{z∈C_p} e^{-α(CS(z,p) - β2)})
//!  + 1/|P| Σ_{p∈P} log(1 + ϕ_s Σ_{z∈C_n} e^{α(CS(z,p) + β2)}) - ε2 Σ_{i=1}^{kp} λ_i`.
//!
//! Choice: the negative term is divided by `|P|`, all proxies, as Proxy-Anchor and PML do;
//! Eq. 10 writes `|P⁻|`, equal to it whenever the batch has two or more classes. Learnable
//! proxies `[C, D]` as Proxy-Anchor's (same initialisation); α = 48 and β2 = 0.1 (Sec. IV-B).

use burn::tensor::Device;

use super::kinds::{Batch, Context};
use super::gml::{batch_factor, subtract_eigenvalues, validate};
use super::proxy_anchor::ProxyAnchorLossConfig;
use super::state::{LossState, Slot};
use super::{LossModule, LossOutput, RegisteredLoss};
use crate::distance::Distance;
use crate::error::LossError;
use crate::geodesic::GeodesicFactorConfig;
use crate::reducer::Reducer;

dml_config::config! {
    /// Configuration of GML-PA.
    #[derive(Clone, Debug, PartialEq)]
    pub struct GmlPaLossConfig {
        /// The margin `β2` (Proxy-Anchor's δ).
        pub margin: f64 = 0.1,
        /// The scale `α`.
        pub alpha: f64 = 48.0,
        /// The weight `ε2` of the eigenvalue term (Sec. IV-B).
        pub eps2: f64 = 1e-6,
        /// Distance override (else cosine similarity).
        pub distance: Option<Distance> = None,
        /// Reducer override (else: the positive term over the proxies present, the negative
        /// term over all proxies).
        pub reducer: Option<Reducer> = None,
        /// The geodesic factor.
        pub factor: GeodesicFactorConfig = GeodesicFactorConfig::default(),
    }
}

/// GML-PA on its own; its proxies `[C, D]` are its parameter.
pub type GmlPaLoss = LossModule<GmlPaLossConfig>;

impl GmlPaLossConfig {
    /// Proxy-Anchor with the same margin and scale (the baseline at `ϕ_s = 1`).
    fn baseline(&self) -> ProxyAnchorLossConfig {
        ProxyAnchorLossConfig {
            margin: self.margin,
            alpha: self.alpha,
            distance: self.distance.clone(),
            reducer: self.reducer.clone(),
        }
    }
}

impl RegisteredLoss for GmlPaLossConfig {
    const NAME: &'static str = "gml_pa";
    const DEFAULT_DISTANCE: Distance = Distance::cosine();
    const DEFAULT_REDUCER: Reducer = Reducer::Divisor;
    const PAIR_BASED: bool = false;
    const HOST_EVALUATED: bool = true;
    const PARAMETERS: &'static [(Slot, &'static str)] = &[(Slot::Proxies, "proxies")];

    fn distance(&self) -> Option<&Distance> {
        self.distance.as_ref()
    }

    fn reducer(&self) -> Option<&Reducer> {
        self.reducer.as_ref()
    }

    fn validate(&self, distance: &Distance) -> Result<(), LossError> {
        if !(self.margin.is_finite() && self.alpha > 0.0 && self.alpha.is_finite()) {
            return Err(LossError::Config(format!(
                "gml_pa: margin must be finite and alpha positive, got {} and {}",
                self.margin, self.alpha
            )));
        }
        self.baseline().validate(distance)?;
        validate(Self::NAME, self.eps2, &self.factor)
    }

    /// Proxy-Anchor's proxies (`kaiming_normal_`, fan-out).
    fn init_state(&self, num_classes: usize, dim: usize, device: &Device) -> Result<LossState, LossError> {
        self.baseline().init_state(num_classes, dim, device)
    }

    fn evaluate(&self, ctx: &Context<'_>, batch: Batch<'_>) -> Result<LossOutput, LossError> {
        let factor = batch_factor(&self.factor, ctx, &batch)?;
        let out = self.baseline().evaluate_scaled(ctx, batch, factor.phi_s.ln())?;
        Ok(subtract_eigenvalues(out, self.eps2, &factor))
    }
}
