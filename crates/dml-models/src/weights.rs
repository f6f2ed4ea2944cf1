//! Weight import shared by the backbones: a PyTorch `state_dict` (`.pth`) or a safetensors
//! file is read, its keys are renamed to the model's parameter paths, PyTorch conventions are
//! converted, and what was loaded, missing and unused is reported in the file's own key names.
//!
//! Each backbone only describes how its checkpoint's keys relate to its fields (a
//! [`KeyLayout`]); reading, conversion, shape checking and reporting live here once.

use std::collections::HashMap;
use std::path::Path;

use burn::store::burn_pack::Tensor as PackTensor;
use burn::store::{
    ApplyError, BurnToPyTorchAdapter, ChainAdapter, ModuleAdapter, ModuleContext, ModuleSnapshot, ModuleStore,
    PyTorchToBurnAdapter, PytorchStore, SafetensorsStore, bridge,
};
use burn::tensor::{Shape, TensorData};

use crate::error::ModelError;

/// What a weight import did with the file's keys.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadReport {
    /// Model parameters that were loaded.
    pub applied: usize,
    /// Model parameters the file lacks (only with `allow_missing`), named as the file would
    /// name them (torchvision or Cadene keys).
    pub missing: Vec<String>,
    /// File tensors the model has no place for (e.g. `fc.*` or `last_linear.*` for a headless
    /// backbone, `num_batches_tracked`), under their keys in the file.
    pub unused: Vec<String>,
}

/// The container of a weight file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WeightFormat {
    /// A `torch.save` pickle (`.pth`, `.pt`, `.bin`), legacy or zip.
    Pytorch,
    /// A safetensors file.
    Safetensors,
}

impl WeightFormat {
    /// The format named by `path`'s extension.
    pub(crate) fn of(path: &Path) -> Result<Self, ModelError> {
        match path.extension().and_then(|e| e.to_str()) {
            Some("safetensors") => Ok(Self::Safetensors),
            Some("pth" | "pt" | "bin") => Ok(Self::Pytorch),
            _ => Err(ModelError::Read {
                path: path.to_path_buf(),
                message: "unknown weight format: expected a .pth/.pt/.bin (torch.save) or .safetensors file".into(),
            }),
        }
    }
}

/// How a checkpoint's keys relate to a model's parameter paths. Both directions are plain
/// functions so that reports can name parameters the way the user's file does.
pub(crate) struct KeyLayout {
    /// File key → model parameter path. Normalisation parameters keep PyTorch's
    /// `weight`/`bias` here; [`PyTorchToBurnAdapter`] matches them to `gamma`/`beta`.
    pub(crate) to_model: fn(&str) -> String,
    /// Model parameter path (Burn names: `gamma`/`beta`) → file key, the inverse of
    /// `to_model` on every path the model has.
    pub(crate) to_file: fn(&str) -> String,
}

/// Loads the weight file at `path` into `module`.
///
/// A tensor whose shape differs from the model's is an error naming the file key and both
/// shapes; a model parameter the file lacks is an error unless `allow_missing`. Besides the
/// PyTorch → Burn conversion (transposed linear weights, `weight`/`bias` → `gamma`/`beta` for
/// batch norm), batch-norm tensors stored as `[1, C]` are read as `[C]`: Cadene's BN-Inception
/// checkpoint was written by PyTorch 0.2 with that shape, and every port of it squeezes them.
pub(crate) fn load<M: ModuleSnapshot>(
    module: &mut M,
    path: &Path,
    format: WeightFormat,
    layout: &KeyLayout,
    allow_missing: bool,
) -> Result<LoadReport, ModelError> {
    load_prefixed(module, path, format, layout, "", allow_missing)
}

/// [`load`] of the keys that start with `prefix` (removed before `layout` maps them): one part of
/// a file that holds several (`trunk.` and `embedder.` of a pytorch-metric-learning model saved
/// whole). Keys without the prefix are reported as unused under their own names.
pub(crate) fn load_prefixed<M: ModuleSnapshot>(
    module: &mut M,
    path: &Path,
    format: WeightFormat,
    layout: &KeyLayout,
    prefix: &str,
    allow_missing: bool,
) -> Result<LoadReport, ModelError> {
    if !path.is_file() {
        return Err(ModelError::Read {
            path: path.to_path_buf(),
            message: "no such file".into(),
        });
    }
    let read_error = |message: String| ModelError::Read {
        path: path.to_path_buf(),
        message,
    };
    // The stores are used only as readers: renaming and conversion happen below so that both
    // formats share one adapter (the PyTorch store fixes its own) and the report can name the
    // file's keys. Contiguous index remapping stays off: it would silently shift the blocks of
    // a checkpoint with a gap instead of reporting the gap.
    let tensors = match format {
        WeightFormat::Pytorch => all_tensors(PytorchStore::from_file(path).map_indices_contiguous(false)),
        WeightFormat::Safetensors => all_tensors(SafetensorsStore::from_file(path)),
    }
    .map_err(read_error)?;

    let mut file_key_of = HashMap::with_capacity(tensors.len());
    let tensors: Vec<PackTensor> = tensors
        .into_iter()
        .map(|mut tensor| {
            let model_path = match tensor.name.strip_prefix(prefix) {
                Some(key) => (layout.to_model)(key),
                // No model path starts with a space: the tensor stays unused, under its own key.
                None => format!(" {}", tensor.name),
            };
            file_key_of.insert(model_path.clone(), std::mem::replace(&mut tensor.name, model_path));
            tensor
        })
        .collect();
    let adapter = ChainAdapter::new(PyTorchToBurnAdapter, SqueezeBatchNorm);
    let result = module.apply(tensors, None, Some(Box::new(adapter)), true);

    if !result.errors.is_empty() {
        let message = result
            .errors
            .iter()
            .map(|e| match e {
                ApplyError::ShapeMismatch { path, expected, found } => format!(
                    "{}: the file has shape {:?}, the model expects {:?}",
                    (layout.to_file)(path),
                    found.as_slice(),
                    expected.as_slice()
                ),
                other => other.to_string(),
            })
            .collect::<Vec<_>>()
            .join("; ");
        return Err(ModelError::Mismatch {
            path: path.to_path_buf(),
            message,
        });
    }
    let missing: Vec<String> = result.missing.iter().map(|(p, _)| (layout.to_file)(p)).collect();
    if !missing.is_empty() && !allow_missing {
        return Err(ModelError::Missing {
            path: path.to_path_buf(),
            keys: missing,
        });
    }
    let mut unused: Vec<String> = result
        .unused
        .iter()
        .map(|p| file_key_of.get(p).cloned().unwrap_or_else(|| p.clone()))
        .collect();
    unused.sort();
    Ok(LoadReport {
        applied: result.applied.len(),
        missing,
        unused,
    })
}

/// Every tensor of the weight file at `path` (`.pth`/`.pt`/`.bin` as `torch.save` writes a
/// `state_dict`, or `.safetensors`) whose key `keep` accepts: its key, shape and values as `f32`,
/// sorted by key. For small modules read whole (an embedder); a backbone is loaded by its own
/// `load_weights`.
pub fn read_tensors(path: &Path, keep: impl Fn(&str) -> bool) -> Result<Vec<(String, TensorData)>, ModelError> {
    let mut out = Vec::new();
    for t in file_tensors(path)?.iter().filter(|t| keep(&t.name)) {
        let data = bridge::to_data(t)
            .map_err(|e| ModelError::Read {
                path: path.to_path_buf(),
                message: format!("{}: {e}", t.name),
            })?
            .convert::<f32>();
        out.push((t.name.clone(), data));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// The keys of every tensor of the weight file at `path`, sorted (shapes and values stay unread).
pub fn read_keys(path: &Path) -> Result<Vec<String>, ModelError> {
    let mut keys: Vec<String> = file_tensors(path)?.into_iter().map(|t| t.name).collect();
    keys.sort();
    Ok(keys)
}

/// Every tensor of the weight file at `path` (by its extension, see [`WeightFormat::of`]), unread.
fn file_tensors(path: &Path) -> Result<Vec<PackTensor>, ModelError> {
    if !path.is_file() {
        return Err(ModelError::Read {
            path: path.to_path_buf(),
            message: "no such file".into(),
        });
    }
    match WeightFormat::of(path)? {
        WeightFormat::Pytorch => all_tensors(PytorchStore::from_file(path).map_indices_contiguous(false)),
        WeightFormat::Safetensors => all_tensors(SafetensorsStore::from_file(path)),
    }
    .map_err(|message| ModelError::Read {
        path: path.to_path_buf(),
        message,
    })
}

/// One tensor to write: its key, shape and values.
pub(crate) struct Named {
    /// The key in the file.
    pub(crate) key: String,
    /// Its shape (`[]` for a scalar).
    pub(crate) shape: Vec<usize>,
    /// Little-endian bytes of `dtype`.
    pub(crate) bytes: Vec<u8>,
    /// `F32` or `I64`.
    pub(crate) dtype: safetensors::Dtype,
}

impl Named {
    /// An `f32` tensor.
    pub(crate) fn f32(key: String, shape: Vec<usize>, values: &[f32]) -> Self {
        Self {
            key,
            shape,
            bytes: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
            dtype: safetensors::Dtype::F32,
        }
    }
}

/// Writes `tensors` as a safetensors file at `path`, staged and renamed into place.
pub(crate) fn write_safetensors(path: &Path, tensors: &[Named]) -> Result<(), ModelError> {
    let write_error = |message: String| ModelError::Read {
        path: path.to_path_buf(),
        message,
    };
    let views = tensors
        .iter()
        .map(|t| {
            safetensors::tensor::TensorView::new(t.dtype, t.shape.clone(), &t.bytes)
                .map(|v| (t.key.clone(), v))
                .map_err(|e| write_error(format!("{}: {e}", t.key)))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let bytes = safetensors::serialize(views, None).map_err(|e| write_error(e.to_string()))?;
    let staged = path.with_extension("safetensors.partial");
    std::fs::write(&staged, bytes).map_err(|e| write_error(e.to_string()))?;
    std::fs::rename(&staged, path).map_err(|e| write_error(e.to_string()))
}

/// `module`'s tensors in PyTorch's conventions (linear weights `[out, in]`, batch norm's
/// `weight`/`bias`/`running_mean`/`running_var`, plus the `num_batches_tracked` counter PyTorch
/// keeps, as 0) under the file keys `to_file` gives, sorted: the inverse of [`load`].
pub(crate) fn pytorch_tensors<M: ModuleSnapshot>(
    module: &M,
    to_file: fn(&str) -> String,
) -> Result<Vec<Named>, ModelError> {
    let mut out = Vec::new();
    for t in module.collect(None, Some(Box::new(BurnToPyTorchAdapter)), false) {
        let data = bridge::to_data(&t)
            .map_err(|e| ModelError::Config(format!("reading {}: {e}", t.name)))?
            .convert::<f32>();
        let values = data
            .try_to_vec::<f32>()
            .map_err(|e| ModelError::Config(format!("reading {}: {e:?}", t.name)))?;
        let key = to_file(&t.name);
        if let Some(stem) = key.strip_suffix(".running_mean") {
            out.push(Named {
                key: format!("{stem}.num_batches_tracked"),
                shape: Vec::new(),
                bytes: 0i64.to_le_bytes().to_vec(),
                dtype: safetensors::Dtype::I64,
            });
        }
        out.push(Named::f32(key, t.shape.to_vec(), &values));
    }
    out.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(out)
}

/// Every tensor of a store, by value (their bytes stay unread until applied).
fn all_tensors<S: ModuleStore>(mut store: S) -> Result<Vec<PackTensor>, String> {
    Ok(store
        .get_all_tensors()
        .map_err(|e| e.to_string())?
        .values()
        .cloned()
        .collect())
}

/// Reads a batch-norm tensor stored as `[1, C]` as `[C]` (see [`load`]); every other tensor
/// passes through unchanged.
#[derive(Debug, Clone, Copy)]
struct SqueezeBatchNorm;

impl ModuleAdapter for SqueezeBatchNorm {
    fn adapt(&self, tensor: PackTensor, ctx: ModuleContext<'_>) -> PackTensor {
        if ctx.module_type() != Some("Struct:BatchNorm") || tensor.shape.len() != 2 || tensor.shape[0] != 1 {
            return tensor;
        }
        let shape = Shape::from([tensor.shape[1]]);
        let (name, dtype) = (tensor.name.clone(), tensor.dtype);
        let target = shape.clone();
        bridge::map_data(tensor, name, dtype, shape, move |data| {
            let (bytes, _, dtype) = data.into_parts();
            TensorData::from_bytes(bytes, target.clone(), dtype)
        })
    }

    fn clone_box(&self) -> Box<dyn ModuleAdapter> {
        Box::new(*self)
    }
}
