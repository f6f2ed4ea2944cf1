//! The cost of similarity mining (Zheng et al., Eq. 3): a training step of the triplet loss with
//! and without `γ L_sm`, same batch, same model.
//!
//! `cargo bench -p train --bench mining -- [--device flex|wgpu] [--steps N] [--tuples T]`
//!
//! The workload is the synthetic-set default's: the small CNN on 48² inputs, batch 40 (8 per
//! class), the triplet-margin loss with its semihard miner; mining embeds `T` (default 16) mined
//! triplets' soft-masked images, 3T more images forward and backward. Prints one JSON object per
//! setting and their ratio.

use std::time::Instant;

use burn::tensor::{Tensor, TensorData};
use train::device::parse_device;
use train::{Learner, Shortcuts, TrainConfig};

fn main() {
    dml_backend::retain_freed_memory();
    let args: Vec<String> = std::env::args().collect();
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let device_name = value("--device").unwrap_or_else(|| "flex".into());
    let steps: usize = value("--steps").map_or(10, |s| s.parse().expect("--steps N"));
    let tuples: usize = value("--tuples").map_or(16, |s| s.parse().expect("--tuples T"));
    let device = parse_device(&device_name).expect("device").autodiff();
    let (batch, side) = (40usize, 48usize);
    let labels: Vec<u32> = (0..batch as u32).map(|i| i / 8).collect();
    let n = batch * 3 * side * side;
    let pixels: Vec<f32> = (0..n).map(|i| ((i * 7919) % 1013) as f32 / 506.0 - 1.0).collect();
    let images = || Tensor::<4>::from_data(TensorData::new(pixels.clone(), [batch, 3, side, side]), &device);
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
        let mut learner = Learner::new(&config, 5, &device).expect("learner");
        // Warm-up: allocation pools, autotuning and (on wgpu) shader compilation.
        for s in 0..2 {
            learner.step(images(), &labels, s, [1e-4; 3]).expect("step");
        }
        let _ = device.sync();
        let start = Instant::now();
        for s in 0..steps {
            learner.step(images(), &labels, s as u64, [1e-4; 3]).expect("step");
        }
        let _ = device.sync();
        let seconds = start.elapsed().as_secs_f64() / steps as f64;
        per_step.push(seconds);
        println!(
            "{}",
            serde_json::json!({
                "workload": if mining { "triplet_plus_similarity_mining" } else { "triplet" },
                "device": device_name,
                "batch": batch,
                "input": [3, side, side],
                "mined_tuples": if mining { tuples } else { 0 },
                "steps": steps,
                "seconds_per_step": seconds,
                "threads": std::thread::available_parallelism().map_or(0, |n| n.get()),
            })
        );
    }
    println!(
        "{}",
        serde_json::json!({"mining_step_over_plain_step": per_step[1] / per_step[0]})
    );
}
