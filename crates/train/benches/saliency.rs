//! SmoothGrad saliency throughput (Kobs et al., Eq. 1–2), the cost that dominates `train analyze`:
//! maps per second for the synthetic-set default model (small CNN, 48², D = 64), each map `l` noisy
//! copies forward and backward in one batch against a black base image.
//!
//! `cargo bench -p train --bench saliency -- [--device flex|wgpu] [--maps N] [--samples L]`
//!
//! Prints one measurement line (`dml_testkit::bench`, seconds per map, with maps and noisy copies per
//! second); `cargo xtask bench --peers` runs the same maps in PyTorch (`xtask/peers/saliency.py`).

mod common;

use std::time::Instant;

use burn::tensor::{Distribution, Tensor};
use dml_explain::saliency::smoothgrad::{MapOrder, black_image_tensor, smoothgrad};
use dml_train::Silent;
use dml_train::device::parse_device;
use dml_train::model::build_model;
use dml_train::{Shortcuts, TrainConfig};

fn main() {
    dml_backend::retain_freed_memory();
    let device_name = common::arg("--device").unwrap_or_else(|| "flex".into());
    let maps: usize = common::parsed("--maps", 20);
    let samples: usize = common::parsed("--samples", 50);
    let device = parse_device(&device_name).expect("device").autodiff();
    let config = TrainConfig::resolve(None, &Shortcuts::default(), &[]).expect("config");
    let model = build_model(&config, &device, &Silent).expect("model");
    let distance = config
        .loss
        .init(5, config.model.embedding_dim, &device)
        .expect("loss")
        .distance()
        .clone();
    let side = config.data.image_size as usize;
    let base = black_image_tensor(side, side, config.data.mean, config.data.std, &device);
    let image = || Tensor::<3>::random([3, side, side], Distribution::Normal(0.0, 1.0), &device);
    // Warm-up: allocation pools and (on wgpu) shader compilation.
    let warm = smoothgrad(&model, image(), base.clone(), samples, 0.15, 0, &distance).expect("saliency");
    let _ = warm.map(MapOrder::Code);
    let start = Instant::now();
    for k in 0..maps {
        let sg = smoothgrad(&model, image(), base.clone(), samples, 0.15, k as u64, &distance).expect("saliency");
        let _ = sg.map(MapOrder::Code).expect("map");
    }
    let seconds = start.elapsed().as_secs_f64();
    dml_testkit::bench::emit(
        "saliency/smoothgrad_small_cnn_48px",
        seconds / maps as f64,
        "saliency map",
        serde_json::json!({
            "device": device_name,
            "samples_per_map": samples,
            "maps": maps,
            "maps_per_second": maps as f64 / seconds,
            "images_per_second": (maps * samples) as f64 / seconds,
            "threads": std::thread::available_parallelism().map_or(0, |n| n.get()),
        }),
    );
}
