//! What PPGML's geodesic factor costs per training step (Kim & Song 2022, Sec. III-A and the
//! complexity paragraph of Sec. III-B): the factor alone on the host, and forward + backward of
//! each GML loss next to its baseline, on the flex CPU backend in f32.
//!
//! `cargo bench -p dml-losses --bench geodesic` prints one measurement line (`dml_testkit::bench`)
//! per timing. Per batch shape (`N` embeddings of `D` dimensions, 8 per class: the default run's
//! 40 × 64, the paper's N = 112 at 512, and 180 × 512 as the loss bench), it gives the median
//! seconds (and the minimum) of `geodesic_factor` (`geodesic/factor_<N>x<D>`) and of each loss's
//! forward + backward (`geodesic/<loss>_<N>x<D>`, its baseline `…_baseline_<N>x<D>`, with the
//! ratio GML / baseline). `-- --iters 20` changes the timed iterations (default 50).

use std::time::Instant;

use burn::tensor::{Device, Tensor, TensorData};
use dml_losses::LossConfig;
use dml_losses::geodesic::{GeodesicFactorConfig, euclidean_from_matrix, geodesic_factor};
use rand::{Rng, SeedableRng};
use serde_json::json;

const PER_CLASS: usize = 8;
const WARMUP: usize = 3;

/// Prints `times` (seconds per `unit`) as one measurement line: the median, with the minimum and
/// `details`, to which `extra` adds what depends on the median.
fn emit(
    id: &str,
    unit: &str,
    mut times: Vec<f64>,
    details: serde_json::Value,
    extra: impl FnOnce(f64, &mut serde_json::Value),
) -> f64 {
    let median = dml_testkit::bench::median(&mut times);
    let mut details = details;
    extra(median, &mut details);
    details["min_seconds"] = json!(times[0]);
    details["backend"] = json!("flex (CPU), f32, autodiff; the factor on the host in f64");
    details["samples_per_class"] = json!(PER_CLASS);
    dml_testkit::bench::emit(id, median, unit, details);
    median
}

/// Clustered embeddings `[n, d]` (a class centre plus noise) and their labels, `PER_CLASS` per
/// class: a batch with the structure training produces, so that the factor is not degenerate.
fn batch(n: usize, d: usize, seed: u64) -> (Vec<f32>, Vec<u32>) {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let labels: Vec<u32> = (0..n as u32).map(|i| i / PER_CLASS as u32).collect();
    let classes = n.div_ceil(PER_CLASS);
    let centres: Vec<f32> = (0..classes * d).map(|_| rng.random::<f32>() * 2.0 - 1.0).collect();
    let values = (0..n * d)
        .map(|k| centres[labels[k / d] as usize * d + k % d] + 0.8 * (rng.random::<f32>() - 0.5))
        .collect();
    (values, labels)
}

/// Euclidean distances `[n, n]` of the L2-normalised rows of `x` `[n, d]`, as the losses hand
/// them to the factor.
fn normalised_distances(x: &[f32], n: usize, d: usize) -> Vec<f64> {
    let rows: Vec<Vec<f64>> = x
        .chunks(d)
        .map(|r| {
            let norm = r.iter().map(|&v| f64::from(v).powi(2)).sum::<f64>().sqrt().max(1e-12);
            r.iter().map(|&v| f64::from(v) / norm).collect()
        })
        .collect();
    let gram: Vec<f64> = (0..n * n)
        .map(|k| rows[k / n].iter().zip(&rows[k % n]).map(|(a, b)| a * b).sum())
        .collect();
    euclidean_from_matrix(&gram, n, true, 1.0).expect("[n, n] matrix")
}

/// Forward + backward of `loss_toml` on `values` `[n, d]`, `iters` timed steps.
fn time_loss(loss_toml: &str, values: &[f32], labels: &[u32], d: usize, iters: usize, device: &Device) -> Vec<f64> {
    let n = labels.len();
    let classes = n.div_ceil(PER_CLASS);
    let loss = toml::from_str::<LossConfig>(loss_toml)
        .unwrap()
        .init(classes, d, device)
        .unwrap();
    let mut times = Vec::with_capacity(iters);
    for it in 0..WARMUP + iters {
        let x: Tensor<2> = Tensor::from_data(TensorData::new(values.to_vec(), [n, d]), device).require_grad();
        let start = Instant::now();
        let out = loss.forward(x.clone(), labels, None, it as u64).unwrap();
        let grads = out.loss.backward();
        // Reading the gradient back makes sure all work has finished.
        let g = x.grad(&grads).expect("gradient").into_data();
        let elapsed = start.elapsed().as_secs_f64();
        assert_eq!(g.num_elements(), n * d);
        if it >= WARMUP {
            times.push(elapsed);
        }
    }
    times
}

fn main() {
    // As the `train` binary does: freed step buffers stay in the process.
    dml_backend::retain_freed_memory();
    let device = Device::flex().autodiff();
    let args: Vec<String> = std::env::args().collect();
    let iters = args
        .iter()
        .position(|a| a == "--iters")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(50usize);
    // Each GML loss next to the catalogue loss it reduces to at ϕ_s = 1, ε2 = 0.
    let pairs = [
        ("gml_pa", "name = \"gml_pa\"", "name = \"proxy_anchor\"\nalpha = 48.0"),
        (
            "gml_tri",
            "name = \"gml_tri\"",
            "name = \"contrastive\"\npos_margin = 0.8\nneg_margin = 0.8\ndistance = { type = \"lp\", power = 2.0 }",
        ),
        ("gml_ms", "name = \"gml_ms\"", "name = \"multi_similarity\"\nbase = 1.0"),
    ];
    for (n, d) in [(40, 64), (112, 512), (180, 512)] {
        let (values, labels) = batch(n, d, 0);
        let dist = normalised_distances(&values, n, d);
        let config = GeodesicFactorConfig::default();
        let mut factor_times = Vec::with_capacity(iters);
        let mut dim = 0;
        for it in 0..WARMUP + iters {
            let start = Instant::now();
            let f = geodesic_factor(&config, &dist, &labels, it as u64).expect("[n, n] finite matrix");
            let elapsed = start.elapsed().as_secs_f64();
            assert!(f.degeneracy.is_none(), "the bench batch must not be degenerate: {f:?}");
            dim = f.dim;
            if it >= WARMUP {
                factor_times.push(elapsed);
            }
        }
        let shape = json!({ "n": n, "d": d, "iterations": iters });
        let mut factor_details = shape.clone();
        factor_details["chosen_k"] = json!(dim);
        emit(
            &format!("geodesic/factor_{n}x{d}"),
            "factor evaluation",
            factor_times,
            factor_details,
            |_, _| {},
        );
        for (name, gml, baseline) in pairs {
            let g = time_loss(gml, &values, &labels, d, iters, &device);
            let b = time_loss(baseline, &values, &labels, d, iters, &device);
            let b = emit(
                &format!("geodesic/{name}_baseline_{n}x{d}"),
                "forward + backward",
                b,
                shape.clone(),
                |_, _| {},
            );
            emit(
                &format!("geodesic/{name}_{n}x{d}"),
                "forward + backward",
                g,
                shape.clone(),
                |median, details| {
                    details["ratio_to_baseline"] = json!(median / b);
                },
            );
        }
    }
}
