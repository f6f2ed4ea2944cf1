//! The fused conv-BN-ReLU block, forward + backward, on ResNet-18's 3 × 3 stride-1 layers at
//! 112², batch 32, by both routes: Winograd (F(4×4, 3×3) or F(2×2, 3×3), as `winograd::route`
//! picks) and the direct (im2col) product.
//!
//! `cargo bench -p dml-kernels --bench conv`
//!
//! This is the measurement behind the Winograd route and its threshold
//! (`dml-kernels/src/winograd/mod.rs`, `route`); `DML_WINOGRAD=f2` or `f4` in the environment
//! measures one algorithm. The route is chosen once per process
//! (`DML_WINOGRAD`), so the bench measures the default route itself and then runs itself again
//! with `DML_WINOGRAD=0` for the direct one. One line per layer and route
//! (`dml_testkit::bench`, id `conv/resnet18_<C>ch_<side>px_b32_<route>`, seconds per forward +
//! backward, the median of 5 after a warm-up).

use std::process::Command;

use dml_kernels::conv::{Conv2dShape, WINOGRAD_SWITCH, Wanted, available, winograd_enabled};
use dml_kernels::conv_bn::{BnParams, conv_bn_train, conv_bn_train_backward};
use serde_json::json;

/// The argument the bench passes to its second run.
const DIRECT: &str = "--direct-route";
const BATCH: usize = 32;
const REPEATS: usize = 5;

/// ResNet-18's 3 × 3 stride-1 layers at 112²: channels and map side per stage.
const LAYERS: [(usize, usize); 4] = [(64, 28), (128, 14), (256, 7), (512, 4)];

fn values(n: usize, seed: usize) -> Vec<f32> {
    (0..n)
        .map(|i| (((i * 7919 + seed * 104_729) % 1000) as f32 - 500.0) / 2000.0)
        .collect()
}

fn main() {
    if !available() {
        eprintln!("conv bench: this CPU lacks AVX-512F, which the host convolutions need");
        return;
    }
    let direct_run = std::env::args().any(|a| a == DIRECT);
    let route = if winograd_enabled() { "winograd" } else { "direct" };
    let threads = rayon::current_num_threads();
    for (channels, side) in LAYERS {
        let s = Conv2dShape {
            batch: BATCH,
            channels,
            height: side,
            width: side,
            out_channels: channels,
            kernel: [3, 3],
            stride: [1, 1],
            padding: [(1, 1), (1, 1)],
        };
        let x = values(BATCH * channels * side * side, 1);
        let w = values(channels * channels * 9, 2);
        let g = values(BATCH * channels * side * side, 3);
        let (gamma, beta) = (vec![1.0f32; channels], vec![0.1f32; channels]);
        let bn = BnParams {
            gamma: &gamma,
            beta: &beta,
            epsilon: 1e-5,
        };
        let both = Wanted {
            input: true,
            weight: true,
            bias: false,
        };
        let step = || {
            let out = conv_bn_train(&s, &x, &w, bn, true).expect("a valid layer");
            let grads = conv_bn_train_backward(&s, &x, &w, &out.saved, bn, true, &g, both).expect("a valid layer");
            std::hint::black_box((out.output, grads.input, grads.weight));
        };
        let (median, min) = dml_testkit::bench::timed(REPEATS, step);
        dml_testkit::bench::emit(
            &format!("conv/resnet18_{channels}ch_{side}px_b{BATCH}_{route}"),
            median,
            "forward + backward",
            json!({
                "route": route,
                "min_seconds": min,
                "shape": [BATCH, channels, side, side],
                "threads": threads,
            }),
        );
    }
    if direct_run || route == "direct" {
        return;
    }
    // The direct route, in a process of its own.
    let exe = std::env::current_exe().expect("the bench's own path");
    let status = Command::new(exe)
        .arg(DIRECT)
        .env(WINOGRAD_SWITCH, "0")
        .status()
        .expect("the bench runs itself again");
    assert!(status.success(), "the direct-route run failed: {status}");
}
