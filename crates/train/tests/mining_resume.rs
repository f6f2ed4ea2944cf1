//! A similarity-mining run (learnable `a`, `b`, a triplet miner) stopped after an epoch and
//! resumed from its checkpoint equals an uninterrupted run exactly: the mask parameters and their
//! optimiser state are part of the checkpoint.
//!
//! The only test of its binary, so that no other run in a parallel thread draws from the device's
//! random generator in between.

mod common;

use common::MINING;
use train::checkpoint::MetricsRecord;
use train::{RunOptions, train};

/// The run's `metrics.jsonl` without throughput (timing, not state). Both runs are read from their
/// files, so that both go through the same JSON round trip.
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
fn a_stopped_and_resumed_mining_run_equals_an_uninterrupted_one() {
    let runs = tempfile::tempdir().unwrap();
    let mut sets = MINING.to_vec();
    sets.extend([
        "loss.name=\"triplet_margin\"",
        "miner.name=\"triplet_margin\"",
        "similarity_mining.learnable=true",
        "train.epochs=2",
        "train.samples_per_epoch=60",
    ]);
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
