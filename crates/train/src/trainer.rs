//! The training loop: M-per-class batches → model → loss (+ miner) → three optimiser
//! groups (backbone, head, loss parameters), with evaluation, best-model selection on
//! `val`, atomic checkpoints and exact resumption.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use burn::module::{Module, ModuleVisitor, Param};
use burn::optim::decay::WeightDecayConfig;
use burn::optim::momentum::MomentumConfig;
use burn::optim::{AdamWConfig, GradientsParams, ModuleOptimizer, SgdConfig};
use burn::store::ModuleRecord;
use burn::tensor::{Device, Tensor, TensorData};
use dml_data::{BatchLoader, BatchSampler, ImageDataset, LoaderConfig, MPerClassSampler, Split, mix};
use dml_losses::geodesic::factor_counts;
use dml_losses::{LossError, MetricLoss, Miner};
use dml_models::{BackboneConfig, EmbeddingModel, EmbeddingModelConfig};

use crate::avsl::Avsl;
use crate::checkpoint::{self, Best, MetricsRecord, TrainState};
use crate::config::{OptimizerConfig, OptimizerKind, SelectBy, TrainConfig};
use crate::data;
use crate::device::parse_device;
use crate::diml::Diml;
use crate::error::TrainError;
use crate::eval::{self, EvalData, Metrics};
use crate::host_adam::HostAdam;
use crate::mining::Mining;

/// How a run is driven (not part of the run's configuration).
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Continue from the run directory's latest checkpoint (a fresh start when there is
    /// none yet).
    pub resume: bool,
    /// Draw progress bars (they are hidden anyway when stderr is not a terminal).
    pub progress: bool,
    /// Stop after this many completed epochs, as if interrupted (for tests and for
    /// splitting a long run into sessions).
    pub stop_after_epochs: Option<usize>,
}

/// What a finished (or stopped) run reports.
#[derive(Debug, Clone)]
pub struct RunSummary {
    /// The run directory.
    pub run_dir: PathBuf,
    /// Every evaluation, the untrained model first.
    pub history: Vec<MetricsRecord>,
    /// The best model on `val`, if the dataset has a `val` split.
    pub best: Option<Best>,
}

impl RunSummary {
    /// Metrics of the untrained model on the reported split.
    pub fn before(&self) -> Option<&Metrics> {
        self.history.first().map(|r| &r.metrics)
    }

    /// Metrics after the last completed epoch.
    pub fn after(&self) -> Option<&Metrics> {
        self.history.last().map(|r| &r.metrics)
    }
}

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

/// Builds the embedding model of `config` on `device`, loading pretrained weights first
/// and freezing batch norm afterwards (so that the loaded statistics are the frozen ones).
pub fn build_model(config: &TrainConfig, device: &Device) -> Result<EmbeddingModel, TrainError> {
    let m = &config.model;
    let model_config = EmbeddingModelConfig {
        backbone: BackboneConfig::from_name(&m.backbone)?,
        dim: m.embedding_dim,
        pooling: m.pooling,
        normalize: m.normalize,
        freeze_batchnorm: false,
    };
    let mut model = model_config.init(device)?;
    if !m.pretrained.is_empty() {
        let report = model.backbone.load_pretrained(Path::new(&m.pretrained))?;
        eprintln!(
            "loaded {} tensors from {} ({} unused: {})",
            report.applied,
            m.pretrained,
            report.unused.len(),
            report.unused.join(", ")
        );
    }
    if m.freeze_batchnorm {
        model.backbone = model.backbone.freeze_batchnorm();
    }
    Ok(model)
}

pub(crate) fn optimizer(config: &OptimizerConfig) -> ModuleOptimizer {
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
    /// A fresh learner: the model seeded by `config.seed`, the loss sized for
    /// `num_classes`.
    pub fn new(config: &TrainConfig, num_classes: usize, device: &Device) -> Result<Self, TrainError> {
        device.seed(config.seed);
        let model = build_model(config, device)?;
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

/// The datasets of a run.
struct RunData {
    train: Arc<ImageDataset>,
    dense: Vec<u32>,
    num_classes: usize,
    report: EvalData,
    val: Option<EvalData>,
}

fn load_data(config: &TrainConfig) -> Result<RunData, TrainError> {
    let manifest = data::load_manifest(&config.data)?;
    let train =
        data::split_dataset(&manifest, Split::Train, data::train_transform(&config.data))?.ok_or_else(|| {
            TrainError::Config(format!(
                "data.dataset {}: the manifest has no train images",
                config.data.dataset
            ))
        })?;
    let (dense, num_classes) = data::dense_labels(train.labels());
    let eval_transform = data::eval_transform(&config.data);
    let split: Split = config
        .eval
        .split
        .parse()
        .map_err(|e| TrainError::Config(format!("eval.split: {e}")))?;
    let report = EvalData::of_split(&manifest, split, &eval_transform)?.ok_or_else(|| {
        TrainError::Config(format!(
            "eval.split = {:?}: the dataset {} has no images in that split",
            config.eval.split, config.data.dataset
        ))
    })?;
    let val = if split == Split::Val {
        None
    } else {
        EvalData::of_split(&manifest, Split::Val, &eval_transform)?
    };
    Ok(RunData {
        train,
        dense,
        num_classes,
        report,
        val,
    })
}

/// The M-per-class sampler of a run, after checking that the training split has the classes a
/// batch draws (`train.batch_size / train.m`); the error names the keys that decide both.
fn sampler(config: &TrainConfig, data: &RunData) -> Result<MPerClassSampler, TrainError> {
    let t = &config.train;
    let per_batch = t.batch_size / t.m.max(1);
    if data.num_classes < per_batch {
        let held_out = if config.data.val_classes > 0 {
            format!(" after data.val_classes = {} held out as val", config.data.val_classes)
        } else {
            String::new()
        };
        let fits = data.num_classes * t.m;
        return Err(TrainError::Config(format!(
            "train.batch_size = {} with train.m = {} draws {per_batch} classes per batch, but the train \
             split of {} has {} classes{held_out}: set train.batch_size to at most {fits} (--batch-size {fits}), \
             lower train.m or data.val_classes",
            t.batch_size, t.m, config.data.dataset, data.num_classes
        )));
    }
    let samples = if t.samples_per_epoch == 0 {
        data.train.len()
    } else {
        t.samples_per_epoch
    };
    Ok(MPerClassSampler::new(
        &data.dense,
        t.m,
        t.batch_size,
        samples.max(t.batch_size),
        config.seed,
    )?)
}

/// A duration as people read it: `42.3 s`, `3 min 05 s`, `1 h 02 min`.
pub fn wall_time(d: std::time::Duration) -> String {
    let s = d.as_secs_f64();
    let whole = d.as_secs();
    if s < 60.0 {
        format!("{s:.1} s")
    } else if whole < 3600 {
        format!("{} min {:02} s", whole / 60, whole % 60)
    } else {
        format!("{} h {:02} min", whole / 3600, (whole % 3600) / 60)
    }
}

fn selected(m: &Metrics, by: SelectBy) -> f64 {
    match by {
        SelectBy::PrecisionAt1 => m.precision_at_1,
        SelectBy::RPrecision => m.r_precision,
        SelectBy::MapAtR => m.map_at_r,
    }
}

/// Trains (or resumes) the run of `config`.
pub fn train(config: &TrainConfig, options: &RunOptions) -> Result<RunSummary, TrainError> {
    let device = parse_device(&config.device)?;
    let train_device = device.clone().autodiff();
    let run = config.run_path();
    let data = load_data(config)?;
    // The sampler is built before any evaluation or checkpoint, so that a batch the training
    // split cannot fill fails at once, naming the keys to change.
    let sampler = sampler(config, &data)?;
    let mut learner = Learner::new(config, data.num_classes, &train_device)?;

    let config_text = config.to_toml()?;
    let latest = checkpoint::pointed(&run, "latest.json")?;
    let mut state = match (&latest, options.resume) {
        (Some(_), false) => {
            return Err(TrainError::Config(format!(
                "run directory {} already holds a run; pass --resume to continue it or choose another --name",
                run.display()
            )));
        }
        (Some(dir), true) => {
            check_same_config(&run, config)?;
            let state = checkpoint::read_state(dir)?;
            if state.seed != config.seed {
                return Err(TrainError::Checkpoint {
                    path: dir.clone(),
                    message: format!(
                        "was trained with seed {}, the configuration says {}",
                        state.seed, config.seed
                    ),
                });
            }
            learner = learner.load(dir)?;
            eprintln!("resuming {} after epoch {}", run.display(), state.epochs_done);
            state
        }
        (None, _) => TrainState {
            epochs_done: 0,
            global_step: 0,
            seed: config.seed,
            history: Vec::new(),
            best: None,
        },
    };
    std::fs::create_dir_all(&run).map_err(|e| TrainError::io(&run, e))?;
    // A resumed run's saved configuration is the record of the experiment: it is rewritten only
    // when the run continues with more epochs (the one change that belongs in it), and then with
    // nothing else changed; otherwise the file stays byte for byte as it was.
    let config_path = run.join("config.toml");
    let text = match TrainConfig::read(&config_path) {
        Ok(saved) if latest.is_some() => {
            let epochs = config.train.epochs;
            (saved.train.epochs != epochs)
                .then(|| {
                    let mut kept = saved;
                    kept.train.epochs = epochs;
                    kept.to_toml()
                })
                .transpose()?
        }
        _ => Some(config_text),
    };
    if let Some(text) = text {
        dml_data::write_atomic(&config_path, text.as_bytes()).map_err(|e| TrainError::io(&config_path, e))?;
    }
    checkpoint::write_metrics(&run, &state.history)?;

    let threads = config.data.threads;
    let eval_model = |learner: &Learner| -> Result<(Metrics, Option<Metrics>), TrainError> {
        let model = learner.model.valid();
        // An AVSL run retrieves with its overall distance d̂.
        if let Some(avsl) = &learner.avsl {
            let module = avsl.valid();
            let run = |d: &EvalData| {
                crate::avsl_eval::evaluate(
                    &model,
                    &module,
                    &config.avsl,
                    d,
                    config.eval.batch_size,
                    threads,
                    &device,
                )
            };
            let v = data.val.as_ref().map(run).transpose()?;
            return Ok((run(&data.report)?, v));
        }
        let m = eval::evaluate(
            &model,
            &data.report,
            config.eval.batch_size,
            threads,
            &device,
            config.model.normalize,
        )?;
        let v = match &data.val {
            Some(v) => Some(eval::evaluate(
                &model,
                v,
                config.eval.batch_size,
                threads,
                &device,
                config.model.normalize,
            )?),
            None => None,
        };
        Ok((m, v))
    };

    if state.history.is_empty() {
        let (metrics, val) = eval_model(&learner)?;
        let record = MetricsRecord {
            epoch: 0,
            split: config.eval.split.clone(),
            metrics,
            val,
            train_loss: None,
            lr_factor: config.schedule.factor(0),
            images_per_sec: None,
            geodesic: None,
        };
        print_record(&record);
        state.history.push(record);
        checkpoint::write_metrics(&run, &state.history)?;
    }

    let loader_config = LoaderConfig {
        threads,
        ..LoaderConfig::default()
    };

    while state.epochs_done < config.train.epochs {
        if options.stop_after_epochs.is_some_and(|n| state.epochs_done >= n) {
            break;
        }
        let epoch = state.epochs_done;
        let factor = config.schedule.factor(epoch);
        let o = &config.optimizer;
        let lrs = [o.lr_backbone * factor, o.lr_head * factor, o.lr_loss * factor];
        let batches = sampler.batches(epoch as u64);
        let n_batches = batches.len();
        let loader = BatchLoader::new(
            data.train.clone(),
            batches,
            mix(config.seed, epoch as u64),
            &loader_config,
        )?;
        let bar = progress_bar(
            options.progress,
            n_batches,
            format!("epoch {}/{}", epoch + 1, config.train.epochs),
        );
        let start = Instant::now();
        let (mut loss_sum, mut images_seen) = (0.0f64, 0usize);
        // The GML losses count their geodesic factors on this thread; the epoch's share is
        // the difference of two snapshots.
        let factors_before = factor_counts();
        // A divergence is reported with where it was found and the learning rates that
        // caused it, and with the checkpoint of the last finite epoch, which `latest.json`
        // still names (a pointer that cannot be read only loses that hint: it must not hide
        // the divergence).
        let diverged = |step: usize, global_step: u64, value: String| TrainError::Diverged {
            epoch: epoch + 1,
            step,
            steps: n_batches,
            global_step,
            value,
            lrs,
            last_good: checkpoint::pointed(&run, "latest.json").ok().flatten(),
        };
        for (step, batch) in loader.enumerate() {
            let batch = batch?;
            let labels: Vec<u32> = batch.items.iter().map(|&i| data.dense[i]).collect();
            let images = Tensor::<4>::from_data(TensorData::new(batch.images, batch.shape), &train_device);
            let step_seed = mix(mix(config.seed, epoch as u64), step as u64);
            let result = learner.step(images, &labels, step_seed, lrs);
            state.global_step += 1;
            // The loss value is read back every step anyway (for the epoch's mean), so this
            // check needs no extra synchronisation with the device.
            let value = match result {
                Ok(value) if value.is_finite() => value,
                Ok(value) => return Err(diverged(step + 1, state.global_step, format!("loss = {value}"))),
                Err(TrainError::Loss(e @ LossError::NonFinite { .. })) => {
                    return Err(diverged(step + 1, state.global_step, e.to_string()));
                }
                Err(e) => return Err(e),
            };
            loss_sum += value;
            images_seen += labels.len();
            let rate = images_seen as f64 / start.elapsed().as_secs_f64().max(1e-9);
            bar.set_message(format!("loss {:.4} · {rate:.0} img/s", loss_sum / (step + 1) as f64));
            bar.inc(1);
        }
        bar.finish_and_clear();
        // A finite loss does not imply finite weights (a loss can saturate, or see only
        // normalised embeddings), and neither an evaluation nor a checkpoint of non-finite
        // weights is of any use: the weights are checked once per epoch, where reading them
        // back costs nothing noticeable (and after the throughput is measured, which it must
        // not skew).
        let images_per_sec = images_seen as f64 / start.elapsed().as_secs_f64().max(1e-9);
        let geodesic = Some(factor_counts().since(&factors_before)).filter(|c| c.batches > 0);
        if let Some(value) = learner.first_non_finite() {
            return Err(diverged(n_batches, state.global_step, value));
        }
        state.epochs_done += 1;
        let last = state.epochs_done == config.train.epochs;
        let due = config.eval.every > 0 && state.epochs_done.is_multiple_of(config.eval.every);
        let mut is_best = false;
        if due || last {
            let (metrics, val) = eval_model(&learner)?;
            if let Some(v) = &val {
                let value = selected(v, config.eval.select_by);
                if state.best.is_none_or(|b| value > b.value) {
                    state.best = Some(Best {
                        epoch: state.epochs_done,
                        value,
                    });
                    is_best = true;
                }
            }
            let record = MetricsRecord {
                epoch: state.epochs_done,
                split: config.eval.split.clone(),
                metrics,
                val,
                train_loss: Some(loss_sum / n_batches.max(1) as f64),
                lr_factor: factor,
                images_per_sec: Some(images_per_sec),
                geodesic,
            };
            print_record(&record);
            state.history.push(record);
        } else {
            eprintln!(
                "epoch {}/{}: loss {:.4}, {images_per_sec:.0} img/s",
                state.epochs_done,
                config.train.epochs,
                loss_sum / n_batches.max(1) as f64
            );
        }
        checkpoint::commit(&run, &state, is_best, |dir| learner.save(dir))?;
        // The metrics file is rewritten only once the checkpoint that contains these
        // evaluations is committed, so it never runs ahead of what a resume restores.
        checkpoint::write_metrics(&run, &state.history)?;
    }
    Ok(RunSummary {
        run_dir: run,
        history: state.history,
        best: state.best,
    })
}

/// A resumed run must use the configuration it was started with (only the keys of
/// [`crate::config::RESUME_MAY_CHANGE`] may differ); otherwise the continuation would not be the
/// same experiment.
fn check_same_config(run: &Path, config: &TrainConfig) -> Result<(), TrainError> {
    let path = run.join("config.toml");
    let saved = TrainConfig::read(&path)?;
    let changed = crate::config::changed_keys(&saved, config, crate::config::RESUME_MAY_CHANGE)?;
    if !changed.is_empty() {
        return Err(TrainError::Config(format!(
            "--resume: the configuration differs from the run's {}:\n{}",
            path.display(),
            changed.join("\n")
        )));
    }
    Ok(())
}

fn print_record(r: &MetricsRecord) {
    let val = r.val.map_or(String::new(), |v| {
        format!(" | val P@1 {:.4} MAP@R {:.4}", v.precision_at_1, v.map_at_r)
    });
    let loss = r.train_loss.map_or(String::new(), |l| format!(" | loss {l:.4}"));
    let speed = r.images_per_sec.map_or(String::new(), |s| format!(" | {s:.0} img/s"));
    let factor = r.geodesic.map_or(String::new(), |g| {
        format!(
            " | ϕ_s {:.3} ({} of {} batches neutral)",
            g.mean_phi_s().unwrap_or(1.0),
            g.degenerate(),
            g.batches
        )
    });
    println!(
        "epoch {:>3} | {} P@1 {:.4} R-P {:.4} MAP@R {:.4}{val}{loss}{speed}{factor}",
        r.epoch, r.split, r.metrics.precision_at_1, r.metrics.r_precision, r.metrics.map_at_r
    );
}

/// A progress bar of `len` steps labelled `prefix`, hidden when not `enabled` (and by indicatif when
/// stderr is not a terminal).
pub(crate) fn progress_bar(enabled: bool, len: usize, prefix: String) -> indicatif::ProgressBar {
    if !enabled {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(len as u64);
    if let Ok(style) = indicatif::ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} {msg} ({elapsed})") {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_prefix(prefix);
    bar
}
