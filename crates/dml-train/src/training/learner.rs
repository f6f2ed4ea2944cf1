//! The learner: the model, the loss (with the method parts DIML, similarity mining and AVSL add to
//! it) and the three optimiser groups (backbone, head, loss parameters), with one optimisation
//! step, the finiteness check of every weight, and saving and loading its state.

use std::path::Path;
use std::time::Instant;

use burn::module::{Module, ModuleVisitor, Param};
use burn::optim::decay::WeightDecayConfig;
use burn::optim::momentum::MomentumConfig;
use burn::optim::{AdamWConfig, GradientsParams, ModuleOptimizer, SgdConfig};
use burn::store::ModuleRecord;
use burn::tensor::{Device, Tensor};
use dml_losses::{MetricLoss, Miner};
use dml_models::EmbeddingModel;

use crate::checkpoint;
use crate::config::{OptimizerConfig, OptimizerKind, TrainConfig};
use crate::error::TrainError;
use crate::model::build_model;
use crate::progress::Progress;

use super::avsl::Avsl;
use super::diml::Diml;
use super::host_adam::HostAdam;
use super::mining::Mining;

/// The model, the loss and the optimiser groups of a run, on the training device.
pub struct Learner {
    /// The embedding network.
    pub model: EmbeddingModel,
    /// The loss with its learnable state.
    pub loss: MetricLoss,
    /// The optional miner.
    pub miner: Option<Miner>,
    /// DIML structural matching in the loss (`[diml] enabled = true`).
    pub diml: Option<Diml>,
    /// Similarity mining in the loss (`[similarity_mining] enabled = true`).
    pub mining: Option<Mining>,
    /// AVSL's embedder, graph and loss (`[avsl] enabled = true`).
    pub avsl: Option<Avsl>,
    optim_backbone: ModuleOptimizer,
    optim_head: ModuleOptimizer,
    optim_loss: ModuleOptimizer,
}

fn optimizer(config: &OptimizerConfig) -> ModuleOptimizer {
    let penalty = (config.weight_decay > 0.0).then_some(config.weight_decay as f32);
    let decay = penalty.map(WeightDecayConfig::new);
    match config.name {
        // PyTorch's epsilon (1e-8), so that learning rates carry over from the papers. The host
        // pass is Burn's Adam to the bit, in one pass over the values on CPU devices.
        OptimizerKind::Adam => ModuleOptimizer::from(HostAdam::new(1e-8, penalty)),
        OptimizerKind::Adamw => AdamWConfig::new()
            .with_epsilon(1e-8)
            .with_weight_decay(config.weight_decay as f32)
            .init(),
        OptimizerKind::Sgd => SgdConfig::new()
            .with_weight_decay(decay)
            .with_momentum((config.momentum > 0.0).then_some(MomentumConfig {
                momentum: config.momentum,
                dampening: 0.0,
                nesterov: false,
            }))
            .init(),
    }
}

impl Learner {
    /// A fresh learner: the model seeded by `config.seed` (pretrained weights reported through
    /// `progress`), the loss sized for `num_classes`.
    pub fn new(
        config: &TrainConfig,
        num_classes: usize,
        device: &Device,
        progress: &dyn Progress,
    ) -> Result<Self, TrainError> {
        device.seed(config.seed);
        let model = build_model(config, device, progress)?;
        let loss = config.loss.init(num_classes, config.model.embedding_dim, device)?;
        let miner = config.miner.as_ref().map(|m| m.init()).transpose()?;
        let diml = if config.diml.enabled {
            Some(Diml::new(
                &config.diml,
                &loss,
                num_classes,
                config.model.embedding_dim,
                device,
            )?)
        } else {
            None
        };
        let mining = if config.similarity_mining.enabled {
            Some(Mining::new(
                &config.similarity_mining,
                &config.loss,
                optimizer(&config.optimizer),
                device,
            )?)
        } else {
            None
        };
        let avsl = if config.avsl.enabled {
            Some(Avsl::new(
                &config.avsl,
                &config.loss,
                &model.backbone,
                num_classes,
                || optimizer(&config.optimizer),
                device,
            )?)
        } else {
            None
        };
        Ok(Self {
            model,
            loss,
            miner,
            diml,
            mining,
            avsl,
            optim_backbone: optimizer(&config.optimizer),
            optim_head: optimizer(&config.optimizer),
            optim_loss: optimizer(&config.optimizer),
        })
    }

    /// One optimisation step on a batch; returns the loss value.
    ///
    /// `labels` are dense class indices; `seed` drives stochastic miners; `lrs` are the
    /// learning rates of the backbone, head and loss groups.
    pub fn step(&mut self, images: Tensor<4>, labels: &[u32], seed: u64, lrs: [f64; 3]) -> Result<f64, TrainError> {
        self.step_inner(images, labels, seed, lrs, false).map(|(v, _)| v)
    }

    /// [`Learner::step`] with the device synchronised between the phases, returning how
    /// long each took (for benchmarks; the synchronisation costs a little throughput).
    pub fn step_profiled(
        &mut self,
        images: Tensor<4>,
        labels: &[u32],
        seed: u64,
        lrs: [f64; 3],
    ) -> Result<(f64, StepTimes), TrainError> {
        self.step_inner(images, labels, seed, lrs, true)
    }

    fn step_inner(
        &mut self,
        images: Tensor<4>,
        labels: &[u32],
        seed: u64,
        lrs: [f64; 3],
        profile: bool,
    ) -> Result<(f64, StepTimes), TrainError> {
        let device = images.device();
        let sync = |t: &mut Instant| -> f64 {
            if profile {
                let _ = device.sync();
            }
            let dt = t.elapsed().as_secs_f64();
            *t = Instant::now();
            dt
        };
        let mut times = StepTimes::default();
        let mut t = Instant::now();
        let loss = match (&self.diml, &self.mining, self.avsl.as_mut()) {
            // AVSL needs every stage's maps (on the graph); forward and loss are one phase.
            (_, _, Some(avsl)) => avsl.loss(&self.model, &self.loss, images, labels, self.miner.as_ref(), seed)?,
            (None, None, None) => {
                let embeddings = self.model.forward(images);
                times.forward = sync(&mut t);
                self.loss.forward(embeddings, labels, self.miner.as_ref(), seed)?.loss
            }
            // The structural matching needs the feature maps: forward and loss are one phase.
            (Some(diml), _, None) => {
                diml.forward(&self.model, &self.loss, images, labels, self.miner.as_ref(), seed)?
                    .loss
            }
            // Similarity mining needs the last feature maps (on the graph) and the images.
            (None, Some(mining), None) => {
                let (embeddings, features) = self.model.forward_with_features(images.clone());
                times.forward = sync(&mut t);
                let metric = self
                    .loss
                    .forward(embeddings.clone(), labels, self.miner.as_ref(), seed)?
                    .loss;
                let mined = mining.loss(
                    &self.model,
                    images,
                    embeddings,
                    &features,
                    labels,
                    self.miner.as_ref(),
                    seed,
                )?;
                match mined {
                    Some(sm) => metric + sm,
                    None => metric,
                }
            }
        };
        let value = f64::from(loss.clone().into_scalar::<f32>());
        times.loss = sync(&mut t);
        let mut grads = loss.backward();
        times.backward = sync(&mut t);
        let g_backbone = GradientsParams::from_module(&mut grads, &self.model.backbone);
        let g_head = GradientsParams::from_module(&mut grads, &self.model.head);
        let g_loss = GradientsParams::from_module(&mut grads, &self.loss);
        let EmbeddingModel { backbone, head } = self.model.clone();
        let backbone = self.optim_backbone.step(lrs[0], backbone, g_backbone);
        let head = self.optim_head.step(lrs[1], head, g_head);
        self.model = EmbeddingModel { backbone, head };
        // DIML's ProxyNCA learns spatial proxies in place of the loss's own (which then get no
        // gradient); both are the loss-parameter group.
        if let Some(proxies) = self.diml.as_mut().and_then(|d| d.proxies.as_mut()) {
            let g = GradientsParams::from_module(&mut grads, &*proxies);
            *proxies = self.optim_loss.step(lrs[2], proxies.clone(), g);
        } else if self.loss.has_parameters() {
            self.loss = self.optim_loss.step(lrs[2], self.loss.clone(), g_loss);
        }
        if let Some(mining) = self.mining.as_mut() {
            mining.step(lrs[2], &mut grads);
        }
        if let Some(avsl) = self.avsl.as_mut() {
            avsl.step(lrs, &mut grads);
        }
        times.update = sync(&mut t);
        Ok((value, times))
    }

    /// The first parameter (or batch-norm statistic) of the model, the loss's learnable
    /// state or DIML's spatial proxies that holds NaN or an infinity, described as
    /// `parameter head.linear.weight holds NaN (3 of 2048 values are not finite)`; `None`
    /// when every value is finite.
    ///
    /// It reads every weight back to the host, which costs a step's worth of transfers at
    /// most: the training loop calls it once per epoch, before evaluating and checkpointing,
    /// rather than paying a device synchronisation at every step.
    pub fn first_non_finite(&self) -> Option<String> {
        let mut check = FiniteCheck::default();
        // `valid()` is what evaluation embeds with and what a checkpoint records (batch norm's
        // pending running-statistics update folded in).
        self.model.valid().visit(&mut check);
        check.within("loss", |c| self.loss.valid().visit(c));
        if let Some(p) = self.diml.as_ref().and_then(|d| d.proxies.as_ref()) {
            check.within("diml_proxies", |c| p.valid().visit(c));
        }
        if let Some(m) = &self.mining {
            check.within("similarity_mining", |c| m.valid().visit(c));
        }
        if let Some(a) = &self.avsl {
            check.within("avsl", |c| a.valid().visit(c));
            if let Some(p) = a.valid_proxies() {
                check.within("avsl_proxies", |c| p.visit(c));
            }
        }
        check.found
    }

    /// Writes the weights and optimiser states into `dir`.
    pub fn save(&self, dir: &Path) -> Result<(), TrainError> {
        let save = |record: ModuleRecord, file: &str| {
            record
                .save(dir.join(file))
                .map_err(|e| TrainError::io(dir.join(file), e))
        };
        // `valid()` folds the pending running-statistics update of batch norm into the
        // recorded values (the plain record may be one update behind).
        save(self.model.valid().into_record(), checkpoint::MODEL_FILE)?;
        save(self.loss.valid().into_record(), checkpoint::LOSS_FILE)?;
        if let Some(p) = self.diml.as_ref().and_then(|d| d.proxies.as_ref()) {
            save(p.valid().into_record(), checkpoint::DIML_PROXIES_FILE)?;
        }
        if let Some(m) = self.mining.as_ref().filter(|m| m.learnable()) {
            let [params, optim] = checkpoint::MINING_FILES;
            save(m.valid().into_record(), params)?;
            m.optim
                .save(dir.join(optim))
                .map_err(|e| TrainError::io(dir.join(optim), e))?;
        }
        if let Some(a) = &self.avsl {
            a.save(dir)?;
        }
        for (optim, file) in [&self.optim_backbone, &self.optim_head, &self.optim_loss]
            .into_iter()
            .zip(checkpoint::OPTIM_FILES)
        {
            optim
                .save(dir.join(file))
                .map_err(|e| TrainError::io(dir.join(file), e))?;
        }
        Ok(())
    }

    /// Restores weights and optimiser states written by [`Learner::save`].
    pub fn load(mut self, dir: &Path) -> Result<Self, TrainError> {
        let bad = |what: &str, e: &dyn std::fmt::Display| TrainError::Checkpoint {
            path: dir.to_path_buf(),
            message: format!("{what}: {e}"),
        };
        let record = |file: &str| ModuleRecord::load(dir.join(file)).map_err(|e| bad(file, &e));
        self.model = self
            .model
            .try_load_record(record(checkpoint::MODEL_FILE)?)
            .map_err(|e| bad("model weights do not fit the configured model", &e))?;
        self.loss = self
            .loss
            .try_load_record(record(checkpoint::LOSS_FILE)?)
            .map_err(|e| bad("loss state does not fit the configured loss", &e))?;
        if let Some(p) = self.diml.as_mut().and_then(|d| d.proxies.as_mut()) {
            *p = p
                .clone()
                .try_load_record(record(checkpoint::DIML_PROXIES_FILE)?)
                .map_err(|e| bad("DIML spatial proxies do not fit the configured loss", &e))?;
        }
        if let Some(m) = self.mining.as_mut().filter(|m| m.learnable()) {
            let [params, optim] = checkpoint::MINING_FILES;
            m.module = m
                .module
                .clone()
                .try_load_record(record(params)?)
                .map_err(|e| bad("similarity-mining parameters do not fit", &e))?;
            m.optim = m.optim.clone().load(dir.join(optim)).map_err(|e| bad(optim, &e))?;
        }
        if let Some(a) = self.avsl.as_mut() {
            a.load(dir)?;
        }
        let [b, h, l] = checkpoint::OPTIM_FILES;
        self.optim_backbone = self.optim_backbone.load(dir.join(b)).map_err(|e| bad(b, &e))?;
        self.optim_head = self.optim_head.load(dir.join(h)).map_err(|e| bad(h, &e))?;
        self.optim_loss = self.optim_loss.load(dir.join(l)).map_err(|e| bad(l, &e))?;
        Ok(self)
    }
}

/// A visitor that finds the first float tensor of a module holding NaN or an infinity,
/// naming it by its path of field names.
#[derive(Default)]
struct FiniteCheck {
    path: Vec<String>,
    found: Option<String>,
}

impl FiniteCheck {
    /// Visits a module under the path prefix `name`.
    fn within(&mut self, name: &str, visit: impl FnOnce(&mut Self)) {
        self.path.push(name.to_string());
        visit(self);
        self.path.pop();
    }
}

impl ModuleVisitor for FiniteCheck {
    fn enter_module(&mut self, name: &str, _container_type: &str) {
        self.path.push(name.to_string());
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.pop();
    }

    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        if self.found.is_some() {
            return;
        }
        let data = param.val().into_data();
        let mut bad = data.iter::<f64>().filter(|v| !v.is_finite());
        if let Some(first) = bad.next() {
            let count = 1 + bad.count();
            let value = if first.is_nan() {
                "NaN".to_string()
            } else {
                first.to_string()
            };
            self.found = Some(format!(
                "parameter {} holds {value} ({count} of {} values are not finite)",
                self.path.join("."),
                data.num_elements()
            ));
        }
    }
}

/// Seconds spent in each phase of a profiled step.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct StepTimes {
    /// Backbone and head forward pass.
    pub forward: f64,
    /// Loss (and miner) forward pass, including reading the loss value back.
    pub loss: f64,
    /// Backward pass.
    pub backward: f64,
    /// Optimiser updates.
    pub update: f64,
}
