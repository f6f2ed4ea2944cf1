//! A run's model: built from its configuration ([`build_model`], for training) or restored from one
//! of its checkpoints for inference ([`RunRef::load`] → [`RunModel`]).

use std::path::{Path, PathBuf};

use burn::module::Module;
use burn::tensor::Device;
use dml_models::{BackboneConfig, EmbeddingModel, EmbeddingModelConfig};

use crate::avsl_module::{AvslModule, load_module};
use crate::checkpoint;
use crate::config::TrainConfig;
use crate::device::parse_device;
use crate::error::TrainError;
use crate::progress::Progress;

/// Builds the embedding model of `config` on `device`, loading pretrained weights first
/// and freezing batch norm afterwards (so that the loaded statistics are the frozen ones).
/// What the weight file applied is reported through `progress`.
pub fn build_model(
    config: &TrainConfig,
    device: &Device,
    progress: &dyn Progress,
) -> Result<EmbeddingModel, TrainError> {
    let m = &config.model;
    let model_config = EmbeddingModelConfig {
        backbone: BackboneConfig::from_name(&m.backbone)?,
        dim: m.embedding_dim,
        pooling: m.pooling,
        normalize: m.normalize,
        freeze_batchnorm: false,
    };
    let mut model = model_config.init(device)?;
    if !m.embedder_hidden.is_empty() {
        model.head = dml_models::EmbeddingHead::mlp(
            model_config.backbone.out_channels(),
            &m.embedder_hidden,
            m.embedding_dim,
            m.embedder_relu,
            m.pooling,
            m.normalize,
            device,
        )?;
    }
    if !m.pretrained.is_empty() {
        let report = model.backbone.load_pretrained(Path::new(&m.pretrained))?;
        progress.note(&format!(
            "loaded {} tensors from {} ({} unused: {})",
            report.applied,
            m.pretrained,
            report.unused.len(),
            report.unused.join(", ")
        ));
    }
    if m.freeze_batchnorm {
        model.backbone = model.backbone.freeze_batchnorm();
    }
    Ok(model)
}

/// Which trained model a command works on: a run directory, one of its checkpoints and the device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRef {
    /// The run directory (holding `config.toml` and `checkpoints/`).
    pub run: PathBuf,
    /// `best`, `latest` or a checkpoint directory (see [`checkpoint::resolve`]).
    pub checkpoint: String,
    /// The inference device (default: the run's `device`).
    pub device: Option<String>,
}

/// A run's model restored from one of its checkpoints, in inference mode.
pub struct RunModel {
    /// The run's resolved configuration (with the device override applied).
    pub config: TrainConfig,
    /// The checkpoint directory the weights came from.
    pub checkpoint: PathBuf,
    /// The model on [`RunModel::device`], `valid()` (batch norm with its running statistics).
    pub model: EmbeddingModel,
    /// The inference device.
    pub device: Device,
    /// AVSL's embedder, reliability and edges, `valid()`, for runs trained with `[avsl]`.
    pub avsl: Option<AvslModule>,
}

impl RunRef {
    /// A reference to `run`'s `checkpoint` on the run's own device.
    pub fn new(run: impl Into<PathBuf>, checkpoint: impl Into<String>) -> Self {
        Self {
            run: run.into(),
            checkpoint: checkpoint.into(),
            device: None,
        }
    }

    /// Loads the run's configuration and the weights of the checkpoint on the device. Weights of
    /// another architecture are an error naming the checkpoint; a `best` that falls back to the
    /// latest checkpoint is reported through `progress`.
    pub fn load(&self, progress: &dyn Progress) -> Result<RunModel, TrainError> {
        let mut config = TrainConfig::read(&self.run.join("config.toml"))?;
        if let Some(d) = &self.device {
            config.device = d.clone();
        }
        let dir = checkpoint::resolve(&self.run, &self.checkpoint, progress)?;
        let device = parse_device(&config.device)?;
        // Weights only: pretrained files are not needed, the checkpoint holds every tensor.
        config.model.pretrained.clear();
        let model = build_model(&config, &device, progress)?;
        let record =
            burn::store::ModuleRecord::load(dir.join(checkpoint::MODEL_FILE)).map_err(|e| TrainError::Checkpoint {
                path: dir.clone(),
                message: format!("{}: {e}", checkpoint::MODEL_FILE),
            })?;
        let model = model.try_load_record(record).map_err(|e| TrainError::Checkpoint {
            path: dir.clone(),
            message: format!(
                "the weights do not fit the run's model ({} backbone): {e}",
                config.model.backbone
            ),
        })?;
        let avsl = if config.avsl.enabled {
            let fresh = AvslModule::new(&config.avsl, &model.backbone, &device)?;
            Some(load_module(fresh, &dir)?.valid())
        } else {
            None
        };
        Ok(RunModel {
            config,
            checkpoint: dir,
            model: model.valid(),
            device,
            avsl,
        })
    }
}
