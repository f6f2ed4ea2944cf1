//! Finding (or preparing on first use) the dataset of a run and building its splits.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use dml_data::{Crop, ImageDataset, Manifest, Pipeline, Split, TransformConfig};
use dml_datasets::DatasetError;

use crate::config::{DataConfig, TrainConfig};
use crate::error::TrainError;
use crate::progress::Progress;

/// Serialises the preparation of datasets on first use within this process: two runs of
/// one process (parallel tests, a sweep run from threads) that need the same set find it
/// prepared by whichever came first instead of writing it twice.
static PREPARING: Mutex<()> = Mutex::new(());

/// The manifest path a dataset setting refers to, preparing `synth`, `synth-parts` or
/// `fashion-mnist` under `root` when it does not exist yet (through a staging directory, so an
/// interrupted preparation leaves nothing half-written behind). Any other plain name is a set
/// that `cargo xtask prepare <name>` wrote into `root/<name>`; anything else is the path of a
/// manifest (or of its directory).
///
/// A set generated or prepared here is announced through `progress` before the work starts.
pub fn resolve_manifest(data: &DataConfig, progress: &dyn Progress) -> Result<PathBuf, TrainError> {
    let dir = match data.dataset.as_str() {
        "synth" | "synth-parts" => data
            .root
            .join(format!("{}-n{}-s{}", data.dataset, data.synth_images, data.synth_size)),
        "fashion-mnist" => data.root.join(dml_datasets::fashion_mnist::NAME),
        name if is_plain_name(name) => return prepared_manifest(&data.root, name),
        path => return existing_manifest(path),
    };
    let manifest = dir.join("manifest.csv");
    // A poisoned lock only means that another run's preparation panicked; its staging
    // directory is gone, so preparing again is safe.
    let _preparing = PREPARING.lock().unwrap_or_else(PoisonError::into_inner);
    if manifest.is_file() {
        return Ok(manifest);
    }
    // Seed 0 always for the rendered sets: the directory name records only the count and the
    // size, so every run that names them must find the same images there.
    let prepared = if data.dataset == "synth" {
        progress.note(&format!("generating the synthetic set in {} …", dir.display()));
        let synth = dml_datasets::synth::SynthConfig {
            n: data.synth_images,
            seed: 0,
            size: data.synth_size,
        };
        dml_datasets::synth::generate(&synth, &dir, false)
    } else if data.dataset == "synth-parts" {
        progress.note(&format!("generating the synthetic parts set in {} …", dir.display()));
        let parts = dml_datasets::synth::parts::PartsConfig {
            n: data.synth_images,
            seed: 0,
            size: data.synth_size,
        };
        dml_datasets::synth::parts::generate(&parts, &dir, false)
    } else {
        let src = Path::new(dml_datasets::fashion_mnist::DEFAULT_SOURCE);
        progress.note(&format!(
            "preparing Fashion-MNIST from {} into {} …",
            src.display(),
            dir.display()
        ));
        dml_datasets::fashion_mnist::prepare(src, &dir, &dml_datasets::PrepareOptions::default())
    };
    match prepared {
        Ok(_) => Ok(manifest),
        // Another process finished the same dataset first: theirs is as good as ours.
        Err(DatasetError::OutputExists { .. }) if manifest.is_file() => Ok(manifest),
        Err(e) if data.dataset.starts_with("synth") => Err(TrainError::Dataset(format!(
            "data.dataset = {:?}: cannot generate it: {e}",
            data.dataset
        ))),
        Err(e) => Err(TrainError::Dataset(format!(
            "data.dataset = \"fashion-mnist\": cannot prepare it ({e}); install the Debian package \
             dataset-fashion-mnist or run `cargo xtask prepare fashion-mnist --src DIR`"
        ))),
    }
}

/// Whether a `data.dataset` value is a dataset's name rather than a path: no directory separator
/// and no file extension.
fn is_plain_name(value: &str) -> bool {
    !value.is_empty() && !value.contains(['/', '\\', '.'])
}

/// The manifest of a set prepared under `root` by `cargo xtask prepare <name>` (its default
/// `--out data/<name>`).
fn prepared_manifest(root: &Path, name: &str) -> Result<PathBuf, TrainError> {
    let manifest = root.join(name).join("manifest.csv");
    if manifest.is_file() {
        return Ok(manifest);
    }
    if let Some(near) = nearest_set(root, name) {
        return Err(TrainError::Dataset(format!(
            "data.dataset = {name:?}: no such set; did you mean {near:?}?"
        )));
    }
    if Path::new(name).is_dir() {
        return Err(TrainError::Dataset(format!(
            "data.dataset = {name:?}: a plain name is a set prepared under data.root ({}); to use the folder \
             {name} of this directory, give it as a path: ./{name}",
            root.display()
        )));
    }
    Err(TrainError::Dataset(format!(
        "data.dataset = {name:?}: {} does not exist; prepare it with `cargo xtask prepare {name} --src …` \
         (or set data.root to where it was prepared), or give \"synth\", \"synth-parts\", \"fashion-mnist\" or the path \
         of a manifest.csv",
        manifest.display()
    )))
}

/// The set name nearest to `name` (by normalised Damerau–Levenshtein similarity, at least 0.7):
/// the built-in sets and every set prepared under `root`.
fn nearest_set(root: &Path, name: &str) -> Option<String> {
    let mut known: Vec<String> = ["synth", "synth-parts", "fashion-mnist"].map(String::from).to_vec();
    if let Ok(entries) = std::fs::read_dir(root) {
        known.extend(
            entries
                .flatten()
                .filter(|e| e.path().join("manifest.csv").is_file())
                .map(|e| e.file_name().to_string_lossy().into_owned()),
        );
    }
    known
        .into_iter()
        .map(|k| (strsim::normalized_damerau_levenshtein(&k, name), k))
        .filter(|(score, _)| *score >= 0.7)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, k)| k)
}

/// The manifest a `data.dataset` path names: the path itself or `manifest.csv` inside it.
fn existing_manifest(path: &str) -> Result<PathBuf, TrainError> {
    let p = Path::new(path);
    let manifest = if p.is_dir() {
        p.join("manifest.csv")
    } else {
        p.to_path_buf()
    };
    if !manifest.is_file() {
        return Err(TrainError::Dataset(format!(
            "data.dataset: {} does not exist; give \"synth\", \"synth-parts\", \"fashion-mnist\", a folder of \
             class subfolders (DIR/<class>/<image>, or DIR/train/<class>/… and DIR/test/<class>/…) or the path of \
             a manifest.csv with the columns path,class_id,class_name,split (see `cargo xtask prepare --help`)",
            manifest.display()
        )));
    }
    Ok(manifest)
}

/// The manifest of a run, with `val_classes` held out: a named or prepared set's `manifest.csv`,
/// or, for a folder of class subfolders, the manifest [`dml_datasets::folder`] derives from it
/// (classes sorted by name, the first half `train`; or the folder's own `train/` and `test/`).
pub fn load_manifest(data: &DataConfig, progress: &dyn Progress) -> Result<Arc<Manifest>, TrainError> {
    // A folder of class subfolders (or of train/ and test/ folders of them) without a manifest.
    let folder = Path::new(&data.dataset);
    let mut manifest = if !is_plain_name(&data.dataset) && dml_datasets::folder::is_image_folder(folder) {
        dml_datasets::folder::folder_manifest(folder)
            .map_err(|e| TrainError::Dataset(format!("data.dataset = {:?}: {e}", data.dataset)))?
    } else {
        Manifest::read(resolve_manifest(data, progress)?)?
    };
    manifest.hold_out_val_classes(data.val_classes)?;
    Ok(Arc::new(manifest))
}

/// The training transform: random-resized crop (area 0.25–1, a milder range than
/// ImageNet's 0.08 because DML images are object-centred) and flips when augmenting,
/// otherwise the evaluation transform.
pub fn train_transform(data: &DataConfig) -> TransformConfig {
    if data.augment {
        TransformConfig {
            crop: Crop::RandomResized {
                size: data.image_size,
                scale: (0.25, 1.0),
                ratio: (3.0 / 4.0, 4.0 / 3.0),
            },
            mean: data.mean,
            std: data.std,
            ..TransformConfig::train(data.image_size)
        }
    } else {
        eval_transform(data)
    }
}

/// The evaluation transform: the shorter side resized to `data.eval_resize` (the input size when
/// 0), centre crop of the input size.
pub fn eval_transform(data: &DataConfig) -> TransformConfig {
    TransformConfig {
        resize: Some(if data.eval_resize == 0 {
            data.image_size
        } else {
            data.eval_resize
        }),
        crop: Crop::Center { size: data.image_size },
        mean: data.mean,
        std: data.std,
        ..TransformConfig::eval(data.image_size)
    }
}

/// The images of `split` (or, for `test` on a query/gallery dataset such as In-shop,
/// `None`: the caller evaluates query against gallery instead).
pub fn split_dataset(
    manifest: &Arc<Manifest>,
    split: Split,
    transform: TransformConfig,
) -> Result<Option<Arc<ImageDataset>>, TrainError> {
    let ds = ImageDataset::new(manifest.clone(), &[split], Pipeline::new(transform)?);
    Ok((!ds.is_empty()).then(|| Arc::new(ds)))
}

/// Dense class indices `0..C` for the training labels (proxies and class weights need
/// them), in ascending class-id order.
pub fn dense_labels(labels: &[u32]) -> (Vec<u32>, usize) {
    let mut ids: Vec<u32> = labels.to_vec();
    ids.sort_unstable();
    ids.dedup();
    let dense = labels
        .iter()
        .map(|l| ids.binary_search(l).expect("label from the same list") as u32)
        .collect();
    (dense, ids.len())
}

/// The images a reported evaluation runs on: one set (every image queries all others)
/// or, for datasets such as In-shop, separate query and gallery sets.
#[derive(Debug, Clone)]
pub enum EvalData {
    /// Query = reference.
    Single(Arc<ImageDataset>),
    /// Query against gallery.
    QueryGallery {
        /// The query images.
        query: Arc<ImageDataset>,
        /// The gallery images.
        gallery: Arc<ImageDataset>,
    },
}

impl EvalData {
    /// The images of `split`; `test` on a manifest without test rows but with query and
    /// gallery rows means query against gallery. `None` when the split has no image.
    pub fn of_split(
        manifest: &Arc<Manifest>,
        split: Split,
        transform: &TransformConfig,
    ) -> Result<Option<Self>, TrainError> {
        let get = |s| split_dataset(manifest, s, transform.clone());
        if let Some(ds) = get(split)? {
            return Ok(Some(Self::Single(ds)));
        }
        if split == Split::Test
            && let (Some(query), Some(gallery)) = (get(Split::Query)?, get(Split::Gallery)?)
        {
            return Ok(Some(Self::QueryGallery { query, gallery }));
        }
        Ok(None)
    }

    /// `f` of every set: `(f(single), None)` or `(f(query), Some(f(gallery)))`.
    pub fn embed_each<T, E>(&self, mut f: impl FnMut(&Arc<ImageDataset>) -> Result<T, E>) -> Result<(T, Option<T>), E> {
        match self {
            Self::Single(ds) => Ok((f(ds)?, None)),
            Self::QueryGallery { query, gallery } => Ok((f(query)?, Some(f(gallery)?))),
        }
    }
}

/// The datasets of a training run: its train split and the splits it evaluates on.
pub struct RunData {
    /// The train split, with the training transform.
    pub train: Arc<ImageDataset>,
    /// Dense class indices `0..C` of the train split's images ([`dense_labels`]).
    pub dense: Vec<u32>,
    /// Classes `C` of the train split.
    pub num_classes: usize,
    /// The split whose metrics are reported (`eval.split`).
    pub report: EvalData,
    /// The `val` split when the dataset has one (and it is not the reported split).
    pub val: Option<EvalData>,
}

impl RunData {
    /// The splits of `config`'s dataset, prepared on first use (announced through `progress`).
    pub fn load(config: &TrainConfig, progress: &dyn Progress) -> Result<Self, TrainError> {
        let manifest = load_manifest(&config.data, progress)?;
        let train = split_dataset(&manifest, Split::Train, train_transform(&config.data))?.ok_or_else(|| {
            TrainError::Config(format!(
                "data.dataset {}: the manifest has no train images",
                config.data.dataset
            ))
        })?;
        let (dense, num_classes) = dense_labels(train.labels());
        let transform = eval_transform(&config.data);
        let split: Split = config
            .eval
            .split
            .parse()
            .map_err(|e| TrainError::Config(format!("eval.split: {e}")))?;
        let report = EvalData::of_split(&manifest, split, &transform)?.ok_or_else(|| {
            TrainError::Config(format!(
                "eval.split = {:?}: the dataset {} has no images in that split",
                config.eval.split, config.data.dataset
            ))
        })?;
        let val = if split == Split::Val {
            None
        } else {
            EvalData::of_split(&manifest, Split::Val, &transform)?
        };
        Ok(Self {
            train,
            dense,
            num_classes,
            report,
            val,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::progress::Silent;

    #[test]
    fn dense_labels_keep_order_of_ids() {
        let (d, c) = dense_labels(&[7, 3, 7, 10]);
        assert_eq!(d, vec![1, 0, 1, 2]);
        assert_eq!(c, 3);
    }

    #[test]
    fn a_prepared_set_is_found_by_its_name_and_a_missing_one_says_how_to_prepare_it() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("cub200")).unwrap();
        std::fs::write(
            root.path().join("cub200/manifest.csv"),
            "path,class_id,class_name,split\n",
        )
        .unwrap();
        let data = |name: &str| DataConfig {
            dataset: name.into(),
            root: root.path().to_path_buf(),
            ..DataConfig::default()
        };
        assert_eq!(
            resolve_manifest(&data("cub200"), &Silent).unwrap(),
            root.path().join("cub200/manifest.csv")
        );
        let e = resolve_manifest(&data("cars196"), &Silent).unwrap_err().to_string();
        assert!(
            e.contains("cars196/manifest.csv") && e.contains("cargo xtask prepare cars196"),
            "{e}"
        );
    }

    #[test]
    fn a_missing_manifest_is_named() {
        let data = DataConfig {
            dataset: "/no/such/manifest.csv".into(),
            ..DataConfig::default()
        };
        let e = resolve_manifest(&data, &Silent).unwrap_err().to_string();
        assert!(e.contains("/no/such/manifest.csv") && e.contains("synth"), "{e}");
    }

    #[test]
    fn normalisation_reaches_both_transforms_and_defaults_to_imagenet() {
        let sets = [
            "data.mean=[0.5, 0.45, 0.4]".to_string(),
            "data.std=[0.004, 0.004, 0.004]".to_string(),
        ];
        let config = crate::TrainConfig::resolve(None, &crate::Shortcuts::default(), &sets).unwrap();
        for t in [train_transform(&config.data), eval_transform(&config.data)] {
            assert_eq!((t.mean, t.std), ([0.5, 0.45, 0.4], [0.004; 3]));
        }
        let default = crate::TrainConfig::resolve(None, &crate::Shortcuts::default(), &[]).unwrap();
        assert_eq!(default.data.mean, dml_data::transform::IMAGENET_MEAN);
        assert_eq!(default.data.std, dml_data::transform::IMAGENET_STD);
    }
}
