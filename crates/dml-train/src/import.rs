//! `train import`: a model trained elsewhere — a pytorch-metric-learning trunk and embedder saved
//! with `torch.save(model.state_dict())` or as safetensors — written as a run directory, so that
//! every command that takes a trained run (`eval`, `embed`, `explain …`, `analyze`) takes it.
//!
//! The trunk is a torchvision ResNet (its `fc` replaced by `Identity`, or present and then
//! ignored with a note) or Cadene's BN-Inception; the embedder an `nn.Linear` (`weight` `[D, C]`,
//! `bias` `[D]`), an `nn.Sequential` of linear layers with ReLUs between them (`0.weight`,
//! `2.weight`, …), PML's `MLP` (`net.1.weight`, `net.2.weight`, …), or nothing (the pooled trunk
//! features are the embedding). One file with `trunk.` and `embedder.` prefixes holds both.

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
    /// What the embedder was (`Linear(512, 64)`, `2 linear layers 512 → 128 → 64, ReLU between`,
    /// `none`).
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

/// The embedder's layers (`weight` `[out, in]`, `bias` `[out]` each, in order) from its tensors
/// (keys without the source's prefix; DataParallel's `module.` allowed in front), and whether a
/// ReLU sits between consecutive layers: one `nn.Linear` (`weight`, `bias`), or an
/// `nn.Sequential` / PML `MLP` (`[net.]<i>.weight`, `[net.]<i>.bias`) whose linear layers are at
/// indices one apart (nothing between them, PML's `MLP`) or two apart (a ReLU between,
/// `Sequential(Linear, ReLU, Linear)`). A module without parameters before the first layer (PML's
/// leading ReLU) changes nothing on the non-negative pooled features of these trunks.
fn embedder_layers(source: &EmbedderSource) -> Result<(Vec<(TensorData, TensorData)>, bool), TrainError> {
    let prefix = source.prefix.as_str();
    let file = source.path.display();
    let named: Vec<(String, TensorData)> = read_tensors(&source.path, |k| k.starts_with(prefix))?
        .into_iter()
        .map(|(k, t)| {
            let k = k[prefix.len()..].to_string();
            let k = k.strip_prefix("module.").map(str::to_string).unwrap_or(k);
            (k.strip_prefix("net.").map(str::to_string).unwrap_or(k), t)
        })
        .collect();
    let keys: Vec<&str> = named.iter().map(|(k, _)| k.as_str()).collect();
    let first = || keys.iter().take(6).copied().collect::<Vec<_>>().join(", ");
    let take = |key: &str| -> Result<TensorData, TrainError> {
        named
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, t)| t.clone())
            .ok_or_else(|| {
                TrainError::Argument(format!("{file}: the embedder has no {prefix}{key} (keys {})", first()))
            })
    };
    let mut stems: Vec<(Option<usize>, String)> = Vec::new();
    for k in &keys {
        let Some(stem) = k.strip_suffix("weight") else { continue };
        let index = match stem {
            "" => None,
            s => match s.strip_suffix('.').and_then(|i| i.parse::<usize>().ok()) {
                Some(i) => Some(i),
                None => {
                    return Err(TrainError::Argument(format!(
                        "{file}: {prefix}{k} is not an nn.Linear, nn.Sequential or PML MLP key (keys {})",
                        first()
                    )));
                }
            },
        };
        stems.push((index, stem.to_string()));
    }
    if stems.is_empty() {
        return Err(TrainError::Argument(format!(
            "{file}: no embedder layout found (an nn.Linear's weight and bias, or an nn.Sequential's 0.weight …); \
             its first keys are {}",
            first()
        )));
    }
    stems.sort();
    let mut layers = Vec::with_capacity(stems.len());
    let mut expected: Vec<String> = Vec::new();
    for (_, stem) in &stems {
        let (weight, bias) = (take(&format!("{stem}weight"))?, take(&format!("{stem}bias"))?);
        if weight.shape().len() != 2 || bias.shape().len() != 1 || weight.shape()[0] != bias.shape()[0] {
            return Err(TrainError::Argument(format!(
                "{file}: the embedder's {prefix}{stem}weight {:?} and {prefix}{stem}bias {:?} are not an nn.Linear's [out, in] and [out]",
                weight.shape().as_slice(),
                bias.shape().as_slice()
            )));
        }
        expected.extend([format!("{stem}weight"), format!("{stem}bias")]);
        layers.push((weight, bias));
    }
    let unexpected: Vec<&&str> = keys.iter().filter(|k| !expected.iter().any(|e| e == *k)).collect();
    if !unexpected.is_empty() {
        return Err(TrainError::Argument(format!(
            "{file}: unexpected embedder keys {unexpected:?} next to its linear layers"
        )));
    }
    let indices: Vec<usize> = stems.iter().filter_map(|(i, _)| *i).collect();
    let gaps: Vec<usize> = indices.windows(2).map(|w| w[1] - w[0]).collect();
    let relu = match gaps.as_slice() {
        [] => true,
        g if g.iter().all(|&d| d == 2) => true,
        g if g.iter().all(|&d| d == 1) => false,
        _ => {
            return Err(TrainError::Argument(format!(
                "{file}: linear layers at indices {indices:?}: only layers one apart (nothing between) or two apart (a \
                 ReLU between) can be imported"
            )));
        }
    };
    for (i, pair) in layers.windows(2).enumerate() {
        let (out, inp) = (pair[0].0.shape()[0], pair[1].0.shape()[1]);
        if out != inp {
            return Err(TrainError::Argument(format!(
                "{file}: embedder layer {} gives {out} features but layer {} takes {inp}",
                i,
                i + 1
            )));
        }
    }
    Ok((layers, relu))
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
    let (layers, relu) = match &embedder {
        Some(source) => embedder_layers(source)?,
        None => {
            let mut eye = vec![0.0f32; channels * channels];
            for i in 0..channels {
                eye[i * channels + i] = 1.0;
            }
            (
                vec![(
                    TensorData::new(eye, [channels, channels]),
                    TensorData::new(vec![0.0f32; channels], [channels]),
                )],
                true,
            )
        }
    };
    let c = layers[0].0.shape()[1];
    if c != channels {
        return Err(TrainError::Argument(format!(
            "{}: the embedder's first weight is [{}, {c}], but the {backbone} trunk gives {channels} channels",
            embedder.as_ref().map_or(req.trunk.display(), |s| s.path.display()),
            layers[0].0.shape()[0]
        )));
    }
    let widths: Vec<usize> = layers.iter().map(|(w, _)| w.shape()[0]).collect();
    let description = match &embedder {
        None => "none".to_string(),
        Some(_) => {
            let mut sizes = vec![c];
            sizes.extend(&widths);
            let arrows: Vec<String> = sizes.iter().map(usize::to_string).collect();
            match layers.len() {
                1 => format!("Linear({c}, {})", widths[0]),
                _ => format!(
                    "{} linear layers {}{}",
                    layers.len(),
                    arrows.join(" → "),
                    if relu { ", ReLU between" } else { "" }
                ),
            }
        }
    };
    let mut config = req.config.clone();
    config.model.embedding_dim = widths[widths.len() - 1];
    config.model.embedder_hidden = widths[..widths.len() - 1].to_vec();
    config.model.embedder_relu = relu;
    config.model.pretrained.clear();
    let device = parse_device(&config.device)?;
    let mut model = build_model(&config, &device, progress)?;
    let trunk_report = model.backbone.load_trunk(&req.trunk, &trunk_prefix)?;
    model.head = EmbeddingHead::from_layers(
        layers
            .into_iter()
            .map(|(w, b)| (Tensor::<2>::from_data(w, &device), Tensor::<1>::from_data(b, &device)))
            .collect(),
        relu,
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
            partial: None,
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
