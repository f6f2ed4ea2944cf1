//! What AVSL adds to a run's model for inference (Zhang et al., CVPR 2022): the multi-level
//! embedder, the reliability regression and the edges' moving average, and loading it from a
//! checkpoint.

use std::path::Path;

use burn::module::Module;
use burn::store::ModuleRecord;
use burn::tensor::Device;
use dml_explain::avsl::links::LinkMemory;
use dml_explain::avsl::training::{AvslSettings, ReliabilityParams};
use dml_models::{AvslEmbedder, AvslEmbedderConfig, Backbone};

use crate::checkpoint;
use crate::config::AvslConfig;
use crate::error::TrainError;

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
            memory: LinkMemory::new(&dims, config.momentum, device).map_err(|e| TrainError::method("avsl", e))?,
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
