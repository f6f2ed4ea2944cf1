//! Shared setup of the train integration tests: a tiny synthetic set in a temporary
//! directory and a small, fast configuration over it.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use dml_train::Silent;
use dml_train::{Shortcuts, TrainConfig};

/// The data root shared by every test of one test binary (the set is generated once).
pub fn data_root() -> &'static Path {
    static ROOT: OnceLock<PathBuf> = OnceLock::new();
    ROOT.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("dml-train-tests-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    })
}

/// A configuration for a 2-epoch run on 300 synthetic 32² images at 24², written under
/// `runs` with the given name.
pub fn tiny_config(runs: &Path, name: &str, extra: &[&str]) -> TrainConfig {
    let mut sets: Vec<String> = [
        "data.synth_images=300",
        "data.synth_size=32",
        "data.image_size=24",
        "data.threads=2",
        "model.embedding_dim=32",
        "train.epochs=2",
        "train.batch_size=20",
        "train.m=4",
        "train.samples_per_epoch=400",
        "eval.batch_size=100",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    sets.push(format!("data.root={}", toml_string(data_root())));
    sets.extend(extra.iter().map(|s| s.to_string()));
    let shortcuts = Shortcuts {
        name: Some(name.to_string()),
        run_dir: Some(runs.to_path_buf()),
        ..Shortcuts::default()
    };
    TrainConfig::resolve(None, &shortcuts, &sets).unwrap()
}

/// A path as a quoted TOML string.
pub fn toml_string(p: &Path) -> String {
    toml::Value::String(p.to_string_lossy().into_owned()).to_string()
}

/// The embedded default with the `base` and `extra` overrides and run directory `runs`, resolved
/// without the tiny set's settings (for tests of configuration errors).
pub fn resolve(runs: &Path, base: &[&str], extra: &[&str]) -> Result<TrainConfig, dml_train::TrainError> {
    let sets: Vec<String> = base.iter().chain(extra).map(|s| s.to_string()).collect();
    let shortcuts = Shortcuts {
        run_dir: Some(runs.to_path_buf()),
        ..Shortcuts::default()
    };
    TrainConfig::resolve(None, &shortcuts, &sets)
}

/// Similarity mining on a one-epoch tiny run (the mining tests' common settings).
pub const MINING: [&str; 5] = [
    "similarity_mining.enabled=true",
    "similarity_mining.max_tuples=6",
    "train.epochs=1",
    "train.samples_per_epoch=80",
    "model.backbone=\"small_cnn\"",
];

/// A run's `metrics.jsonl` without throughput (timing, not state), read back from its file so
/// that runs compared with each other all go through the same JSON round trip.
pub fn records(run: &Path) -> Vec<dml_train::metrics::MetricsRecord> {
    std::fs::read_to_string(run.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            let mut r: dml_train::metrics::MetricsRecord = serde_json::from_str(l).unwrap();
            r.images_per_sec = None;
            r
        })
        .collect()
}

/// Trains the tiny run with `sets` (two epochs) uninterrupted, and again stopped after the first
/// epoch and resumed from its checkpoint, and asserts that both wrote the same three evaluations.
pub fn assert_resume_equals_uninterrupted(sets: &[&str]) {
    use dml_train::{RunOptions, train};
    let runs = tempfile::tempdir().unwrap();
    let straight = tiny_config(runs.path(), "straight", sets);
    let straight = train(&straight, &RunOptions::default(), &Silent).unwrap();
    let config = tiny_config(runs.path(), "resumed", sets);
    let first = RunOptions {
        stop_after_epochs: Some(1),
        ..RunOptions::default()
    };
    train(&config, &first, &Silent).unwrap();
    let resume = RunOptions {
        resume: true,
        ..RunOptions::default()
    };
    let resumed = train(&config, &resume, &Silent).unwrap();
    let straight = records(&straight.run_dir);
    assert_eq!(straight.len(), 3);
    assert_eq!(records(&resumed.run_dir), straight);
}

/// The command-line arguments of a quiet training run `name` under `runs` on the tiny synthetic
/// set (300 images of 32², at 24²; batches of 20 of 4 per class) with `samples_per_epoch` images
/// an epoch, then `extra`: the settings every test that drives the `train` binary shares.
pub fn cli_args(runs: &Path, name: &str, samples_per_epoch: usize, extra: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = vec!["--quiet".into(), "--name".into(), name.into(), "--run-dir".into()];
    a.push(runs.to_str().unwrap().into());
    let samples = format!("train.samples_per_epoch={samples_per_epoch}");
    let root = format!("data.root={}", toml_string(data_root()));
    for set in [
        "data.synth_images=300",
        "data.synth_size=32",
        "data.image_size=24",
        "train.batch_size=20",
        "train.m=4",
        samples.as_str(),
        "eval.batch_size=100",
        root.as_str(),
    ] {
        a.extend(["--set".to_string(), set.to_string()]);
    }
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}

/// Copies the folder `from` into `to` (created), recursively.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let target = to.join(path.file_name().unwrap());
        if path.is_dir() {
            copy_dir(&path, &target);
        } else {
            std::fs::copy(&path, &target).unwrap();
        }
    }
}

/// Polls `ready` every 20 ms until it holds; two minutes without it fail the test naming `what`.
pub fn wait_for(what: &str, mut ready: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !ready() {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(120),
            "timed out waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
