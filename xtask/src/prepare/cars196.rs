//! Cars196 (Stanford Cars, Krause et al., 2013) in the deep-metric-learning protocol.
//!
//! The source is a directory holding the official `cars_annos.mat` and the images,
//! either as `car_ims.tgz` (members `car_ims/000001.jpg` …) or as the `car_ims/`
//! directory it extracts to; the directory is preferred when both are present, because
//! it is read without decompressing 1.9 GB.
//!
//! `cars_annos.mat` is a MATLAB file with two variables:
//!
//! - `annotations`: a 1×16185 struct array with fields `relative_im_path`
//!   (`'car_ims/000001.jpg'`), `bbox_x1`, `bbox_y1`, `bbox_x2`, `bbox_y2`, `class`
//!   (1–196) and `test` (0/1);
//! - `class_names`: a 1×196 cell array of class names.
//!
//! The DML split is by class, not the official `test` flag (which splits every class
//! into train and test images): classes 1–98 are trained on and classes 99–196 are test
//! classes. Class ids are the official ones, class names come from `class_names`, and
//! the images keep their official names below `images/car_ims/`. Bounding boxes are not
//! used.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use dml_data::{Manifest, Record, Split};

use super::archive::{self, Source};
use super::mat::{self, MatValue, StructArray};
use super::verify::verify_images;

/// The annotation file of the official release.
const ANNOTATIONS: &str = "cars_annos.mat";
/// The image directory, which is also the top-level directory of the image archive.
const IMAGE_DIR: &str = "car_ims";
/// The image archive of the official release.
const IMAGE_ARCHIVE: &str = "car_ims.tgz";
/// Classes up to this id are training classes; the others are test classes.
const LAST_TRAIN_CLASS: u32 = 98;
/// The number of classes of the dataset.
const NUM_CLASSES: u32 = 196;

/// One entry of the `annotations` struct array that the manifest needs.
struct Annotation {
    /// The official relative path, `car_ims/NNNNNN.jpg`.
    path: String,
    /// The official class, 1–196.
    class: u32,
}

/// Reads Cars196 from the directory `src`, copies the listed images to
/// `dir/images/car_ims/` and returns the manifest (rooted at `dir`) with classes 1–98 as
/// `train` and 99–196 as `test`. Every image is checked to decode.
pub fn build(src: &Path, dir: &Path) -> anyhow::Result<Manifest> {
    if !src.is_dir() {
        bail!(
            "Cars196: --src {} must be the directory holding {ANNOTATIONS} and {IMAGE_ARCHIVE} or {IMAGE_DIR}/",
            src.display()
        );
    }
    let mat_path = src.join(ANNOTATIONS);
    if !mat_path.is_file() {
        bail!(
            "Cars196: {} is missing; download {ANNOTATIONS} from the Stanford Cars site into {}",
            mat_path.display(),
            src.display()
        );
    }
    let variables = mat::read_mat(&mat_path).context("Cars196: cannot read the annotations")?;
    let label = mat_path.display().to_string();
    let annotations = parse_annotations(&variables, &label)?;
    let class_names = parse_class_names(&variables, &label, &annotations)?;

    let source = image_source(src)?;
    let mut manifest = Manifest::new(dir, vec![]);
    let mut files: Vec<(String, PathBuf)> = Vec::with_capacity(annotations.len());
    for annotation in &annotations {
        let rel = format!("images/{}", annotation.path);
        files.push((annotation.path.clone(), dir.join(&rel)));
        manifest.records.push(Record {
            path: rel,
            class_id: annotation.class,
            class_name: class_names[&annotation.class].clone(),
            split: if annotation.class <= LAST_TRAIN_CLASS {
                Split::Train
            } else {
                Split::Test
            },
            properties: vec![],
        });
    }
    source.extract(&files).context("Cars196: cannot copy the images")?;
    verify_images(&manifest).context("Cars196: corrupt images")?;
    Ok(manifest)
}

/// Chooses where the images come from: the extracted `car_ims/` directory if there is
/// one, else `car_ims.tgz`. Either way the members are named `car_ims/NNNNNN.jpg`, like
/// the annotation paths.
fn image_source(src: &Path) -> anyhow::Result<Source> {
    if src.join(IMAGE_DIR).is_dir() {
        return Source::open(src).context("Cars196: cannot open the image directory");
    }
    let archive = src.join(IMAGE_ARCHIVE);
    if archive.is_file() {
        return Source::open(&archive).context("Cars196: cannot open the image archive");
    }
    bail!(
        "Cars196: {} holds neither {IMAGE_ARCHIVE} nor an extracted {IMAGE_DIR}/ directory",
        src.display()
    )
}

/// A variable of the MAT-file, or an error naming it and listing the variables present.
fn variable<'a>(variables: &'a BTreeMap<String, MatValue>, name: &str, label: &str) -> anyhow::Result<&'a MatValue> {
    variables.get(name).with_context(|| {
        let present: Vec<&str> = variables.keys().map(String::as_str).collect();
        format!(
            "Cars196: {label} has no variable `{name}` (it holds: {}); is this the official {ANNOTATIONS}?",
            if present.is_empty() {
                "nothing".to_string()
            } else {
                present.join(", ")
            }
        )
    })
}

/// A field of the `annotations` struct array, or an error naming it.
fn require_field(annotations: &StructArray, name: &str, label: &str) -> anyhow::Result<()> {
    if annotations.field_index(name).is_none() {
        bail!(
            "Cars196: {label}: `annotations` has no field `{name}` (its fields: {})",
            annotations.field_names.join(", ")
        );
    }
    Ok(())
}

/// Reads `relative_im_path` and `class` of every element of `annotations`, checking
/// that paths are safe, unique names below `car_ims/` and classes lie in 1–196. Errors
/// name the annotation by its 1-based (MATLAB) index.
fn parse_annotations(variables: &BTreeMap<String, MatValue>, label: &str) -> anyhow::Result<Vec<Annotation>> {
    let value = variable(variables, "annotations", label)?;
    let Some(annotations) = value.as_struct() else {
        bail!(
            "Cars196: {label}: `annotations` is a {}, expected a struct array",
            value.describe()
        );
    };
    require_field(annotations, "relative_im_path", label)?;
    require_field(annotations, "class", label)?;
    if annotations.is_empty() {
        bail!("Cars196: {label}: `annotations` is empty");
    }

    let mut first_index: HashMap<String, usize> = HashMap::with_capacity(annotations.len());
    let mut parsed = Vec::with_capacity(annotations.len());
    for element in 0..annotations.len() {
        let index = element + 1;
        let field = |name: &str| {
            annotations
                .get(element, name)
                .with_context(|| format!("Cars196: {label}: annotation {index} has no `{name}` value"))
        };
        let path_value = field("relative_im_path")?;
        let Some(path) = path_value.text() else {
            bail!(
                "Cars196: {label}: annotation {index}: relative_im_path is a {}, expected text",
                path_value.describe()
            );
        };
        let path = path.trim().to_string();
        let safe = archive::normalize(&path).filter(|p| *p == path && p.starts_with(&format!("{IMAGE_DIR}/")));
        if safe.is_none() {
            bail!("Cars196: {label}: annotation {index}: relative_im_path {path:?} is not a file below {IMAGE_DIR}/");
        }
        if let Some(first) = first_index.insert(path.clone(), index) {
            bail!("Cars196: {label}: annotation {index}: {path} is listed twice (first as annotation {first})");
        }

        let class_value = field("class")?;
        let Some(class) = class_value.scalar() else {
            bail!(
                "Cars196: {label}: annotation {index} ({path}): class is a {}, expected a number",
                class_value.describe()
            );
        };
        if !(class.fract() == 0.0 && (1.0..=f64::from(NUM_CLASSES)).contains(&class)) {
            bail!("Cars196: {label}: annotation {index} ({path}): class {class} is outside 1–{NUM_CLASSES}");
        }
        parsed.push(Annotation {
            path,
            // The check above makes the conversion exact.
            class: class as u32,
        });
    }
    Ok(parsed)
}

/// Reads the names of the classes that `annotations` uses from the `class_names` cell
/// array (entry `c` names class `c`, 1-based).
fn parse_class_names(
    variables: &BTreeMap<String, MatValue>,
    label: &str,
    annotations: &[Annotation],
) -> anyhow::Result<HashMap<u32, String>> {
    let value = variable(variables, "class_names", label)?;
    let Some(cell) = value.as_cell() else {
        bail!(
            "Cars196: {label}: `class_names` is a {}, expected a cell array",
            value.describe()
        );
    };
    let mut names = HashMap::new();
    for annotation in annotations {
        let class = annotation.class;
        if names.contains_key(&class) {
            continue;
        }
        let Some(entry) = cell.items.get(class as usize - 1) else {
            bail!(
                "Cars196: {label}: `class_names` has {} entries, but {} uses class {class}",
                cell.items.len(),
                annotation.path
            );
        };
        let Some(name) = entry.text() else {
            bail!(
                "Cars196: {label}: class_names{{{class}}} is a {}, expected text",
                entry.describe()
            );
        };
        let name = name.trim();
        if name.is_empty() {
            bail!("Cars196: {label}: class_names{{{class}}} is empty");
        }
        names.insert(class, name.to_string());
    }
    Ok(names)
}
