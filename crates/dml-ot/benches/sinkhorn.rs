//! Batched Sinkhorn timing: 1,000 pairs of 16 × 16 (DIML's G = 4), eps 0.05, exactly 50 iterations,
//! forward and forward + backward, for every solver path: the host engine (plan and hand-written
//! adjoint on the host, one autodiff node), the tensor engine in its stabilised and log-domain forms,
//! the implicit gradient and the detached plan. One measurement line (`dml_testkit::bench`, id
//! `sinkhorn/<path>/<pass>`, seconds per 1,000 pairs) per path and pass.
//!
//! Run with `cargo bench -p dml-ot --bench sinkhorn [-- --device flex|ndarray|wgpu]`. `cargo xtask
//! bench --peers` runs DIML's kernel-space loop in PyTorch and POT's log-domain solver on the same
//! problems (`xtask/peers/sinkhorn.py`) in the same run.

use burn::tensor::{Device, Distribution, Tensor};
use dml_ot::{PlanGradient, Sinkhorn, SinkhornConfig, SinkhornEngine};

const BATCH: usize = 1000;
const N: usize = 16;
const ITERS: usize = 50;
const REPEATS: usize = 7;

fn solver(engine: SinkhornEngine, absorb_every: usize, gradient: PlanGradient) -> Sinkhorn {
    SinkhornConfig {
        engine,
        eps: 0.05,
        max_iters: ITERS,
        tolerance: 0.0,
        absorb_every,
        gradient,
        ..SinkhornConfig::default()
    }
    .init()
    .expect("valid settings")
}

/// Median wall time in milliseconds of `f` over [`REPEATS`] runs after one warm-up.
fn median_ms(f: impl FnMut()) -> f64 {
    dml_testkit::bench::timed(REPEATS, f).0 * 1e3
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let device_name = args
        .iter()
        .position(|a| a == "--device")
        .and_then(|i| args.get(i + 1))
        .map_or("flex", String::as_str)
        .to_string();
    let plain = match device_name.as_str() {
        "flex" => Device::flex(),
        // Deprecated upstream but still a selectable backend, kept for comparison.
        #[allow(deprecated)]
        "ndarray" => Device::ndarray(),
        "wgpu" => Device::wgpu(burn::tensor::DeviceKind::DefaultDevice),
        other => {
            eprintln!("--device {other}: expected flex, ndarray or wgpu");
            std::process::exit(2);
        }
    };
    let cost_values = Tensor::<3>::random([BATCH, N, N], Distribution::Uniform(0.0, 2.0), &plain).into_data();
    let weights_values = Tensor::<3>::random([BATCH, N, N], Distribution::Uniform(-1.0, 1.0), &plain).into_data();
    let marginal = |device: &Device| Tensor::<2>::full([BATCH, N], 1.0 / N as f64, device);
    let threads = rayon::current_num_threads();
    let emit = |path: &str, pass: &str, ms: f64, dtype: &str, device: &str| {
        dml_testkit::bench::emit(
            &format!("sinkhorn/{path}/{pass}"),
            ms / 1e3,
            "1,000 pairs",
            serde_json::json!({
                "batch": BATCH, "n": N, "m": N, "eps": 0.05, "iterations": ITERS,
                "dtype": dtype, "device": device, "threads": threads,
            }),
        );
    };
    let paths = [
        ("host_unrolled", SinkhornEngine::Host, 10, PlanGradient::Unrolled),
        (
            "tensor_stabilised_unrolled",
            SinkhornEngine::Tensor,
            10,
            PlanGradient::Unrolled,
        ),
        (
            "tensor_log_domain_unrolled",
            SinkhornEngine::Tensor,
            1,
            PlanGradient::Unrolled,
        ),
        ("implicit", SinkhornEngine::Host, 10, PlanGradient::Implicit),
        ("host_detached", SinkhornEngine::Host, 10, PlanGradient::Detached),
        (
            "tensor_stabilised_detached",
            SinkhornEngine::Tensor,
            10,
            PlanGradient::Detached,
        ),
    ];
    for (path, engine, absorb, gradient) in paths {
        let s = solver(engine, absorb, gradient.clone());
        let forward = median_ms(|| {
            let cost = Tensor::<3>::from_data(cost_values.clone(), &plain);
            let out = s.forward(cost, marginal(&plain), marginal(&plain));
            let _ = out.plan.into_data();
        });
        emit(path, "forward", forward, "f32", &device_name);
        if gradient == PlanGradient::Detached {
            continue;
        }
        let device = plain.clone().autodiff();
        let both = median_ms(|| {
            let cost = Tensor::<3>::from_data(cost_values.clone(), &device).require_grad();
            let weights = Tensor::<3>::from_data(weights_values.clone(), &device);
            let out = s.forward(cost.clone(), marginal(&device), marginal(&device));
            let grads = (out.plan * weights).sum().backward();
            let _ = cost.grad(&grads).expect("cost is tracked").into_data();
        });
        emit(path, "forward_backward", both, "f32", &device_name);
    }
    if device_name != "flex" {
        return;
    }
    // The host solver (f64, rayon over the items), the path of evaluation and re-ranking.
    let s = solver(SinkhornEngine::Host, 10, PlanGradient::Detached);
    let cost: Vec<f64> = cost_values.clone().try_into_vec_as::<f64>().expect("float data");
    let uniform = vec![1.0 / N as f64; BATCH * N];
    let host = median_ms(|| {
        let out = s
            .solve_host(&cost, &uniform, &uniform, [BATCH, N, N])
            .expect("valid problem");
        assert_eq!(out.convergence.len(), BATCH);
    });
    emit("host_f64", "forward", host, "f64", "host");
}
