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
use dml_explain::avsl::proxy_anchor::{LevelProxies, ProxyAnchorDistance};
use dml_explain::avsl::training::{AvslSettings, Criterion, avsl_loss};
use dml_losses::{LossConfig, MetricLoss, Miner};
use dml_models::{Backbone, EmbeddingModel};

use crate::avsl_module::{AvslModule, load_module};
use crate::checkpoint;
use crate::config::AvslConfig;
use crate::error::TrainError;

/// AVSL's graph errors, named after the method.
fn explain(e: dml_explain::ExplainError) -> TrainError {
    TrainError::method("avsl", e)
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
        let out = avsl_loss(&outputs, reliability, memory, &self.settings, &criterion, labels).map_err(explain)?;
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
