//! AVSL training (Zhang et al., CVPR 2022, Sec. 3.3–3.4, Eq. 10): a multi-level embedder on
//! several backbone stages, the similarity graph over their nodes, and the loss
//! `L(d̂) + Σ_l w_l L(d^l)`, where `d̂` trains only the reliability regression.
//!
//! The embedder is trained with the head group's learning rate (it takes the head's place), the
//! reliability parameters `α`, `β` and Proxy-Anchor's per-level proxies with the loss group's.
//! The moving average of the CAM edges is part of the model: it is saved in every checkpoint and
//! restored on resume, so a resumed run continues exactly.

use std::path::Path;

use burn::module::Module;
use burn::optim::{GradientsParams, ModuleOptimizer};
use burn::store::ModuleRecord;
use burn::tensor::{Device, Gradients, Tensor};
use dml_explain::avsl::certainty::Certainty;
use dml_explain::avsl::links::LinkMemory;
use dml_explain::avsl::proxy_anchor::{LevelProxies, ProxyAnchorDistance};
use dml_explain::avsl::training::{AvslSettings, Criterion, ReliabilityParams, avsl_loss};
use dml_losses::{LossConfig, MetricLoss, Miner};
use dml_models::{AvslEmbedder, AvslEmbedderConfig, Backbone, EmbeddingModel};

use crate::checkpoint;
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

fn explain(e: dml_explain::ExplainError) -> TrainError {
    TrainError::Config(format!("avsl: {e}"))
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

/// Everything AVSL adds to a model for inference: the embedder, the reliability regression and the
/// edges' moving average. Saved as one record (Proxy-Anchor's proxies, needed in training only, are
/// a record of their own).
#[derive(Module, Debug)]
pub struct AvslModule {
    /// The multi-level embedder (Eq. 15–21).
    pub embedder: AvslEmbedder,
    /// `α`, `β` of every level above the lowest (Eq. 6).
    pub reliability: ReliabilityParams,
    /// The moving average of the CAM edges (Eq. 3–4).
    pub memory: LinkMemory,
}

impl AvslModule {
    /// A fresh module for `backbone` (after [`AvslConfig::validate`]).
    pub fn new(config: &AvslConfig, backbone: &Backbone, device: &Device) -> Result<Self, TrainError> {
        let embedder = AvslEmbedderConfig {
            stages: config.stages.clone(),
            dim: config.dim,
        }
        .init(backbone, device)
        .map_err(|e| TrainError::Config(format!("avsl.stages: {e}")))?;
        let dims = vec![config.dim; embedder.levels.len()];
        if !config.level_weights.is_empty() && config.level_weights.len() != dims.len() {
            return Err(TrainError::Config(format!(
                "avsl.level_weights: {} weights for {} levels",
                config.level_weights.len(),
                dims.len()
            )));
        }
        Ok(Self {
            reliability: ReliabilityParams::new(&dims, device),
            memory: LinkMemory::new(&dims, config.momentum, device).map_err(explain)?,
            embedder,
        })
    }

    /// The graph's constants of `config` for this module's levels.
    pub fn settings(&self, config: &AvslConfig) -> AvslSettings {
        let levels = self.embedder.levels.len();
        AvslSettings {
            topk: config.topk,
            gamma: config.gamma,
            certainty: config.certainty,
            level_weights: if config.level_weights.is_empty() {
                vec![1.0; levels]
            } else {
                config.level_weights.clone()
            },
        }
    }
}

/// AVSL's part of a [`crate::Learner`]: the module, its settings and the optimisers of its groups.
pub struct Avsl {
    /// The embedder, reliability and edges.
    pub module: AvslModule,
    /// Proxy-Anchor's per-level proxies (Eq. 14), for `proxy_anchor` runs.
    pub proxies: Option<LevelProxies>,
    /// The graph's constants.
    pub settings: AvslSettings,
    pa: Option<ProxyAnchorDistance>,
    optim_embedder: ModuleOptimizer,
    optim_reliability: ModuleOptimizer,
    optim_proxies: ModuleOptimizer,
}

impl Avsl {
    /// Builds AVSL's part of a run: `optimizer` makes one optimiser per group.
    pub fn new(
        config: &AvslConfig,
        loss: &LossConfig,
        backbone: &Backbone,
        classes: usize,
        optimizer: impl Fn() -> ModuleOptimizer,
        device: &Device,
    ) -> Result<Self, TrainError> {
        let pa = matches!(loss, LossConfig::ProxyAnchor(_)).then(|| config.proxy_anchor());
        let module = AvslModule::new(config, backbone, device)?;
        let dims = vec![config.dim; module.embedder.levels.len()];
        let proxies = pa
            .is_some()
            .then(|| LevelProxies::new(classes, &dims, device))
            .transpose()
            .map_err(explain)?;
        Ok(Self {
            proxies,
            settings: module.settings(config),
            module,
            pa,
            optim_embedder: optimizer(),
            optim_reliability: optimizer(),
            optim_proxies: optimizer(),
        })
    }

    /// The step's objective (Eq. 10) on a batch, updating the edges' moving average first.
    pub fn loss(
        &mut self,
        model: &EmbeddingModel,
        loss: &MetricLoss,
        images: Tensor<4>,
        labels: &[u32],
        miner: Option<&Miner>,
        seed: u64,
    ) -> Result<Tensor<1>, TrainError> {
        let maps = model.backbone.forward_features(images);
        let outputs = self.module.embedder.forward(&maps);
        let AvslModule {
            reliability, memory, ..
        } = &mut self.module;
        let criterion = match (&self.pa, self.proxies.as_ref()) {
            (Some(pa), Some(proxies)) => Criterion::ProxyAnchor { loss: pa, proxies },
            _ => Criterion::Pairs { loss, miner, seed },
        };
        let out = avsl_loss(&outputs, reliability, memory, &self.settings, &criterion, labels)
            .map_err(|e| TrainError::Config(format!("avsl: {e}")))?;
        Ok(out.loss)
    }

    /// Applies the step's gradients: the embedder with the head group's learning rate, the
    /// reliability and the proxies with the loss group's (`lrs` = backbone, head, loss).
    pub fn step(&mut self, lrs: [f64; 3], grads: &mut Gradients) {
        let m = &mut self.module;
        let g = GradientsParams::from_module(grads, &m.embedder);
        m.embedder = self.optim_embedder.step(lrs[1], m.embedder.clone(), g);
        let g = GradientsParams::from_module(grads, &m.reliability);
        m.reliability = self.optim_reliability.step(lrs[2], m.reliability.clone(), g);
        if let Some(p) = self.proxies.as_mut() {
            let g = GradientsParams::from_module(grads, &*p);
            *p = self.optim_proxies.step(lrs[2], p.clone(), g);
        }
    }

    /// The module without autodiff (for checkpoints, evaluation and checks).
    pub fn valid(&self) -> AvslModule {
        self.module.valid()
    }

    /// The proxies without autodiff, for `proxy_anchor` runs.
    pub fn valid_proxies(&self) -> Option<LevelProxies> {
        self.proxies.as_ref().map(|p| p.valid())
    }

    /// Writes the module and its optimiser states into `dir`.
    pub fn save(&self, dir: &Path) -> Result<(), TrainError> {
        let [module, proxy_file, embedder, reliability, proxies] = checkpoint::AVSL_FILES;
        let save = |record: ModuleRecord, file: &str| {
            record
                .save(dir.join(file))
                .map_err(|e| TrainError::io(dir.join(file), e))
        };
        save(self.valid().into_record(), module)?;
        if let Some(p) = self.valid_proxies() {
            save(p.into_record(), proxy_file)?;
        }
        for (optim, file) in [
            (&self.optim_embedder, embedder),
            (&self.optim_reliability, reliability),
            (&self.optim_proxies, proxies),
        ] {
            optim
                .save(dir.join(file))
                .map_err(|e| TrainError::io(dir.join(file), e))?;
        }
        Ok(())
    }

    /// Restores what [`Self::save`] wrote.
    pub fn load(&mut self, dir: &Path) -> Result<(), TrainError> {
        let bad = |what: &str, e: &dyn std::fmt::Display| TrainError::Checkpoint {
            path: dir.to_path_buf(),
            message: format!("{what}: {e}"),
        };
        let [_, proxy_file, embedder, reliability, proxies] = checkpoint::AVSL_FILES;
        self.module = load_module(self.module.clone(), dir)?;
        if let Some(p) = self.proxies.as_mut() {
            let record = ModuleRecord::load(dir.join(proxy_file)).map_err(|e| bad(proxy_file, &e))?;
            *p = p
                .clone()
                .try_load_record(record)
                .map_err(|e| bad("the AVSL proxies do not fit the configured classes and levels", &e))?;
        }
        self.optim_embedder = self
            .optim_embedder
            .clone()
            .load(dir.join(embedder))
            .map_err(|e| bad(embedder, &e))?;
        self.optim_reliability = self
            .optim_reliability
            .clone()
            .load(dir.join(reliability))
            .map_err(|e| bad(reliability, &e))?;
        self.optim_proxies = self
            .optim_proxies
            .clone()
            .load(dir.join(proxies))
            .map_err(|e| bad(proxies, &e))?;
        Ok(())
    }
}

/// Loads a checkpoint's AVSL record into `module` (built for the run's configuration).
pub fn load_module(module: AvslModule, dir: &Path) -> Result<AvslModule, TrainError> {
    let file = checkpoint::AVSL_FILES[0];
    let bad = |what: &str, e: &dyn std::fmt::Display| TrainError::Checkpoint {
        path: dir.to_path_buf(),
        message: format!("{what}: {e}"),
    };
    let record = ModuleRecord::load(dir.join(file)).map_err(|e| bad(file, &e))?;
    module
        .try_load_record(record)
        .map_err(|e| bad("the AVSL state does not fit the configured [avsl] section", &e))
}
