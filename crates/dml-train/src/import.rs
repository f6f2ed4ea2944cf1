//! `train import`: a model trained elsewhere — a pytorch-metric-learning trunk and embedder saved
//! with `torch.save(model.state_dict())` or as safetensors — written as a run directory, so that
//! every command that takes a trained run (`eval`, `embed`, `explain …`, `analyze`) takes it.
//!
//! The trunk is a torchvision ResNet (its `fc` replaced by `Identity`, or present and then
//! ignored with a note) or Cadene's BN-Inception; the embedder an `nn.Linear` (`weight` `[D, C]`,
//! `bias` `[D]`), or an `nn.Sequential` holding one (`0.weight`, `0.bias`; PML's `MLP` wraps it
//! as `net.0.…`), or nothing (the pooled trunk features are the embedding). One file with
//! `trunk.` and `embedder.` prefixes holds both.

use std::path::{Path, PathBuf};

use burn::module::Module;
use burn::store::ModuleRecord;
use burn::tensor::{Tensor, TensorData};
use dml_models::{EmbeddingHead, LoadReport, read_keys, read_tensors};

use crate::checkpoint::{self, TrainState};
use crate::config::TrainConfig;
use crate::device::parse_device;
use crate::error::TrainError;
use crate::model::build_model;
use crate::progress::Progress;

/// The backbones whose PyTorch layout can be imported.
pub const IMPORT_BACKBONES: [&str; 3] = ["resnet18", "resnet50", "bn_inception"];

/// What `train import` is asked to do.
#[derive(Debug, Clone)]
pub struct ImportRequest {
    /// The run's configuration (`model.backbone`, `name`, `run_dir`, `data.*`, `model.normalize`
    /// …); `model.embedding_dim` is taken from the embedder.
    pub config: TrainConfig,
    /// The trunk's weight file (or the whole model's, with `trunk.`/`embedder.` prefixes).
    pub trunk: PathBuf,
    /// The embedder's weight file, if separate.
    pub embedder: Option<PathBuf>,
}

/// What an import wrote.
#[derive(Debug, Clone)]
pub struct ImportOutcome {
    /// The new run directory.
    pub run_dir: PathBuf,
    /// Its one checkpoint.
    pub checkpoint: PathBuf,
    /// The embedding dimension `D`.
    pub embedding_dim: usize,
    /// What the embedder was (`Linear(512, 64)`, `none`).
    pub embedder: String,
    /// The trunk's load: tensors applied and keys left unused.
    pub trunk_report: LoadReport,
}

/// Where the embedder's tensors are: a file and the prefix its keys carry.
struct EmbedderSource {
    path: PathBuf,
    prefix: String,
}

/// A `.pth` or `.safetensors` path, else an error naming the flag.
fn weight_file(flag: &str, path: &Path) -> Result<(), TrainError> {
    if !path.is_file() {
        return Err(TrainError::Argument(format!("{flag} {}: no such file", path.display())));
    }
    Ok(())
}

/// The trunk's key prefix and where the embedder is, from the files given.
fn layout(req: &ImportRequest) -> Result<(String, Option<EmbedderSource>), TrainError> {
    weight_file("--trunk", &req.trunk)?;
    if let Some(e) = &req.embedder {
        weight_file("--embedder", e)?;
        return Ok((
            String::new(),
            Some(EmbedderSource {
                path: e.clone(),
                prefix: String::new(),
            }),
        ));
    }
    let keys = read_keys(&req.trunk)?;
    if keys.is_empty() {
        return Err(TrainError::Argument(format!(
            "--trunk {}: holds no tensor (not a state dict?)",
            req.trunk.display()
        )));
    }
    if keys.iter().any(|k| k.starts_with("trunk.")) {
        let embedder = keys.iter().any(|k| k.starts_with("embedder.")).then(|| EmbedderSource {
            path: req.trunk.clone(),
            prefix: "embedder.".into(),
        });
        return Ok(("trunk.".into(), embedder));
    }
    Ok((String::new(), None))
}

/// The embedder's `[D, C]` weight and `[D]` bias from its tensors (keys without the source's
/// prefix): one `nn.Linear`, bare, in an `nn.Sequential` (`0.`) or PML's `MLP` (`net.0.`), with
/// DataParallel's `module.` allowed in front.
fn linear_embedder(source: &EmbedderSource) -> Result<(TensorData, TensorData), TrainError> {
    let prefix = source.prefix.as_str();
    let tensors = read_tensors(&source.path, |k| k.starts_with(prefix))?;
    let named: Vec<(String, TensorData)> = tensors
        .into_iter()
        .map(|(k, t)| {
            let k = k[prefix.len()..].to_string();
            (k.strip_prefix("module.").map(str::to_string).unwrap_or(k), t)
        })
        .collect();
    let keys: Vec<&str> = named.iter().map(|(k, _)| k.as_str()).collect();
    let first = || keys.iter().take(6).copied().collect::<Vec<_>>().join(", ");
    let linears: Vec<&str> = keys.iter().filter_map(|k| k.strip_suffix("weight")).collect();
    let file = source.path.display();
    let stem = match linears.as_slice() {
        [stem] if ["", "0.", "net.0."].contains(stem) => stem.to_string(),
        [] => {
            return Err(TrainError::Argument(format!(
                "{file}: no embedder layout found (an nn.Linear's weight and bias, or an nn.Sequential's 0.weight …); \
                 its first keys are {}",
                first()
            )));
        }
        [_] => {
            return Err(TrainError::Argument(format!(
                "{file}: an embedder whose one weight is {}weight is not an nn.Linear, nn.Sequential or PML MLP layout \
                 (keys {})",
                linears[0],
                first()
            )));
        }
        many => {
            return Err(TrainError::Argument(format!(
                "{file}: an embedder of {} linear layers ({}): only a single nn.Linear embedder can be imported so far",
                many.len(),
                many.iter().map(|s| format!("{s}weight")).collect::<Vec<_>>().join(", ")
            )));
        }
    };
    let take = |name: &str| -> Result<TensorData, TrainError> {
        let key = format!("{stem}{name}");
        named
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, t)| t.clone())
            .ok_or_else(|| {
                TrainError::Argument(format!("{file}: the embedder has no {prefix}{key} (keys {})", first()))
            })
    };
    let (weight, bias) = (take("weight")?, take("bias")?);
    let unexpected: Vec<&&str> = keys
        .iter()
        .filter(|k| **k != format!("{stem}weight") && **k != format!("{stem}bias"))
        .collect();
    if !unexpected.is_empty() {
        return Err(TrainError::Argument(format!(
            "{file}: unexpected embedder keys {unexpected:?} next to {prefix}{stem}weight and {prefix}{stem}bias"
        )));
    }
    if weight.shape().len() != 2 || bias.shape().len() != 1 || weight.shape()[0] != bias.shape()[0] {
        return Err(TrainError::Argument(format!(
            "{file}: the embedder's {prefix}{stem}weight {:?} and {prefix}{stem}bias {:?} are not an nn.Linear's [D, C] and [D]",
            weight.shape().as_slice(),
            bias.shape().as_slice()
        )));
    }
    Ok((weight, bias))
}

/// Imports the model of `req` as the run `req.config.run_dir / req.config.name`, which must not
/// exist yet; it is written into a staging folder beside it and renamed into place, so a failure
/// leaves nothing behind.
pub fn import(req: &ImportRequest, progress: &dyn Progress) -> Result<ImportOutcome, TrainError> {
    let backbone = req.config.model.backbone.as_str();
    if !IMPORT_BACKBONES.contains(&backbone) {
        return Err(TrainError::Argument(format!(
            "--backbone {backbone}: only {} have a PyTorch layout to import",
            IMPORT_BACKBONES.join(", ")
        )));
    }
    let run_dir = req.config.run_dir.join(&req.config.name);
    if run_dir.exists() {
        return Err(TrainError::Argument(format!(
            "{} exists; give another --name (an import never overwrites a run)",
            run_dir.display()
        )));
    }
    let (trunk_prefix, embedder) = layout(req)?;
    let channels = dml_models::BackboneConfig::from_name(backbone)?.out_channels();
    let (weight, bias, description) = match &embedder {
        Some(source) => {
            let (w, b) = linear_embedder(source)?;
            let (d, c) = (w.shape()[0], w.shape()[1]);
            if c != channels {
                return Err(TrainError::Argument(format!(
                    "{}: the embedder's weight is [{d}, {c}], but the {backbone} trunk gives {channels} channels",
                    source.path.display()
                )));
            }
            (w, b, format!("Linear({c}, {d})"))
        }
        None => {
            let mut eye = vec![0.0f32; channels * channels];
            for i in 0..channels {
                eye[i * channels + i] = 1.0;
            }
            (
                TensorData::new(eye, [channels, channels]),
                TensorData::new(vec![0.0f32; channels], [channels]),
                "none".to_string(),
            )
        }
    };
    let mut config = req.config.clone();
    config.model.embedding_dim = weight.shape()[0];
    config.model.pretrained.clear();
    let device = parse_device(&config.device)?;
    let mut model = build_model(&config, &device, progress)?;
    let trunk_report = model.backbone.load_trunk(&req.trunk, &trunk_prefix)?;
    model.head = EmbeddingHead::from_weights(
        Tensor::<2>::from_data(weight, &device),
        Tensor::<1>::from_data(bias, &device),
        config.model.pooling,
        config.model.normalize,
    )?;
    let model = model.valid();

    // Staged beside the destination, renamed into place once complete.
    let parent = run_dir.parent().unwrap_or(Path::new(".")).to_path_buf();
    std::fs::create_dir_all(&parent).map_err(|e| TrainError::io(&parent, e))?;
    let staging = parent.join(format!(".{}.import-{}", config.name, std::process::id()));
    if staging.exists() {
        std::fs::remove_dir_all(&staging).map_err(|e| TrainError::io(&staging, e))?;
    }
    std::fs::create_dir_all(&staging).map_err(|e| TrainError::io(&staging, e))?;
    let written = (|| -> Result<PathBuf, TrainError> {
        let config_path = staging.join("config.toml");
        std::fs::write(&config_path, config.to_toml()?).map_err(|e| TrainError::io(&config_path, e))?;
        let state = TrainState {
            epochs_done: 0,
            global_step: 0,
            seed: config.seed,
            history: Vec::new(),
            best: None,
        };
        checkpoint::commit(&staging, &state, false, |dir| {
            let record: ModuleRecord = model.clone().into_record();
            record
                .save(dir.join(checkpoint::MODEL_FILE))
                .map_err(|e| TrainError::io(dir.join(checkpoint::MODEL_FILE), e))
        })
    })();
    let checkpoint = match written {
        Ok(c) => c,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&staging);
            return Err(e);
        }
    };
    std::fs::rename(&staging, &run_dir).map_err(|e| TrainError::io(&run_dir, e))?;
    let relative = checkpoint.strip_prefix(&staging).unwrap_or(&checkpoint).to_path_buf();
    Ok(ImportOutcome {
        checkpoint: run_dir.join(relative),
        run_dir,
        embedding_dim: config.model.embedding_dim,
        embedder: description,
        trunk_report,
    })
}
