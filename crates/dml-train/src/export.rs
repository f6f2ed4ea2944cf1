//! `train export`: a run's trunk and embedder in PyTorch's layout (torchvision's or Cadene's trunk,
//! an `nn.Linear` embedder, as pytorch-metric-learning's examples build them), as safetensors files
//! that `load_state_dict` takes as they are, with the lines of PyTorch that load them.

use std::path::{Path, PathBuf};

use crate::error::TrainError;
use crate::model::RunRef;
use crate::progress::Progress;

/// What `train export` is asked to do.
#[derive(Debug, Clone)]
pub struct ExportRequest {
    /// The run, its checkpoint and the device.
    pub run: RunRef,
    /// The folder to write `trunk.safetensors`, `embedder.safetensors` and `README.md` into
    /// (created; staged beside it and renamed into place).
    pub out: PathBuf,
}

/// The PyTorch that loads an export of `backbone` (`resnet18`, `resnet50`, `bn_inception`) whose
/// embedder's layers are `widths` (`[out, in]` each; ReLUs between them when `relu`).
fn snippet(backbone: &str, widths: &[[usize; 2]], relu: bool, normalize: bool) -> String {
    let trunk = match backbone {
        "bn_inception" => "pretrainedmodels.bninception(pretrained=None)  # Cadene's layout, BGR input".to_string(),
        other => format!("torchvision.models.{other}()"),
    };
    let linear = |[out, inp]: [usize; 2]| format!("torch.nn.Linear({inp}, {out})");
    let embedder = match widths {
        [one] => linear(*one),
        many => {
            let layers: Vec<String> = many.iter().map(|w| linear(*w)).collect();
            let sep = if relu { ", torch.nn.ReLU(), " } else { ", " };
            format!("torch.nn.Sequential({})", layers.join(sep))
        }
    };
    let norm = if normalize {
        "\n# The run L2-normalises its embeddings:\n# e = torch.nn.functional.normalize(embedder(trunk(x)), dim=1)"
    } else {
        ""
    };
    format!(
        "# A model exported by `train export`: the trunk and the embedder of pytorch-metric-learning's\n\
         # examples, loaded with load_state_dict as they are.\n\n\
         ```python\n\
         import torch, torchvision, safetensors.torch\n\
         trunk = {trunk}\n\
         trunk.{head} = torch.nn.Identity()\n\
         trunk.load_state_dict(safetensors.torch.load_file(\"trunk.safetensors\"))\n\
         embedder = {embedder}\n\
         embedder.load_state_dict(safetensors.torch.load_file(\"embedder.safetensors\"))\n\
         trunk.eval(); embedder.eval(){norm}\n\
         ```\n",
        head = if backbone == "bn_inception" {
            "last_linear"
        } else {
            "fc"
        },
    )
}

/// Writes the export of `req` and returns its files.
pub fn run_export(req: &ExportRequest, progress: &dyn Progress) -> Result<Vec<PathBuf>, TrainError> {
    let run = req.run.load(progress)?;
    if run.avsl.is_some() {
        return Err(TrainError::Argument(format!(
            "run {} was trained with [avsl] enabled = true: AVSL's multi-level embedder has no PyTorch counterpart \
             in pytorch-metric-learning's layout, so it cannot be exported",
            req.run.run.display()
        )));
    }
    let backbone = run.config.model.backbone.clone();
    if !crate::import::IMPORT_BACKBONES.contains(&backbone.as_str()) {
        return Err(TrainError::Argument(format!(
            "run {}: the {backbone} backbone has no PyTorch layout to export to (only {})",
            req.run.run.display(),
            crate::import::IMPORT_BACKBONES.join(", ")
        )));
    }
    let name = req
        .out
        .file_name()
        .ok_or_else(|| TrainError::Argument(format!("--out {}: names no folder", req.out.display())))?;
    let parent = match req.out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent).map_err(|e| TrainError::io(&parent, e))?;
    let staging = parent.join(format!(".{}.export-{}", name.to_string_lossy(), std::process::id()));
    if staging.exists() {
        std::fs::remove_dir_all(&staging).map_err(|e| TrainError::io(&staging, e))?;
    }
    std::fs::create_dir_all(&staging).map_err(|e| TrainError::io(&staging, e))?;
    let written = (|| -> Result<(), TrainError> {
        run.model.backbone.save_trunk(&staging.join("trunk.safetensors"))?;
        run.model.head.save_embedder(&staging.join("embedder.safetensors"))?;
        let widths: Vec<[usize; 2]> = run.model.head.layers().iter().map(|(w, _)| w.dims()).collect();
        let (_, relu) = run.model.head.hidden_layout();
        let readme = staging.join("README.md");
        std::fs::write(&readme, snippet(&backbone, &widths, relu, run.config.model.normalize))
            .map_err(|e| TrainError::io(&readme, e))
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(e);
    }
    replace_dir(&staging, &req.out)?;
    Ok(["trunk.safetensors", "embedder.safetensors", "README.md"]
        .iter()
        .map(|f| req.out.join(f))
        .collect())
}

/// Moves `staged` to `destination`, an existing one first renamed aside and removed after.
fn replace_dir(staged: &Path, destination: &Path) -> Result<(), TrainError> {
    let old = destination.with_extension("replaced");
    if destination.exists() {
        std::fs::rename(destination, &old).map_err(|e| TrainError::io(destination, e))?;
    }
    std::fs::rename(staged, destination).map_err(|e| TrainError::io(destination, e))?;
    if old.exists() {
        std::fs::remove_dir_all(&old).map_err(|e| TrainError::io(&old, e))?;
    }
    Ok(())
}
