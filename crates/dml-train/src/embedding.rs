//! `train embed`: a run's embeddings of a list of images or of a dataset split, as `.npy`, with the
//! image paths (and the labels, for a dataset) beside them; in the run's evaluation preprocessing.
//! Images are decoded a batch at a time and every batch's rows go straight to the file, so memory
//! does not grow with the split (the paths and labels, a few bytes per image, are kept).

use std::io::Write;
use std::path::{Path, PathBuf};

use burn::tensor::{Tensor, TensorData};
use dml_data::{Pipeline, Split, decode_rgb};
use rand::SeedableRng;

use crate::data;
use crate::error::TrainError;
use crate::model::RunRef;
use crate::npy::{self, NpyRows};
use crate::progress::Progress;
use crate::retrieval::embed::each_batch;

/// What to embed.
#[derive(Debug, Clone)]
pub enum EmbedSource {
    /// These image files, in this order.
    Images(Vec<PathBuf>),
    /// Every image of a split of a dataset (the run's when `None`), in manifest order.
    Split {
        /// A dataset name or manifest path, as `data.dataset` takes it.
        dataset: Option<String>,
        /// The split.
        split: Split,
    },
}

/// What `train embed` is asked to do.
#[derive(Debug, Clone)]
pub struct EmbedRequest {
    /// The run, its checkpoint and the device.
    pub run: RunRef,
    /// The images.
    pub source: EmbedSource,
    /// The `.npy` file of the embeddings `[N, D]` float32; `<stem>.paths.txt` (one image per line)
    /// and, for a dataset, `<stem>.labels.npy` (`int64 [N]`) are written beside it.
    pub out: PathBuf,
    /// Images per forward pass.
    pub batch_size: usize,
}

/// What `train embed` wrote.
#[derive(Debug, Clone)]
pub struct EmbedOutcome {
    /// Images embedded.
    pub rows: usize,
    /// Embedding dimension.
    pub dim: usize,
    /// The files written.
    pub files: Vec<PathBuf>,
}

/// `out` with its extension replaced by `suffix` (`.paths.txt`, `.labels.npy`).
fn beside(out: &Path, suffix: &str) -> PathBuf {
    let stem = out
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    out.with_file_name(format!("{stem}{suffix}"))
}

/// The embeddings `[B, D]` of a batch `x` and `D`, read back; a non-finite one is an error naming
/// its image (`name(row)`).
fn embed_batch(
    model: &dml_models::EmbeddingModel,
    x: Tensor<4>,
    name: impl Fn(usize) -> String,
) -> Result<(Vec<f32>, usize), TrainError> {
    let out = model.forward(x);
    let dim = out.dims()[1];
    let v = out
        .into_data()
        .convert::<f32>()
        .try_into_vec::<f32>()
        .map_err(|e| TrainError::Argument(format!("reading the embeddings back: {e:?}")))?;
    if let Some(i) = v.iter().position(|x| !x.is_finite()) {
        return Err(TrainError::Argument(format!(
            "{}: its embedding is not finite",
            name(i / dim.max(1))
        )));
    }
    Ok((v, dim))
}

/// Embeds the images of `req` and writes the files (each atomically).
pub fn run_embed(req: &EmbedRequest, progress: &dyn Progress) -> Result<EmbedOutcome, TrainError> {
    if req.batch_size == 0 {
        return Err(TrainError::Argument("--batch-size: must be at least 1".into()));
    }
    if req.out.extension().and_then(|e| e.to_str()) != Some("npy") {
        return Err(TrainError::Argument(format!(
            "--out {}: must name a .npy file",
            req.out.display()
        )));
    }
    if let EmbedSource::Images(paths) = &req.source {
        if paths.is_empty() {
            return Err(TrainError::Argument(
                "give images to embed, or --dataset/--split".into(),
            ));
        }
        if let Some(missing) = paths.iter().find(|p| !p.is_file()) {
            return Err(TrainError::Argument(format!("{}: no such image", missing.display())));
        }
    }
    let mut run = req.run.load(progress)?;
    let transform = data::eval_transform(&run.config.data);
    if let Some(parent) = req.out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| TrainError::io(parent, e))?;
    }
    let (rows, dim, paths, labels) = match &req.source {
        EmbedSource::Images(paths) => {
            let pipeline = Pipeline::new(transform)?;
            let bar = progress.bar(paths.len(), "embed");
            let mut rows = NpyRows::create(&req.out, paths.len())?;
            let mut dim = 0;
            for chunk in paths.chunks(req.batch_size) {
                let mut values = Vec::new();
                let mut size = None;
                for path in chunk {
                    let image = decode_rgb(path)?;
                    let (w, h) = pipeline.output_size(image.width(), image.height());
                    if size.is_some_and(|s| s != (h, w)) {
                        return Err(TrainError::Argument(format!(
                            "{}: transforms to {h}x{w}, unlike the images before it",
                            path.display()
                        )));
                    }
                    size = Some((h, w));
                    // The evaluation transform has no random choice; the generator is only its argument.
                    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
                    values.extend(pipeline.apply(&image, &mut rng));
                }
                let (h, w) = size.unwrap_or((0, 0));
                let x = Tensor::<4>::from_data(
                    TensorData::new(values, [chunk.len(), 3, h as usize, w as usize]),
                    &run.device,
                );
                let v;
                (v, dim) = embed_batch(&run.model, x, |i| chunk[i].display().to_string())?;
                rows.push(&v, dim)?;
                bar.step(None);
            }
            bar.finish();
            (
                rows,
                dim,
                paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
                None,
            )
        }
        EmbedSource::Split { dataset, split } => {
            if let Some(d) = dataset {
                run.config.data.dataset = d.clone();
            }
            let manifest = data::load_manifest(&run.config.data, progress)?;
            let ds = data::split_dataset(&manifest, *split, transform)?.ok_or_else(|| {
                TrainError::Argument(format!(
                    "the {} split of {} has no image",
                    split.as_str(),
                    run.config.data.dataset
                ))
            })?;
            let bar = progress.bar(ds.len().div_ceil(req.batch_size), "embed");
            let mut rows = NpyRows::create(&req.out, ds.len())?;
            let (mut dim, mut paths) = (0, Vec::new());
            let labels = each_batch(
                &ds,
                req.batch_size,
                run.config.data.threads,
                &run.device,
                |images, items| {
                    let record = |k: usize| &manifest.records[ds.record_index(items[k])];
                    let v;
                    (v, dim) = embed_batch(&run.model, images, |k| record(k).path.clone())?;
                    paths.extend((0..items.len()).map(|k| manifest.image_path(record(k)).display().to_string()));
                    rows.push(&v, dim)?;
                    bar.step(None);
                    Ok(())
                },
            )?;
            bar.finish();
            (rows, dim, paths, Some(labels))
        }
    };
    let n = paths.len();
    rows.finish()?;
    let mut files = vec![req.out.clone()];
    let paths_file = beside(&req.out, ".paths.txt");
    let mut text = Vec::new();
    for p in &paths {
        writeln!(text, "{p}").map_err(|e| TrainError::io(&paths_file, e))?;
    }
    dml_data::write_atomic(&paths_file, &text).map_err(|e| TrainError::io(&paths_file, e))?;
    files.push(paths_file);
    if let Some(labels) = labels {
        let labels_file = beside(&req.out, ".labels.npy");
        let labels: Vec<i64> = labels.into_iter().map(i64::from).collect();
        npy::write(&labels_file, &labels, &[n])?;
        files.push(labels_file);
    }
    Ok(EmbedOutcome { rows: n, dim, files })
}
