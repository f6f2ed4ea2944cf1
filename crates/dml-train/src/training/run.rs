//! Driving a run: opening (or resuming) its directory, recording its configuration, then one
//! epoch after another, each followed by its evaluation and an atomic checkpoint.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Instant;

use burn::module::Module;
use burn::tensor::{Device, Tensor, TensorData};
use dml_data::{BatchLoader, BatchSampler, LoaderConfig, MPerClassSampler, mix};
use dml_losses::LossError;
use dml_losses::geodesic::{FactorCounts, factor_counts};

use crate::checkpoint::{self, Best, PartialEpoch, TrainState};
use crate::config::{RESUME_MAY_CHANGE, SelectBy, TrainConfig, changed_keys};
use crate::data::{EvalData, RunData};
use crate::device::parse_device;
use crate::error::TrainError;
use crate::metrics::{Metrics, MetricsRecord};
use crate::progress::{Event, Progress};
use crate::retrieval;

use super::learner::Learner;
use super::summary::{RunOptions, RunSummary};

/// Trains (or resumes) the run of `config`, reporting its evaluations, epochs and notes through
/// `progress`.
pub fn train(config: &TrainConfig, options: &RunOptions, progress: &dyn Progress) -> Result<RunSummary, TrainError> {
    let device = parse_device(&config.device)?;
    let train_device = device.clone().autodiff();
    let data = RunData::load(config, progress)?;
    // The sampler is built before any evaluation or checkpoint, so that a batch the training
    // split cannot fill fails at once, naming the keys to change.
    let sampler = sampler(config, &data)?;
    let learner = Learner::new(config, data.num_classes, &train_device, progress)?;
    let run = Run {
        config,
        dir: config.run_path(),
        data,
        device,
        train_device,
        progress,
    };
    // The lock is held until this function returns: no second writer on the run meanwhile. It is
    // taken once the configuration, data and model are known good, so that a run refused before
    // that writes nothing.
    let _lock = crate::run_lock::RunLock::acquire(&run.dir)?;
    let (mut learner, mut state) = run.open(learner, options.resume)?;
    if state.history.is_empty() {
        let (metrics, val) = run.evaluate(&learner)?;
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
        progress.event(Event::Evaluated(&record));
        state.history.push(record);
        checkpoint::write_metrics(&run.dir, &state.history)?;
    }
    let stopping = || options.stop.is_some_and(|s| s.load(Ordering::SeqCst));
    while state.epochs_done < config.train.epochs {
        if options.stop_after_epochs.is_some_and(|n| state.epochs_done >= n) {
            break;
        }
        if stopping() {
            // Between epochs: the latest checkpoint is this point already.
            let checkpoint = checkpoint::pointed(&run.dir, "latest.json")?.unwrap_or_else(|| run.dir.clone());
            return Err(TrainError::Interrupted {
                epoch: state.epochs_done + 1,
                step: 0,
                checkpoint,
            });
        }
        let Some(epoch) = run.epoch(&mut learner, &sampler, &mut state, &stopping)? else {
            // Stopped part-way: the state records where; the checkpoint resumes from there.
            let checkpoint = checkpoint::commit(&run.dir, &state, false, |dir| learner.save(dir))?;
            checkpoint::write_metrics(&run.dir, &state.history)?;
            return Err(TrainError::Interrupted {
                epoch: state.epochs_done + 1,
                step: state.partial.map_or(0, |p| p.steps_done),
                checkpoint,
            });
        };
        let is_best = run.record(&learner, &mut state, epoch)?;
        checkpoint::commit(&run.dir, &state, is_best, |dir| learner.save(dir))?;
        // The metrics file is rewritten only once the checkpoint that contains these
        // evaluations is committed, so it never runs ahead of what a resume restores.
        checkpoint::write_metrics(&run.dir, &state.history)?;
    }
    Ok(RunSummary {
        run_dir: run.dir,
        history: state.history,
        best: state.best,
    })
}

/// A run in progress: its configuration, directory, datasets and devices.
struct Run<'a> {
    config: &'a TrainConfig,
    dir: PathBuf,
    data: RunData,
    /// The evaluation device (inference).
    device: Device,
    /// The training device (the same device with autodiff).
    train_device: Device,
    progress: &'a dyn Progress,
}

/// What one epoch of training measured.
struct EpochOutcome {
    /// The epoch's mean training loss.
    loss: f64,
    /// The learning-rate factor of the step schedule during the epoch.
    lr_factor: f64,
    /// Training throughput in images per second.
    images_per_sec: f64,
    /// What PPGML's geodesic factor did during the epoch (GML losses only).
    geodesic: Option<FactorCounts>,
}

impl Run<'_> {
    /// Opens the run directory: a fresh run starts from `learner` and an empty state (a directory
    /// that already holds a run is refused unless `resume`), a resumed one restores the learner
    /// and the state of the latest checkpoint after checking that the configuration is the one
    /// the run was started with. The configuration is then recorded ([`Run::record_config`]).
    fn open(&self, learner: Learner, resume: bool) -> Result<(Learner, TrainState), TrainError> {
        let latest = checkpoint::pointed(&self.dir, "latest.json")?;
        let (learner, state) = match (&latest, resume) {
            (Some(_), false) => {
                return Err(TrainError::Config(format!(
                    "run directory {} already holds a run; pass --resume to continue it or choose another --name",
                    self.dir.display()
                )));
            }
            (Some(dir), true) => {
                check_same_config(&self.dir, self.config)?;
                let state = checkpoint::read_state(dir)?;
                if state.seed != self.config.seed {
                    return Err(TrainError::Checkpoint {
                        path: dir.clone(),
                        message: format!(
                            "was trained with seed {}, the configuration says {}",
                            state.seed, self.config.seed
                        ),
                    });
                }
                let learner = learner.load(dir)?;
                self.progress.note(&format!(
                    "resuming {} after epoch {}",
                    self.dir.display(),
                    state.epochs_done
                ));
                (learner, state)
            }
            (None, _) => (
                learner,
                TrainState {
                    epochs_done: 0,
                    global_step: 0,
                    seed: self.config.seed,
                    history: Vec::new(),
                    best: None,
                    partial: None,
                },
            ),
        };
        std::fs::create_dir_all(&self.dir).map_err(|e| TrainError::io(&self.dir, e))?;
        self.record_config(latest.is_some())?;
        checkpoint::write_metrics(&self.dir, &state.history)?;
        Ok((learner, state))
    }

    /// Writes `config.toml`. A resumed run's saved configuration is the record of the experiment:
    /// it is rewritten only when the run continues with more epochs (the one change that belongs
    /// in it), and then with nothing else changed; otherwise the file stays byte for byte as it
    /// was.
    fn record_config(&self, resumed: bool) -> Result<(), TrainError> {
        let config_path = self.dir.join("config.toml");
        let text = match TrainConfig::read(&config_path) {
            Ok(saved) if resumed => {
                let epochs = self.config.train.epochs;
                (saved.train.epochs != epochs)
                    .then(|| {
                        let mut kept = saved;
                        kept.train.epochs = epochs;
                        kept.to_toml()
                    })
                    .transpose()?
            }
            _ => Some(self.config.to_toml()?),
        };
        if let Some(text) = text {
            dml_data::write_atomic(&config_path, text.as_bytes()).map_err(|e| TrainError::io(&config_path, e))?;
        }
        Ok(())
    }

    /// The metrics of the learner's model on the reported split and on `val`; an AVSL run
    /// retrieves with its overall distance `d̂`.
    fn evaluate(&self, learner: &Learner) -> Result<(Metrics, Option<Metrics>), TrainError> {
        let config = self.config;
        let model = learner.model.valid();
        let threads = config.data.threads;
        let avsl = learner.avsl.as_ref().map(|a| a.valid());
        let run = |d: &EvalData| match &avsl {
            Some(module) => retrieval::avsl::evaluate(
                &model,
                module,
                &config.avsl,
                d,
                config.eval.batch_size,
                threads,
                &self.device,
            ),
            None => retrieval::evaluate(
                &model,
                d,
                config.eval.batch_size,
                threads,
                &self.device,
                config.model.normalize,
            ),
        };
        let report = run(&self.data.report)?;
        let val = self.data.val.as_ref().map(run).transpose()?;
        Ok((report, val))
    }

    /// Trains one epoch (`state.epochs_done` is the 0-based epoch, counted up at its end). A
    /// non-finite loss, or a non-finite weight after the epoch, stops the run with
    /// [`TrainError::Diverged`].
    /// One epoch of training (the rest of it, when the state records a partial one); `None` when
    /// `stopping` said to stop after a step before the epoch's end, with the state recording
    /// where ([`TrainState::partial`]).
    fn epoch(
        &self,
        learner: &mut Learner,
        sampler: &MPerClassSampler,
        state: &mut TrainState,
        stopping: &dyn Fn() -> bool,
    ) -> Result<Option<EpochOutcome>, TrainError> {
        let config = self.config;
        let epoch = state.epochs_done;
        let factor = config.schedule.factor(epoch);
        let o = &config.optimizer;
        let lrs = [o.lr_backbone * factor, o.lr_head * factor, o.lr_loss * factor];
        let batches = sampler.batches(epoch as u64);
        let n_batches = batches.len();
        let loader_config = LoaderConfig {
            threads: config.data.threads,
            ..LoaderConfig::default()
        };
        let resumed = state.partial.take();
        let first = resumed.map_or(0, |p| p.steps_done);
        let loader = BatchLoader::from_batch(
            self.data.train.clone(),
            batches,
            first,
            mix(config.seed, epoch as u64),
            &loader_config,
        )?;
        let bar = self
            .progress
            .bar(n_batches, &format!("epoch {}/{}", epoch + 1, config.train.epochs));
        let start = Instant::now();
        let (mut loss_sum, mut images_seen) = resumed.map_or((0.0f64, 0usize), |p| (p.loss_sum, p.images_seen));
        let images_before = images_seen;
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
            last_good: checkpoint::pointed(&self.dir, "latest.json").ok().flatten(),
        };
        for _ in 0..first {
            bar.step(None);
        }
        for (i, batch) in loader.enumerate() {
            let step = first + i;
            let batch = batch?;
            let labels: Vec<u32> = batch.items.iter().map(|&i| self.data.dense[i]).collect();
            let images = Tensor::<4>::from_data(TensorData::new(batch.images, batch.shape), &self.train_device);
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
            let rate = (images_seen - images_before) as f64 / start.elapsed().as_secs_f64().max(1e-9);
            bar.step(Some(&format!(
                "loss {:.4} · {rate:.0} img/s",
                loss_sum / (step + 1) as f64
            )));
            if step + 1 < n_batches && stopping() {
                bar.finish();
                if let Some(value) = learner.first_non_finite() {
                    return Err(diverged(step + 1, state.global_step, value));
                }
                state.partial = Some(PartialEpoch {
                    steps_done: step + 1,
                    loss_sum,
                    images_seen,
                });
                return Ok(None);
            }
        }
        bar.finish();
        // A finite loss does not imply finite weights (a loss can saturate, or see only
        // normalised embeddings), and neither an evaluation nor a checkpoint of non-finite
        // weights is of any use: the weights are checked once per epoch, where reading them
        // back costs nothing noticeable (and after the throughput is measured, which it must
        // not skew).
        let images_per_sec = (images_seen - images_before) as f64 / start.elapsed().as_secs_f64().max(1e-9);
        let geodesic = Some(factor_counts().since(&factors_before)).filter(|c| c.batches > 0);
        if let Some(value) = learner.first_non_finite() {
            return Err(diverged(n_batches, state.global_step, value));
        }
        state.epochs_done += 1;
        Ok(Some(EpochOutcome {
            loss: loss_sum / n_batches.max(1) as f64,
            lr_factor: factor,
            images_per_sec,
            geodesic,
        }))
    }

    /// Evaluates after an epoch when `eval.every` says so (and after the last), updating the best
    /// model on `val` and the history; returns whether this epoch's model is the new best.
    fn record(&self, learner: &Learner, state: &mut TrainState, epoch: EpochOutcome) -> Result<bool, TrainError> {
        let config = self.config;
        let last = state.epochs_done == config.train.epochs;
        let due = config.eval.every > 0 && state.epochs_done.is_multiple_of(config.eval.every);
        if !(due || last) {
            self.progress.event(Event::EpochDone {
                epoch: state.epochs_done,
                epochs: config.train.epochs,
                loss: epoch.loss,
                images_per_sec: epoch.images_per_sec,
            });
            return Ok(false);
        }
        let (metrics, val) = self.evaluate(learner)?;
        let mut is_best = false;
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
            train_loss: Some(epoch.loss),
            lr_factor: epoch.lr_factor,
            images_per_sec: Some(epoch.images_per_sec),
            geodesic: epoch.geodesic,
        };
        self.progress.event(Event::Evaluated(&record));
        state.history.push(record);
        Ok(is_best)
    }
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

/// The value of the `val` metric that picks the best checkpoint.
fn selected(m: &Metrics, by: SelectBy) -> f64 {
    match by {
        SelectBy::PrecisionAt1 => m.precision_at_1,
        SelectBy::RPrecision => m.r_precision,
        SelectBy::MapAtR => m.map_at_r,
    }
}

/// A resumed run must use the configuration it was started with (only the keys of
/// [`crate::config::RESUME_MAY_CHANGE`] may differ); otherwise the continuation would not be the
/// same experiment.
fn check_same_config(run: &Path, config: &TrainConfig) -> Result<(), TrainError> {
    let path = run.join("config.toml");
    let saved = TrainConfig::read(&path)?;
    let changed = changed_keys(&saved.to_table()?, &config.to_table()?, RESUME_MAY_CHANGE);
    if !changed.is_empty() {
        return Err(TrainError::Config(format!(
            "--resume: the configuration differs from the run's {}:\n{}",
            path.display(),
            changed.join("\n")
        )));
    }
    Ok(())
}
