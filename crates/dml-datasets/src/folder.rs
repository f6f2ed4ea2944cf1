//! A folder of images as a dataset, as most users keep theirs (torchvision's `ImageFolder`
//! layout): one subfolder per class (`DIR/<class>/<image>`), split by class for the zero-shot
//! protocol (classes sorted by name, the first half `train`, the rest `test`), or already split
//! (`DIR/train/<class>/…`, `DIR/test/<class>/…`, optionally `DIR/val/<class>/…`).
//!
//! Every file in a class folder (hidden ones aside) must be a PNG or JPEG image whose header
//! decodes; a class with fewer than two images (retrieval needs a positive) and an empty class
//! are errors naming the folder, so nothing is silently left out.

use std::path::{Path, PathBuf};

use dml_data::{Manifest, Record, Split, ValidationOptions};

use crate::error::{DatasetError, Result};

/// The file extensions read as images (case-insensitive).
pub const IMAGE_EXTENSIONS: [&str; 3] = ["png", "jpg", "jpeg"];

/// The split folders of an already split dataset.
const SPLIT_FOLDERS: [(&str, Split); 3] = [("train", Split::Train), ("val", Split::Val), ("test", Split::Test)];

/// Whether `dir` is a folder of class subfolders (or of split folders of them) without a
/// `manifest.csv`.
pub fn is_image_folder(dir: &Path) -> bool {
    dir.is_dir() && !dir.join("manifest.csv").exists() && !subfolders(dir).unwrap_or_default().is_empty()
}

/// The manifest of the image folder `dir` (rooted at `dir`, paths relative to it), validated.
pub fn folder_manifest(dir: &Path) -> Result<Manifest> {
    let folders = subfolders(dir)?;
    if folders.is_empty() {
        return Err(malformed(dir, "has no class subfolders (DIR/<class>/<image>)".into()));
    }
    let split_layout = folders.iter().any(|f| f == "train") && folders.iter().any(|f| f == "test");
    // (split, class name, folder relative to dir)
    let mut classes: Vec<(Split, String, String)> = Vec::new();
    if split_layout {
        if let Some(other) = folders.iter().find(|f| !SPLIT_FOLDERS.iter().any(|(s, _)| s == f)) {
            return Err(malformed(
                &dir.join(other),
                "is neither train/, val/ nor test/, next to train/ and test/".into(),
            ));
        }
        for (name, split) in SPLIT_FOLDERS {
            if !dir.join(name).is_dir() {
                continue;
            }
            let inner = subfolders(&dir.join(name))?;
            if inner.is_empty() {
                return Err(malformed(&dir.join(name), "has no class subfolders".into()));
            }
            classes.extend(inner.into_iter().map(|c| (split, c.clone(), format!("{name}/{c}"))));
        }
    } else {
        // Zero-shot: the first half of the classes (sorted by name, rounded up) train.
        let train = folders.len().div_ceil(2);
        classes.extend(folders.iter().enumerate().map(|(i, c)| {
            let split = if i < train { Split::Train } else { Split::Test };
            (split, c.clone(), c.clone())
        }));
    }
    // Class ids by name over every split, so that a class in two splits keeps one id.
    let mut names: Vec<&str> = classes.iter().map(|(_, c, _)| c.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    let mut manifest = Manifest::new(dir, Vec::new());
    for (split, class, folder) in &classes {
        let id = names.binary_search(&class.as_str()).unwrap_or(0) as u32;
        let images = class_images(&dir.join(folder))?;
        if images.len() < 2 {
            return Err(malformed(
                &dir.join(folder),
                format!(
                    "holds {} image(s); a class needs at least two (a query and a positive)",
                    images.len()
                ),
            ));
        }
        for file in images {
            manifest.records.push(Record {
                path: format!("{folder}/{file}"),
                class_id: id,
                class_name: class.clone(),
                split: *split,
                properties: Vec::new(),
            });
        }
    }
    manifest.validate(&ValidationOptions::default())?;
    Ok(manifest)
}

/// The visible subfolders of `dir`, sorted by name.
fn subfolders(dir: &Path) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| io(dir, e))? {
        let entry = entry.map_err(|e| io(dir, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with('.') && entry.path().is_dir() {
            out.push(name);
        }
    }
    out.sort();
    Ok(out)
}

/// The image files of a class folder, sorted; any other visible file is an error naming it.
fn class_images(dir: &Path) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| io(dir, e))? {
        let entry = entry.map_err(|e| io(dir, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        if name.starts_with('.') {
            continue;
        }
        if path.is_dir() {
            return Err(malformed(
                &path,
                "is a folder inside a class folder (DIR/<class>/<image>)".into(),
            ));
        }
        let extension = path
            .extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase())
            .unwrap_or_default();
        if !IMAGE_EXTENSIONS.contains(&extension.as_str()) {
            return Err(malformed(
                &path,
                format!("is not a PNG or JPEG image (readable: {})", IMAGE_EXTENSIONS.join(", ")),
            ));
        }
        image::ImageReader::open(&path)
            .and_then(|r| r.with_guessed_format())
            .map_err(|e| malformed(&path, format!("cannot be read: {e}")))?
            .into_dimensions()
            .map_err(|e| malformed(&path, format!("is not a readable image: {e}")))?;
        out.push(name);
    }
    out.sort();
    Ok(out)
}

fn malformed(path: &Path, message: String) -> DatasetError {
    DatasetError::Malformed {
        path: PathBuf::from(path),
        message,
    }
}

fn io(path: &Path, error: std::io::Error) -> DatasetError {
    malformed(path, format!("cannot be read: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png(path: &Path) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        image::RgbImage::from_pixel(4, 4, image::Rgb([1, 2, 3]))
            .save(path)
            .unwrap();
    }

    #[test]
    fn class_folders_split_by_class_and_split_folders_as_given() {
        let dir = tempfile::tempdir().unwrap();
        for class in ["cat", "dog", "eel"] {
            for i in 0..2 {
                png(&dir.path().join(format!("{class}/{i}.png")));
            }
        }
        std::fs::write(dir.path().join("dog/.DS_Store"), b"x").unwrap();
        let m = folder_manifest(dir.path()).unwrap();
        let split_of = |c: &str| m.records.iter().find(|r| r.class_name == c).unwrap().split;
        assert_eq!(
            [split_of("cat"), split_of("dog"), split_of("eel")],
            [Split::Train, Split::Train, Split::Test]
        );
        assert_eq!(m.records.len(), 6);
        assert_eq!(m.records[0].path, "cat/0.png");

        let split = tempfile::tempdir().unwrap();
        for (s, class) in [("train", "a"), ("train", "b"), ("test", "c"), ("test", "d")] {
            for i in 0..2 {
                png(&split
                    .path()
                    .join(format!("{s}/{class}/{i}.jpg").replace(".jpg", ".png")));
            }
        }
        let m = folder_manifest(split.path()).unwrap();
        assert!(
            m.records
                .iter()
                .all(|r| (r.split == Split::Train) == (r.class_name.as_str() < "c"))
        );
        assert!(is_image_folder(split.path()));
    }

    #[test]
    fn bad_folders_are_named() {
        let dir = tempfile::tempdir().unwrap();
        png(&dir.path().join("a/0.png"));
        png(&dir.path().join("a/1.png"));
        png(&dir.path().join("b/0.png"));
        let e = folder_manifest(dir.path()).unwrap_err().to_string();
        assert!(e.contains("/b: holds 1 image(s)"), "{e}");
        png(&dir.path().join("b/1.png"));
        std::fs::write(dir.path().join("b/notes.txt"), b"x").unwrap();
        let e = folder_manifest(dir.path()).unwrap_err().to_string();
        assert!(e.contains("notes.txt: is not a PNG or JPEG"), "{e}");
        std::fs::remove_file(dir.path().join("b/notes.txt")).unwrap();
        std::fs::write(dir.path().join("b/2.png"), b"not a png").unwrap();
        let e = folder_manifest(dir.path()).unwrap_err().to_string();
        assert!(e.contains("2.png: is not a readable image"), "{e}");
    }
}
