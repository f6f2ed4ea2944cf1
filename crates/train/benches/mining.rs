//! The cost of similarity mining (Zheng et al., Eq. 3): a training step of the triplet loss with
//! and without `γ L_sm`, same batch, same model.
//!
//! `cargo bench -p train --bench mining -- [--device flex|wgpu] [--steps N] [--tuples T]`
//!
//! The workload is the synthetic-set default's: the small CNN on 48² inputs, batch 40 (8 per
//! class), the triplet-margin loss with its semihard miner; mining embeds `T` (default 16) mined
//! triplets' soft-masked images, 3T more images forward and backward. Prints one measurement line
//! (`dml_testkit::bench`, seconds per training step) per setting and their ratio.

mod common;

use dml_train::Silent;
use dml_train::device::parse_device;
use dml_train::{Learner, Shortcuts, TrainConfig};

fn main() {
    dml_backend::retain_freed_memory();
    let device_name = common::arg("--device").unwrap_or_else(|| "flex".into());
    let steps: usize = common::parsed("--steps", 10);
    let tuples: usize = common::parsed("--tuples", 16);
    let device = parse_device(&device_name).expect("device").autodiff();
    let (batch, side) = (40usize, 48usize);
    let labels: Vec<u32> = (0..batch as u32).map(|i| i / 8).collect();
    let pixels = common::pixels(batch, side);
    let images = || common::batch(&pixels, batch, side, &device);
    let mut per_step = Vec::new();
    for mining in [false, true] {
        let sets: Vec<String> = vec![
            "loss.name=\"triplet_margin\"".into(),
            "miner.name=\"triplet_margin\"".into(),
            "miner.type_of_triplets=\"semihard\"".into(),
            format!("similarity_mining.enabled={mining}"),
            format!("similarity_mining.max_tuples={tuples}"),
        ];
        let config = TrainConfig::resolve(None, &Shortcuts::default(), &sets).expect("config");
        let mut learner = Learner::new(&config, 5, &device, &Silent).expect("learner");
        let seconds = common::seconds_per_step(&mut learner, images, &labels, steps, &device);
        per_step.push(seconds);
        dml_testkit::bench::emit(
            if mining {
                "train/triplet_similarity_mining_48px_b40"
            } else {
                "train/triplet_48px_b40"
            },
            seconds,
            "training step",
            serde_json::json!({
                "device": device_name,
                "batch": batch,
                "input": [3, side, side],
                "mined_tuples": if mining { tuples } else { 0 },
                "steps": steps,
                "threads": std::thread::available_parallelism().map_or(0, |n| n.get()),
            }),
        );
    }
    println!(
        "{}",
        serde_json::json!({"mining_step_over_plain_step": per_step[1] / per_step[0]})
    );
}
