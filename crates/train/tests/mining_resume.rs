//! A similarity-mining run (learnable `a`, `b`, a triplet miner) stopped after an epoch and
//! resumed from its checkpoint equals an uninterrupted run exactly: the mask parameters and their
//! optimiser state are part of the checkpoint.
//!
//! The only test of its binary, so that no other run in a parallel thread draws from the device's
//! random generator in between.

mod common;

use common::MINING;

#[test]
fn a_stopped_and_resumed_mining_run_equals_an_uninterrupted_one() {
    let mut sets = MINING.to_vec();
    sets.extend([
        "loss.name=\"triplet_margin\"",
        "miner.name=\"triplet_margin\"",
        "similarity_mining.learnable=true",
        "train.epochs=2",
        "train.samples_per_epoch=60",
    ]);
    common::assert_resume_equals_uninterrupted(&sets);
}
