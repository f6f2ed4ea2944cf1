//! A run written by the code before the `train` crate was split into `dml-train`, `dml-inspect`
//! and the CLI (issue 36) resumes after it, and continues exactly as that code would have.
//!
//! `tests/fixtures/run-before-split/` holds what the earlier binary wrote (commit a7c84e8):
//! `runs/fixture/`, a tiny synthetic run stopped after its first of two epochs (`--stop-after 1`:
//! `config.toml`, `metrics.jsonl`, `latest.json` and the checkpoint `epoch-0001`), and
//! `uninterrupted-metrics.jsonl`, the `metrics.jsonl` of the same run trained through both epochs
//! in one go. Both were made in one scratch directory with
//!
//! ```text
//! train --name fixture  --quiet --stop-after 1 SETS
//! train --name straight --quiet SETS
//! ```
//!
//! where `SETS` are the `--set` overrides of [`SETS`]; the synthetic set is generated on first use
//! from seed 0, so this test regenerates the very same images.

mod common;

use std::path::Path;
use std::process::Command;

/// The overrides the fixture was trained with (relative `data.root` and `run_dir`, so the run
/// resumes wherever the fixture is copied).
const SETS: &[&str] = &[
    "data.synth_images=300",
    "data.synth_size=32",
    "data.image_size=24",
    "data.threads=2",
    "model.embedding_dim=32",
    "train.epochs=2",
    "train.batch_size=20",
    "train.m=4",
    "train.samples_per_epoch=200",
    "eval.batch_size=100",
];

fn fixture() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/run-before-split")
}

/// The records of a `metrics.jsonl` without their throughput (timing, not state).
fn records(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|line| {
            let mut v: serde_json::Value = serde_json::from_str(line).unwrap();
            v.as_object_mut().unwrap().remove("images_per_sec");
            v
        })
        .collect()
}

fn train(cwd: &Path, args: &[&str]) -> std::process::Output {
    let out = Command::new(env!("CARGO_BIN_EXE_train"))
        .current_dir(cwd)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "train {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn a_run_written_before_the_split_resumes_to_the_uninterrupted_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("runs/fixture");
    common::copy_dir(&fixture().join("runs/fixture"), &run);
    let before = records(&run.join("metrics.jsonl"));
    assert_eq!(before.len(), 2, "the fixture holds the untrained model and epoch 1");
    let saved_config = std::fs::read(run.join("config.toml")).unwrap();

    // The earlier checkpoint loads for evaluation and scores what the earlier code recorded for it.
    let out = train(
        dir.path(),
        &["eval", "runs/fixture", "--checkpoint", "latest", "--out", "eval-before"],
    );
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("epoch-0001"), "{table}");
    let evaluated: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("eval-before/metrics.json")).unwrap()).unwrap();
    for (ours, theirs) in [
        ("precision_at_1", "precision_at_1"),
        ("r_precision", "r_precision"),
        ("mean_average_precision_at_r", "map_at_r"),
    ] {
        assert_eq!(evaluated["metrics"][ours], before[1]["metrics"][theirs], "{ours}");
    }

    // The resumed run takes everything from its saved config.toml.
    let out = train(dir.path(), &["--resume", "--name", "fixture", "--quiet"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("resuming") && stderr.contains("after epoch 1"),
        "{stderr}"
    );

    let expected = records(&fixture().join("uninterrupted-metrics.jsonl"));
    assert_eq!(expected.len(), 3);
    let resumed = records(&run.join("metrics.jsonl"));
    assert_eq!(
        resumed, expected,
        "the resumed run must continue exactly as the earlier code did"
    );
    // Resuming with the same epochs leaves the saved configuration byte for byte.
    assert_eq!(std::fs::read(run.join("config.toml")).unwrap(), saved_config);
    assert!(run.join("checkpoints/epoch-0002/model.bpk").is_file());
}

#[test]
fn the_fixture_was_trained_with_these_settings() {
    let config: toml::Table = std::fs::read_to_string(fixture().join("runs/fixture/config.toml"))
        .unwrap()
        .parse()
        .unwrap();
    for set in SETS {
        let (key, value) = set.split_once('=').unwrap();
        let (section, field) = key.split_once('.').unwrap();
        assert_eq!(config[section][field].to_string(), value, "{key}");
    }
}
