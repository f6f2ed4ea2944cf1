//! The `[avsl]` section: AVSL's multi-level similarity graph in training and evaluation.

use dml_explain::avsl::certainty::Certainty;
use dml_explain::avsl::proxy_anchor::ProxyAnchorDistance;
use dml_losses::LossConfig;

use crate::error::TrainError;

dml_config::config! {
    /// The `[avsl]` section of a run, with the authors' defaults (zbr17/AVSL: 512 dimensions per
    /// level, top-128 edges, momentum 0.5, γ = 10) and the paper's Proxy-Anchor constants
    /// (Sec. 4.2).
    #[derive(Debug, Clone, PartialEq)]
    pub struct AvslConfig {
        /// Train with AVSL's graph (off: the plain loss on the head's embedding).
        pub enabled: bool = false,
        /// Backbone stages, low to high (empty: the last three, `layer2`–`layer4` of a ResNet).
        pub stages: Vec<String> = Vec::new(),
        /// Dimensions `r` of every level's embedding.
        pub dim: usize = 512,
        /// Lower-level nodes kept per higher-level node (`k` of Eq. 7).
        pub topk: usize = 128,
        /// Weight of the old edges in their moving average (Eq. 4).
        pub momentum: f64 = 0.5,
        /// The reliability's factor γ (Eq. 6 as the code: `σ(γ (α η η′ + β))`).
        pub gamma: f64 = 10.0,
        /// `code` (the authors' certainty, the default) or `paper` (Eq. 5).
        pub certainty: Certainty = Certainty::Code,
        /// `w_l` of each level's own loss term, low to high (empty: 1 for every level).
        pub level_weights: Vec<f64> = Vec::new(),
        /// Proxy-Anchor in distance form (Eq. 14): the scale α.
        pub pa_alpha: f64 = 16.0,
        /// Proxy-Anchor in distance form: the positive margin `β − τ`.
        pub pa_positive_margin: f64 = 1.8,
        /// Proxy-Anchor in distance form: the negative margin `β + τ`.
        pub pa_negative_margin: f64 = 2.2,
        /// Sets of at most this many images are evaluated with `d̂` exactly (every pair).
        pub exact_limit: usize = 5000,
        /// Larger sets re-rank each query's top `rerank_k` neighbours by the concatenated level
        /// embedding with `d̂`.
        pub rerank_k: usize = 100,
    }
}

/// The losses AVSL training supports, for error messages.
pub const SUPPORTED: &str = "pair-based losses of the catalogue on distances (e.g. margin, contrastive, \
     triplet_margin) and proxy_anchor (in distance form, Eq. 14)";

impl AvslConfig {
    /// The Proxy-Anchor constants of Eq. 14.
    pub fn proxy_anchor(&self) -> ProxyAnchorDistance {
        ProxyAnchorDistance {
            alpha: self.pa_alpha,
            positive_margin: self.pa_positive_margin,
            negative_margin: self.pa_negative_margin,
        }
    }

    /// Checks the section against the rest of the run, naming the key.
    pub fn validate(&self, loss: &LossConfig, others: &[(&str, bool)]) -> Result<(), TrainError> {
        if !self.enabled {
            return Ok(());
        }
        let fail = |key: &str, why: String| Err(TrainError::Config(format!("avsl.{key}: {why}")));
        if let Some((section, _)) = others.iter().find(|(_, on)| *on) {
            return fail(
                "enabled",
                format!("cannot be combined with [{section}] enabled = true (both reshape the loss); enable one"),
            );
        }
        if !matches!(loss, LossConfig::ProxyAnchor(_)) && !loss.is_pair_based() {
            return fail(
                "enabled",
                format!(
                    "the {} loss is not pair-based; AVSL trains with {SUPPORTED}",
                    loss.name()
                ),
            );
        }
        if self.dim == 0 {
            return fail("dim", "must be positive".into());
        }
        if self.topk == 0 || self.topk > self.dim {
            return fail(
                "topk",
                format!("{} must be between 1 and avsl.dim = {}", self.topk, self.dim),
            );
        }
        if !(0.0..=1.0).contains(&self.momentum) {
            return fail("momentum", format!("{} must be in [0, 1]", self.momentum));
        }
        if !(self.gamma.is_finite() && self.gamma > 0.0) {
            return fail("gamma", format!("{} must be positive", self.gamma));
        }
        if let Some(w) = self.level_weights.iter().find(|w| !(w.is_finite() && **w >= 0.0)) {
            return fail("level_weights", format!("{w} must be finite and non-negative"));
        }
        if self.rerank_k == 0 {
            return fail("rerank_k", "must be at least 1".into());
        }
        self.proxy_anchor()
            .validate("avsl")
            .map_err(|e| TrainError::Config(e.to_string()))
    }
}
