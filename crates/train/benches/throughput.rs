//! Training throughput: forward + loss + backward + Adam update per batch, with the time
//! split by phase (the device is synchronised between phases).
//!
//! `cargo bench -p train --bench throughput -- [--device flex|wgpu|ndarray|cuda] [--steps N] [--only small_cnn|resnet18|resnet50]`
//!
//! Three workloads: the small CNN (32-64-128-256, GAP, linear 128) on 28² inputs, batch 128;
//! ResNet-18 at 112², batch 32; ResNet-50 (the papers' backbone) at 224², batch 16. On a GPU
//! device (`wgpu…`, `cuda…`) a fourth runs too, ResNet-50 at 224², batch 64, a batch that fills a
//! GPU better and would take minutes per bench on a CPU (`--only resnet50_224px_b64` runs it
//! anywhere). The loss is the contrastive loss, cheap next to the networks. Prints one
//! measurement line per workload (`dml_testkit::bench`, id `train/<workload>`, seconds per
//! training step); `cargo xtask bench --peers` runs the same steps in PyTorch +
//! pytorch-metric-learning (`xtask/peers/train.py`).

mod common;

use dml_train::Silent;
use dml_train::device::parse_device;
use dml_train::training::StepTimes;
use dml_train::{Learner, Shortcuts, TrainConfig};

struct Workload {
    name: &'static str,
    backbone: &'static str,
    side: usize,
    batch: usize,
    dim: usize,
    /// Run only on a GPU device, or when `--only` selects it.
    gpu_only: bool,
}

fn main() {
    // As the `train` binary does: freed step buffers stay in the process.
    dml_backend::retain_freed_memory();
    let device_name = common::arg("--device").unwrap_or_else(|| "flex".into());
    let steps: usize = common::parsed("--steps", 10);
    let only = common::arg("--only");
    let workloads = [
        Workload {
            name: "small_cnn_28px_b128",
            backbone: "small_cnn",
            side: 28,
            batch: 128,
            dim: 128,
            gpu_only: false,
        },
        Workload {
            name: "resnet18_112px_b32",
            backbone: "resnet18",
            side: 112,
            batch: 32,
            dim: 128,
            gpu_only: false,
        },
        Workload {
            name: "resnet50_224px_b16",
            backbone: "resnet50",
            side: 224,
            batch: 16,
            dim: 128,
            gpu_only: false,
        },
        Workload {
            name: "resnet50_224px_b64",
            backbone: "resnet50",
            side: 224,
            batch: 64,
            dim: 128,
            gpu_only: true,
        },
    ];
    let on_gpu = dml_testkit::bench::names_gpu(&device_name);
    let device = parse_device(&device_name).expect("device").autodiff();
    for w in workloads.iter().filter(|w| match only.as_deref() {
        Some(o) => w.name.starts_with(o),
        None => on_gpu || !w.gpu_only,
    }) {
        let sets: Vec<String> = vec![
            format!("model.backbone=\"{}\"", w.backbone),
            format!("model.embedding_dim={}", w.dim),
            "loss.name=\"contrastive\"".into(),
            "miner=none".into(),
        ];
        let config = TrainConfig::resolve(None, &Shortcuts::default(), &sets).expect("config");
        let classes = w.batch / 4;
        let mut learner = Learner::new(&config, classes, &device, &Silent).expect("learner");
        let labels: Vec<u32> = (0..w.batch as u32).map(|i| i / 4).collect();
        let pixels = common::pixels(w.batch, w.side);
        let images = || common::batch(&pixels, w.batch, w.side, &device);
        let per_step = common::seconds_per_step(&mut learner, images, &labels, steps, &device);
        let mut total = StepTimes::default();
        let profiled = steps.clamp(1, 5);
        for s in 0..profiled {
            let (_, t) = learner
                .step_profiled(images(), &labels, s as u64, [1e-4; 3])
                .expect("step");
            total.forward += t.forward / profiled as f64;
            total.loss += t.loss / profiled as f64;
            total.backward += t.backward / profiled as f64;
            total.update += t.update / profiled as f64;
        }
        dml_testkit::bench::emit(
            &format!("train/{}", w.name),
            per_step,
            "training step",
            serde_json::json!({
                "device": device_name,
                "batch": w.batch,
                "input": [3, w.side, w.side],
                "steps": steps,
                "images_per_second": w.batch as f64 / per_step,
                "profile_seconds": total,
                "threads": std::thread::available_parallelism().map_or(0, |n| n.get()),
            }),
        );
    }
}
