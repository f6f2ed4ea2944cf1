//! A PA-AVSL run stopped after an epoch and resumed from its checkpoint equals an uninterrupted
//! run exactly: the embedder, the reliability, the edges' moving average, the per-level proxies
//! and their optimiser states are all part of the checkpoint.
//!
//! The only test of its binary, so that no other run in a parallel thread draws from the device's
//! random generator in between.

mod common;

use train::checkpoint::MetricsRecord;
use train::{RunOptions, train};

/// The run's `metrics.jsonl` without throughput (timing, not state), read back from its file so
/// that both runs go through the same JSON round trip.
fn records(run: &std::path::Path) -> Vec<MetricsRecord> {
    std::fs::read_to_string(run.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            let mut r: MetricsRecord = serde_json::from_str(l).unwrap();
            r.images_per_sec = None;
            r
        })
        .collect()
}

#[test]
fn a_stopped_and_resumed_avsl_run_equals_an_uninterrupted_one() {
    let runs = tempfile::tempdir().unwrap();
    let sets = [
        "avsl.enabled=true",
        "avsl.dim=8",
        "avsl.topk=3",
        "loss.name=\"proxy_anchor\"",
        "miner=none",
        "model.backbone=\"small_cnn\"",
        "train.epochs=2",
        "train.samples_per_epoch=60",
    ];
    let straight = common::tiny_config(runs.path(), "straight", &sets);
    let straight = train(&straight, &RunOptions::default()).unwrap();
    let config = common::tiny_config(runs.path(), "resumed", &sets);
    let first = RunOptions {
        stop_after_epochs: Some(1),
        ..RunOptions::default()
    };
    train(&config, &first).unwrap();
    let resumed = train(
        &config,
        &RunOptions {
            resume: true,
            ..RunOptions::default()
        },
    )
    .unwrap();
    let straight = records(&straight.run_dir);
    assert_eq!(straight.len(), 3);
    assert_eq!(records(&resumed.run_dir), straight);
}
