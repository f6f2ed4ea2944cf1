//! CUB-200-2011 (Wah et al., 2011) in the deep-metric-learning protocol.
//!
//! The source is `CUB_200_2011.tgz`, the `CUB_200_2011` directory it extracts to, or a
//! directory containing that one. Three lists describe the images:
//!
//! - `images.txt`: `<image_id> <path below images/>`;
//! - `image_class_labels.txt`: `<image_id> <class_id>`;
//! - `classes.txt`: `<class_id> <NNN.Class_name>`.
//!
//! The DML split is by class, not the official `train_test_split.txt` (which splits
//! every class into train and test images): classes 1–100 are trained on and classes
//! 101–200 are test classes. Class ids are the official ones and class names drop the
//! `NNN.` prefix (`001.Black_footed_Albatross` → `Black_footed_Albatross`). Images keep
//! their official relative paths below `images/`. Attributes, parts and bounding boxes
//! are ignored.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use dml_data::{Manifest, Record, Split};

use super::archive::{self, Source};
use super::verify::verify_images;

/// The directory every member of the official archive lives in.
const ROOT: &str = "CUB_200_2011";
/// Classes up to this id are training classes; the others are test classes.
const LAST_TRAIN_CLASS: u32 = 100;
/// The number of classes of the dataset.
const NUM_CLASSES: u32 = 200;

const IMAGES: &str = "images.txt";
const LABELS: &str = "image_class_labels.txt";
const CLASSES: &str = "classes.txt";

/// Reads CUB-200-2011 from `src` (archive or directory), copies its images to
/// `dir/images/` and returns the manifest (rooted at `dir`) with classes 1–100 as
/// `train` and 101–200 as `test`. Every image is checked to decode.
pub fn build(src: &Path, dir: &Path) -> anyhow::Result<Manifest> {
    let source = Source::open(src).context("CUB-200-2011: cannot open --src")?;
    let (prefix, mut lists) = read_lists(&source)?;
    let mut take = |name: &str| -> anyhow::Result<(String, String)> {
        let member = format!("{prefix}{name}");
        let label = source.display_name(&member);
        let bytes = lists
            .remove(&member)
            .with_context(|| format!("CUB-200-2011: {label} is missing"))?;
        Ok((archive::utf8(&label, bytes)?, label))
    };
    let (images_text, images_label) = take(IMAGES)?;
    let (labels_text, labels_label) = take(LABELS)?;
    let (classes_text, classes_label) = take(CLASSES)?;

    let classes = parse_classes(&classes_text, &classes_label)?;
    let images = parse_images(&images_text, &images_label)?;
    let labels = parse_labels(
        &labels_text,
        &labels_label,
        &images,
        &images_label,
        &classes,
        &classes_label,
    )?;

    let mut manifest = Manifest::new(dir, vec![]);
    let mut files: Vec<(String, PathBuf)> = Vec::with_capacity(images.order.len());
    for (id, path) in &images.order {
        let class_id = labels[id];
        let rel = format!("images/{path}");
        files.push((format!("{prefix}images/{path}"), dir.join(&rel)));
        manifest.records.push(Record {
            path: rel,
            class_id,
            class_name: classes[&class_id].name.clone(),
            split: if class_id <= LAST_TRAIN_CLASS {
                Split::Train
            } else {
                Split::Test
            },
            properties: vec![],
        });
    }
    source.extract(&files).context("CUB-200-2011: cannot copy the images")?;
    verify_images(&manifest).context("CUB-200-2011: corrupt images")?;
    Ok(manifest)
}

/// Finds the three lists in the source, either at its top level (the extracted
/// `CUB_200_2011` directory) or below `CUB_200_2011/` (the archive, or the directory
/// holding the extracted one). Returns the member prefix and the files read.
fn read_lists(source: &Source) -> anyhow::Result<(String, HashMap<String, Vec<u8>>)> {
    for prefix in [format!("{ROOT}/"), String::new()] {
        let names: Vec<String> = [IMAGES, LABELS, CLASSES]
            .iter()
            .map(|n| format!("{prefix}{n}"))
            .collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let found = source
            .read_files(&refs)
            .context("CUB-200-2011: cannot read the image lists")?;
        if found.contains_key(&names[0]) {
            return Ok((prefix, found));
        }
    }
    bail!(
        "CUB-200-2011: {} holds neither {ROOT}/{IMAGES} nor {IMAGES}; \
         expected CUB_200_2011.tgz or the CUB_200_2011 directory",
        source.path().display()
    )
}

/// A class of `classes.txt`.
struct Class {
    /// The name without its `NNN.` prefix.
    name: String,
}

/// Parses `classes.txt`: `<class_id 1..200> <NNN.Name>` per line.
fn parse_classes(text: &str, label: &str) -> anyhow::Result<HashMap<u32, Class>> {
    let mut classes: HashMap<u32, (Class, usize)> = HashMap::new();
    for (line_no, line) in numbered_lines(text) {
        let (id, name) = split_pair(line)
            .and_then(|(id, name)| Some((id.parse::<u32>().ok()?, name)))
            .with_context(|| format!("{label}:{line_no}: expected '<class_id> <class_name>', found {line:?}"))?;
        if !(1..=NUM_CLASSES).contains(&id) {
            bail!("{label}:{line_no}: class id {id} is outside 1–{NUM_CLASSES}");
        }
        let name = strip_number_prefix(name).to_string();
        if let Some((_, first)) = classes.insert(id, (Class { name }, line_no)) {
            bail!("{label}:{line_no}: duplicate class id {id} (first on line {first})");
        }
    }
    Ok(classes.into_iter().map(|(id, (class, _))| (id, class)).collect())
}

/// The parsed `images.txt`.
struct Images {
    /// `(image_id, path below images/)` in file order.
    order: Vec<(u32, String)>,
    /// The line of each image id, for error messages.
    line_of: HashMap<u32, usize>,
}

/// Parses `images.txt`: `<image_id> <path below images/>` per line.
fn parse_images(text: &str, label: &str) -> anyhow::Result<Images> {
    let mut images = Images {
        order: Vec::new(),
        line_of: HashMap::new(),
    };
    let mut line_of_path: HashMap<String, usize> = HashMap::new();
    for (line_no, line) in numbered_lines(text) {
        let (id, path) = split_pair(line)
            .and_then(|(id, path)| Some((id.parse::<u32>().ok()?, path)))
            .with_context(|| format!("{label}:{line_no}: expected '<image_id> <path>', found {line:?}"))?;
        let path = archive::normalize(path)
            .with_context(|| format!("{label}:{line_no}: image path {path:?} must be a relative path without '..'"))?;
        if let Some(first) = images.line_of.insert(id, line_no) {
            bail!("{label}:{line_no}: duplicate image id {id} (first on line {first})");
        }
        if let Some(first) = line_of_path.insert(path.clone(), line_no) {
            bail!("{label}:{line_no}: duplicate image path {path:?} (first on line {first})");
        }
        images.order.push((id, path));
    }
    Ok(images)
}

/// Parses `image_class_labels.txt`: `<image_id> <class_id>` per line, and checks that
/// every image has exactly one known class.
fn parse_labels(
    text: &str,
    label: &str,
    images: &Images,
    images_label: &str,
    classes: &HashMap<u32, Class>,
    classes_label: &str,
) -> anyhow::Result<HashMap<u32, u32>> {
    let mut labels: HashMap<u32, (u32, usize)> = HashMap::new();
    for (line_no, line) in numbered_lines(text) {
        let (image, class) = split_pair(line)
            .and_then(|(a, b)| Some((a.parse::<u32>().ok()?, b.parse::<u32>().ok()?)))
            .with_context(|| format!("{label}:{line_no}: expected '<image_id> <class_id>', found {line:?}"))?;
        if !images.line_of.contains_key(&image) {
            bail!("{label}:{line_no}: image id {image} is not listed in {images_label}");
        }
        if !classes.contains_key(&class) {
            bail!("{label}:{line_no}: class id {class} is not listed in {classes_label}");
        }
        if let Some((_, first)) = labels.insert(image, (class, line_no)) {
            bail!("{label}:{line_no}: duplicate image id {image} (first on line {first})");
        }
    }
    if let Some((id, _)) = images.order.iter().find(|(id, _)| !labels.contains_key(id)) {
        bail!(
            "{images_label}:{}: image id {id} has no class in {label}",
            images.line_of[id]
        );
    }
    Ok(labels.into_iter().map(|(image, (class, _))| (image, class)).collect())
}

/// The non-empty lines of a list with their 1-based line numbers, trimmed (which also
/// drops the `\r` of Windows line ends).
fn numbered_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(i, line)| (i + 1, line.trim()))
        .filter(|(_, line)| !line.is_empty())
}

/// Splits `<first field> <rest>` at the first run of whitespace; `None` if either part
/// is empty.
fn split_pair(line: &str) -> Option<(&str, &str)> {
    let (first, rest) = line.split_once(char::is_whitespace)?;
    let rest = rest.trim();
    (!first.is_empty() && !rest.is_empty()).then_some((first, rest))
}

/// `001.Black_footed_Albatross` → `Black_footed_Albatross`; names without a numeric
/// prefix are kept whole.
fn strip_number_prefix(name: &str) -> &str {
    match name.split_once('.') {
        Some((number, rest))
            if !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit()) && !rest.is_empty() =>
        {
            rest
        }
        _ => name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_names_lose_their_number() {
        assert_eq!(
            strip_number_prefix("001.Black_footed_Albatross"),
            "Black_footed_Albatross"
        );
        assert_eq!(strip_number_prefix("Black.footed"), "Black.footed");
        assert_eq!(strip_number_prefix("200."), "200.");
    }

    #[test]
    fn lines_name_the_file_and_line() {
        let e = parse_images("1 a/b.jpg\n\nx a/c.jpg\n", "images.txt")
            .err()
            .unwrap()
            .to_string();
        assert!(e.starts_with("images.txt:3: expected '<image_id> <path>'"), "{e}");
        let e = parse_images("1 a/b.jpg\n1 a/c.jpg\n", "images.txt")
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("images.txt:2: duplicate image id 1 (first on line 1)"),
            "{e}"
        );
        let e = parse_images("1 ../b.jpg\n", "images.txt").err().unwrap().to_string();
        assert!(e.contains("images.txt:1:") && e.contains(".."), "{e}");
        let e = parse_classes("201 201.X\n", "classes.txt").err().unwrap().to_string();
        assert!(e.contains("classes.txt:1: class id 201 is outside"), "{e}");
    }
}
