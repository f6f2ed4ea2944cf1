//! Forward + backward time of the four loss/miner pairs for a batch of N = 180
//! embeddings of D = 512 (45 classes × 4 samples, f32) on the flex CPU backend.
//!
//! `cargo bench -p dml-losses --bench losses` prints one measurement line per configuration
//! (`dml_testkit::bench`, id `losses/<configuration>`): the median seconds of forward + backward
//! over the timed iterations, with the minimum. `-- --only proxy_anchor` times one of them.
//! `cargo xtask bench --peers` times the same configurations in pytorch-metric-learning
//! (`xtask/peers/losses.py`) in the same run.

use std::time::Instant;

use burn::tensor::{Device, Tensor, TensorData};
use dml_losses::{LossConfig, MinerConfig};
use rand::{Rng, SeedableRng};
use serde_json::json;

const N: usize = 180;
const D: usize = 512;
const PER_CLASS: usize = 4;
const NUM_CLASSES: usize = 100;
const WARMUP: usize = 5;
const ITERS: usize = 200;

fn main() {
    // As the `train` binary does: freed step buffers stay in the process.
    dml_backend::retain_freed_memory();
    let device = Device::flex().autodiff();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
    let values: Vec<f32> = (0..N * D).map(|_| rng.random::<f32>() * 2.0 - 1.0).collect();
    let labels: Vec<u32> = (0..N as u32).map(|i| i / PER_CLASS as u32).collect();
    let setups: [(&str, &str, Option<&str>); 4] = [
        ("proxy_anchor", "name = \"proxy_anchor\"", None),
        (
            "multi_similarity+miner",
            "name = \"multi_similarity\"",
            Some("name = \"multi_similarity\""),
        ),
        (
            "margin+distance_weighted",
            "name = \"margin\"",
            Some("name = \"distance_weighted\""),
        ),
        (
            "triplet_margin+semihard",
            "name = \"triplet_margin\"\nmargin = 0.2",
            Some("name = \"triplet_margin\"\ntype_of_triplets = \"semihard\""),
        ),
    ];
    // `--only NAME` (e.g. `-- --only proxy_anchor`) times one configuration, for profiling.
    let args: Vec<String> = std::env::args().collect();
    let only = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1))
        .cloned();
    for (name, loss_toml, miner_toml) in setups {
        if only.as_ref().is_some_and(|o| o != name) {
            continue;
        }
        let loss = toml::from_str::<LossConfig>(loss_toml)
            .unwrap()
            .init(NUM_CLASSES, D, &device)
            .unwrap();
        let miner = miner_toml.map(|m| toml::from_str::<MinerConfig>(m).unwrap().init().unwrap());
        let mut times = Vec::with_capacity(ITERS);
        let mut tuples = 0;
        for it in 0..WARMUP + ITERS {
            let x: Tensor<2> = Tensor::from_data(TensorData::new(values.clone(), [N, D]), &device).require_grad();
            let start = Instant::now();
            let out = loss.forward(x.clone(), &labels, miner.as_ref(), it as u64).unwrap();
            let grads = out.loss.backward();
            // Reading the gradient back makes sure all work has finished.
            let g = x.grad(&grads).expect("gradient").into_data();
            let elapsed = start.elapsed().as_secs_f64();
            assert_eq!(g.num_elements(), N * D);
            tuples = out.tuples;
            if it >= WARMUP {
                times.push(elapsed);
            }
        }
        let median = dml_testkit::bench::median(&mut times);
        dml_testkit::bench::emit(
            &format!("losses/{name}"),
            median,
            "forward + backward",
            json!({
                "min_seconds": times[0],
                "backend": "flex (CPU), f32, autodiff",
                "n": N,
                "d": D,
                "samples_per_class": PER_CLASS,
                "proxies": NUM_CLASSES,
                "iterations": ITERS,
                "tuples": tuples,
                "threads": rayon::current_num_threads(),
            }),
        );
    }
}
