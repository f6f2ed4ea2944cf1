//! Fashion-MNIST preparation through the library, on miniature IDX files: the zero-shot
//! split by class, held-out validation classes, exact pixels, the official-count check,
//! and errors that name the file at fault without leaving any output behind.

use std::path::Path;

use dml_data::{Manifest, Split};
use dml_datasets::fashion_mnist::{CLASS_NAMES, OFFICIAL_COUNTS, prepare};
use dml_datasets::{DatasetError, PrepareOptions};
use dml_testkit::{mini_fashion_mnist, write_idx_gz};

/// The names in `dir`, sorted.
fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

const SUBSET: PrepareOptions = PrepareOptions {
    val_classes: 0,
    force: false,
    verify_counts: false,
};

#[test]
fn miniature_prepares_with_split_by_class_and_exact_pixels() {
    let root = tempfile::tempdir().unwrap();
    let src = root.path().join("src");
    mini_fashion_mnist(&src, 20);
    let out = root.path().join("out");
    let options = PrepareOptions {
        val_classes: 1,
        ..SUBSET
    };
    let written = prepare(&src, &out, &options).unwrap();
    assert_eq!(written.root, out);
    let manifest = Manifest::read(out.join("manifest.csv")).unwrap();
    assert_eq!(manifest.records.len(), 40);
    for record in &manifest.records {
        let want = match record.class_id {
            0..=3 => Split::Train,
            4 => Split::Val,
            _ => Split::Test,
        };
        assert_eq!(record.split, want, "{record:?}");
        assert_eq!(record.class_name, CLASS_NAMES[record.class_id as usize]);
    }
    // Pixels survive the PNG round trip exactly.
    let img = image::open(out.join(&manifest.records[3].path)).unwrap().to_luma8();
    assert_eq!(img.dimensions(), (28, 28));
    let want: Vec<u8> = (3 * 784..4 * 784).map(|i| (i % 251) as u8).collect();
    assert_eq!(img.as_raw(), &want);
    assert_eq!(
        entries(root.path()),
        vec!["out", "src"],
        "no staging directory left behind"
    );

    // An existing output is refused without `force` and replaced with it.
    let error = prepare(&src, &out, &SUBSET).unwrap_err();
    assert!(matches!(error, DatasetError::OutputExists { .. }), "{error}");
    let forced = PrepareOptions { force: true, ..SUBSET };
    let replaced = prepare(&src, &out, &forced).unwrap();
    assert!(replaced.records.iter().all(|r| r.split != Split::Val));
    assert_eq!(entries(root.path()), vec!["out", "src"]);
}

#[test]
fn a_subset_is_refused_when_counts_are_verified() {
    let root = tempfile::tempdir().unwrap();
    let src = root.path().join("src");
    mini_fashion_mnist(&src, 20);
    let out = root.path().join("out");
    let error = prepare(&src, &out, &PrepareOptions::default()).unwrap_err().to_string();
    let (split, want) = OFFICIAL_COUNTS[0];
    assert!(
        error.starts_with("fashion-mnist:") && error.contains(&format!("{split}: expected {want} images, found 20")),
        "{error}"
    );
    assert_eq!(entries(root.path()), vec!["src"]);
}

#[test]
fn broken_sources_are_named() {
    let root = tempfile::tempdir().unwrap();
    let out = root.path().join("out");

    // A missing directory names the first file looked for.
    let nowhere = root.path().join("nowhere");
    let error = prepare(&nowhere, &out, &SUBSET).unwrap_err().to_string();
    assert!(
        error.contains("nowhere") && error.contains("train-images-idx3-ubyte"),
        "{error}"
    );

    // A truncated archive names the file and says what is wrong.
    let src = root.path().join("src");
    mini_fashion_mnist(&src, 20);
    let images = src.join("t10k-images-idx3-ubyte.gz");
    let bytes = std::fs::read(&images).unwrap();
    std::fs::write(&images, &bytes[..bytes.len() / 2]).unwrap();
    let error = prepare(&src, &out, &SUBSET).unwrap_err().to_string();
    assert!(
        error.contains("t10k-images-idx3-ubyte.gz") && error.contains("truncated"),
        "{error}"
    );

    // Labels outside 0–9 name the label file and the image.
    mini_fashion_mnist(&src, 20);
    let mut labels: Vec<u8> = (0..20).map(|i| (i % 10) as u8).collect();
    labels[7] = 12;
    write_idx_gz(&src.join("train-labels-idx1-ubyte.gz"), 0x0801, &[20], &labels);
    let error = prepare(&src, &out, &SUBSET).unwrap_err().to_string();
    assert!(
        error.contains("train-labels-idx1-ubyte.gz") && error.contains("label 12 of image 7"),
        "{error}"
    );
    assert_eq!(entries(root.path()), vec!["src"], "no output and no staging directory");
}
