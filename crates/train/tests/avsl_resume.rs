//! A PA-AVSL run stopped after an epoch and resumed from its checkpoint equals an uninterrupted
//! run exactly: the embedder, the reliability, the edges' moving average, the per-level proxies
//! and their optimiser states are all part of the checkpoint.
//!
//! The only test of its binary, so that no other run in a parallel thread draws from the device's
//! random generator in between.

mod common;

#[test]
fn a_stopped_and_resumed_avsl_run_equals_an_uninterrupted_one() {
    common::assert_resume_equals_uninterrupted(&[
        "avsl.enabled=true",
        "avsl.dim=8",
        "avsl.topk=3",
        "loss.name=\"proxy_anchor\"",
        "miner=none",
        "model.backbone=\"small_cnn\"",
        "train.epochs=2",
        "train.samples_per_epoch=60",
    ]);
}
