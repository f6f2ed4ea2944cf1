//! The `[diml]` section: DIML's structural matching inside the training loss.

use dml_losses::LossConfig;
use serde::{Deserialize, Serialize};

use crate::error::TrainError;

/// The `[diml]` section of a run: structural matching inside the training loss.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DimlConfig {
    /// Train with DIML's combined global + structural distance (off: the plain loss).
    pub enabled: bool,
    /// Side `G` of the grid the last feature map is reduced to (DIML: 4).
    pub grid: usize,
    /// Entropic regularisation of the transport problems (DIML: 0.05).
    pub eps: f64,
    /// Sinkhorn iteration cap.
    pub max_iters: usize,
    /// `cross_correlation` (DIML Eq. 8–9) or `uniform` (Eq. 7) marginals.
    pub marginals: MarginalsName,
}

/// The marginals of the transport problems, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MarginalsName {
    /// Cross-correlation weights of the locations (DIML Eq. 8–9).
    CrossCorrelation,
    /// Uniform weights (DIML Eq. 7).
    Uniform,
}

impl Default for DimlConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            grid: 4,
            eps: 0.05,
            max_iters: 100,
            marginals: MarginalsName::CrossCorrelation,
        }
    }
}

/// The losses DIML training supports, for error messages.
pub const SUPPORTED: &str = "pair-based losses on normalised Euclidean distance (e.g. margin, contrastive, \
     triplet_margin) or cosine similarity (e.g. multi_similarity, circle), and proxy_nca with spatial proxies";

impl DimlConfig {
    /// Checks the values serde cannot, naming the key.
    pub fn validate(&self, loss: &LossConfig) -> Result<(), TrainError> {
        if !self.enabled {
            return Ok(());
        }
        if self.grid == 0 {
            return Err(TrainError::Config("diml.grid: must be at least 1".into()));
        }
        if !(self.eps.is_finite() && self.eps > 0.0) {
            return Err(TrainError::Config(format!("diml.eps: {} must be positive", self.eps)));
        }
        if self.max_iters == 0 {
            return Err(TrainError::Config("diml.max_iters: must be at least 1".into()));
        }
        if matches!(loss, LossConfig::ProxyNca(_)) {
            return Ok(());
        }
        let unsupported = |why: &str| {
            Err(TrainError::Config(format!(
                "diml.enabled: the {} loss {why}; DIML training supports {SUPPORTED}",
                loss.name()
            )))
        };
        if !loss.is_pair_based() {
            return unsupported("is not pair-based");
        }
        Ok(())
    }
}
