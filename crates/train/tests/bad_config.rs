//! Bad configurations fail early with an error naming the culprit.

mod common;

use std::path::PathBuf;

use dml_train::Silent;
use dml_train::{RunOptions, Shortcuts, TrainConfig, train};

fn resolve_err(sets: &[&str]) -> String {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    TrainConfig::resolve(None, &Shortcuts::default(), &sets)
        .unwrap_err()
        .to_string()
}

#[test]
fn unknown_names_are_rejected_with_the_valid_ones() {
    let e = resolve_err(&["loss.name=fancy_loss"]);
    assert!(e.contains("fancy_loss") && e.contains("margin"), "{e}");
    let e = resolve_err(&["device=quantum"]);
    assert!(e.contains("quantum") && e.contains("flex"), "{e}");
    let e = resolve_err(&["miner.name=lucky"]);
    assert!(e.contains("lucky"), "{e}");
}

#[test]
fn a_missing_config_file_is_named() {
    let e = TrainConfig::resolve(
        Some(&PathBuf::from("/nonexistent/run.toml")),
        &Shortcuts::default(),
        &[],
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("/nonexistent/run.toml"), "{e}");
}

#[test]
fn a_missing_dataset_is_named() {
    let runs = tempfile::tempdir().unwrap();
    let config = common::tiny_config(runs.path(), "x", &["data.dataset=/nowhere/manifest.csv"]);
    let e = train(&config, &RunOptions::default(), &Silent).unwrap_err().to_string();
    assert!(e.contains("/nowhere/manifest.csv"), "{e}");
}

#[test]
fn pretrained_weights_of_the_wrong_shape_name_the_key() {
    let runs = tempfile::tempdir().unwrap();
    // The tiny ResNet-18 has stage widths 8–64; a real ResNet-18 has 64–512.
    let weights = dml_testkit::workspace_root().join("tests/fixtures/weights/tiny_resnet18_layout.pth");
    let pretrained = format!("model.pretrained={}", common::toml_string(&weights));
    let config = common::tiny_config(runs.path(), "x", &["model.backbone=resnet18", &pretrained]);
    let e = train(&config, &RunOptions::default(), &Silent).unwrap_err().to_string();
    assert!(
        e.contains("tiny_resnet18_layout.pth") && e.contains("conv1.weight"),
        "{e}"
    );
}
