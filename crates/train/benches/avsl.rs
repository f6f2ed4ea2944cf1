//! The cost of AVSL (Zhang et al., Eq. 10) in training and in retrieval.
//!
//! `cargo bench -p train --bench avsl -- [--device flex|wgpu] [--steps N] [--dim R] [--topk K]
//! [--gallery G]`
//!
//! Training: a step of Proxy-Anchor on the synthetic-set default's workload (the small CNN on 48²
//! inputs, batch 40, 8 per class) against the same with `[avsl] enabled = true` (three levels of
//! `R` dimensions, top-`K` edges, Proxy-Anchor in distance form), same batch, same model.
//! Retrieval: `d̂` of one query against `G` references with the host scorer (the cost of exact
//! evaluation per pair, and of re-ranking per query and neighbour). Prints one measurement line
//! (`dml_testkit::bench`) per measurement and the ratio of the two steps.

mod common;

use std::time::Instant;

use burn::tensor::{Device, Distribution, Tensor};
use dml_explain::avsl::certainty::Certainty;
use dml_explain::avsl::graph::Reliability;
use dml_explain::avsl::link_star::link_star;
use dml_explain::avsl::scorer::{AvslBank, AvslScorer};
use dml_models::AvslLevelOutput;
use dml_train::Silent;
use dml_train::device::parse_device;
use dml_train::{Learner, Shortcuts, TrainConfig};

fn main() {
    dml_backend::retain_freed_memory();
    let device_name = common::arg("--device").unwrap_or_else(|| "flex".into());
    let steps: usize = common::parsed("--steps", 10);
    let dim: usize = common::parsed("--dim", 64);
    let topk: usize = common::parsed("--topk", 16);
    let gallery: usize = common::parsed("--gallery", 20_000);
    let threads = std::thread::available_parallelism().map_or(0, |n| n.get());
    let device = parse_device(&device_name).expect("device").autodiff();
    let (batch, side) = (40usize, 48usize);
    let labels: Vec<u32> = (0..batch as u32).map(|i| i / 8).collect();
    let pixels = common::pixels(batch, side);
    let images = || common::batch(&pixels, batch, side, &device);
    let mut per_step = Vec::new();
    for avsl in [false, true] {
        let sets: Vec<String> = vec![
            "loss.name=\"proxy_anchor\"".into(),
            "miner=none".into(),
            format!("avsl.enabled={avsl}"),
            format!("avsl.dim={dim}"),
            format!("avsl.topk={topk}"),
        ];
        let config = TrainConfig::resolve(None, &Shortcuts::default(), &sets).expect("config");
        let mut learner = Learner::new(&config, 5, &device, &Silent).expect("learner");
        let seconds = common::seconds_per_step(&mut learner, images, &labels, steps, &device);
        per_step.push(seconds);
        dml_testkit::bench::emit(
            if avsl {
                "train/proxy_anchor_avsl_48px_b40"
            } else {
                "train/proxy_anchor_48px_b40"
            },
            seconds,
            "training step",
            serde_json::json!({
                "device": device_name,
                "batch": batch,
                "input": [3, side, side],
                "avsl_dim": if avsl { dim } else { 0 },
                "avsl_topk": if avsl { topk } else { 0 },
                "steps": steps,
                "images_per_second": batch as f64 / seconds,
                "threads": threads,
            }),
        );
    }
    println!(
        "{}",
        serde_json::json!({"avsl_step_over_plain_step": per_step[1] / per_step[0]})
    );

    // Retrieval: random banks of three levels (the scorer's cost does not depend on the values).
    let host = Device::flex();
    let outputs = |b: usize| -> Vec<AvslLevelOutput> {
        [(8, 8), (4, 4), (2, 2)]
            .iter()
            .map(|&(h, w)| AvslLevelOutput {
                embedding: Tensor::random([b, dim], Distribution::Normal(0.0, 1.0), &host),
                cam: Tensor::random([b, dim, h, w], Distribution::Normal(0.0, 1.0), &host),
            })
            .collect()
    };
    let mut query = AvslBank::new();
    query.push(&outputs(1), Certainty::Code).expect("query bank");
    let mut references = AvslBank::new();
    for _ in 0..gallery.div_ceil(1000) {
        references
            .push(&outputs(1000), Certainty::Code)
            .expect("reference bank");
    }
    let links: Vec<Tensor<2>> = (0..2)
        .map(|_| {
            let l = Tensor::<2>::random([dim, dim], Distribution::Uniform(0.0, 1.0), &host);
            link_star(l, topk).expect("top-k").0
        })
        .collect();
    let reliability: Vec<Reliability> = (0..2)
        .map(|_| Reliability {
            coef: Tensor::random([dim], Distribution::Normal(0.0, 1.0), &host),
            bias: Tensor::random([dim], Distribution::Normal(0.0, 1.0), &host),
        })
        .collect();
    let scorer = AvslScorer::new(&links, &reliability, 10.0).expect("scorer");
    let rows: Vec<u32> = (0..references.rows() as u32).collect();
    let mut out = vec![0.0f32; rows.len()];
    scorer.distances(&query, 0, &references, &rows, &mut out);
    let start = Instant::now();
    let repeats = 5;
    for _ in 0..repeats {
        scorer.distances(&query, 0, &references, &rows, &mut out);
    }
    let per_pair = start.elapsed().as_secs_f64() / (repeats * rows.len()) as f64;
    dml_testkit::bench::emit(
        "avsl/d_hat_per_pair",
        per_pair,
        "pair scored",
        serde_json::json!({
            "levels": 3,
            "avsl_dim": dim,
            "avsl_topk": topk,
            "pairs": rows.len(),
            "rerank_100_ms_per_query": per_pair * 100.0 * 1e3,
            "checksum": out.iter().map(|&v| f64::from(v)).sum::<f64>(),
            "threads_used": 1,
        }),
    );
}
