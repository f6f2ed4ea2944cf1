//! The one output format of the workspace's benches, which `cargo xtask bench` reads.
//!
//! A bench prints one JSON object per line for each measurement:
//! `{"id": "train/resnet18_112px_b32", "seconds": 0.81, "unit": "training step", …}`, where `id`
//! names the workload (stable across versions, so that tables can be compared), `seconds` is the
//! time of one unit of work (lower is better) and `unit` says what that unit is. Any further
//! keys are the bench's details (sizes, threads, metric values, peak memory). `cargo xtask bench`
//! pairs each measurement with the peer (PyTorch, pytorch-metric-learning, POT, faiss) that names
//! the same `id` in its `ours` field; lines without an `id` are printed but not compared.

use serde_json::{Map, Value, json};

/// Prints one measurement line: `id`, `seconds` (of one `unit` of work) and the keys of
/// `details` (a JSON object; any other value is stored under `"details"`).
///
/// Panics when `seconds` is not a finite, non-negative number: a bench that measured nothing
/// must not print a time.
pub fn emit(id: &str, seconds: f64, unit: &str, details: Value) {
    println!("{}", line(id, seconds, unit, details));
}

/// The JSON text [`emit`] prints (one line, no trailing newline).
pub fn line(id: &str, seconds: f64, unit: &str, details: Value) -> String {
    assert!(
        seconds.is_finite() && seconds >= 0.0,
        "bench {id}: measured time {seconds} s is not a finite non-negative number"
    );
    let mut object = Map::new();
    object.insert("id".into(), json!(id));
    object.insert("seconds".into(), json!(seconds));
    object.insert("unit".into(), json!(unit));
    match details {
        Value::Object(extra) => {
            for (key, value) in extra {
                // The three keys above are the format; a detail must not shadow them.
                assert!(!object.contains_key(&key), "bench {id}: detail key {key:?} is reserved");
                object.insert(key, value);
            }
        }
        Value::Null => {}
        other => {
            object.insert("details".into(), other);
        }
    }
    Value::Object(object).to_string()
}

/// Whether a device name (`--device` of the benches and `cargo xtask bench`) names a GPU:
/// `cuda…`, or `wgpu…` other than `wgpu:cpu` (wgpu's CPU adapter, such as Mesa lavapipe). The
/// GPU-only workloads run there, and their peers run on PyTorch's CUDA device; every other name
/// is a CPU device, with CPU peers.
pub fn names_gpu(device: &str) -> bool {
    (device.starts_with("wgpu") && device != "wgpu:cpu") || device.starts_with("cuda")
}

/// The median of `samples` (the mean of the two middle values for an even count), after
/// sorting them in place, so that `samples[0]` is then the minimum; panics on an empty slice.
/// Every bench and `cargo xtask bench`'s summary use this one convention.
pub fn median(samples: &mut [f64]) -> f64 {
    assert!(!samples.is_empty(), "median of no samples");
    samples.sort_by(f64::total_cmp);
    let n = samples.len();
    if n % 2 == 1 {
        samples[n / 2]
    } else {
        (samples[n / 2 - 1] + samples[n / 2]) / 2.0
    }
}

/// `f` run once to warm up, then `repeats` times: `(median, min)` of those runs' wall times in
/// seconds ([`median`]'s convention). The timing loop of the benches that time a closure.
pub fn timed(repeats: usize, mut f: impl FnMut()) -> (f64, f64) {
    f();
    let mut times: Vec<f64> = (0..repeats)
        .map(|_| {
            let start = std::time::Instant::now();
            f();
            start.elapsed().as_secs_f64()
        })
        .collect();
    let median = median(&mut times);
    (median, times[0])
}

/// Peak resident set size of this process (`VmHWM` of `/proc/self/status`) in MB, or `None`
/// where `/proc` is unavailable.
pub fn peak_rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map(|kb| kb / 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_holds_the_format_keys_and_the_details() {
        let text = line("losses/proxy_anchor", 0.0012, "forward + backward", json!({"n": 180}));
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["id"], "losses/proxy_anchor");
        assert_eq!(v["seconds"], 0.0012);
        assert_eq!(v["unit"], "forward + backward");
        assert_eq!(v["n"], 180);
        assert!(!text.contains('\n'));
    }

    #[test]
    fn timing_warms_up_once_then_reports_the_median_and_minimum_of_the_repeats() {
        let mut calls = 0;
        let (median, min) = timed(5, || {
            calls += 1;
            std::thread::sleep(std::time::Duration::from_millis(1));
        });
        assert_eq!(calls, 6);
        assert!(min >= 1e-3 && min <= median, "min {min}, median {median}");
    }

    #[test]
    fn gpu_names_are_cuda_and_wgpu_adapters_other_than_the_cpu_one() {
        for gpu in ["wgpu", "wgpu:0", "wgpu:discrete", "cuda", "cuda:1"] {
            assert!(names_gpu(gpu), "{gpu}");
        }
        for cpu in ["flex", "ndarray", "wgpu:cpu", "cpu"] {
            assert!(!names_gpu(cpu), "{cpu}");
        }
    }

    #[test]
    #[should_panic(expected = "not a finite")]
    fn a_nan_time_is_refused() {
        let _ = line("x", f64::NAN, "step", Value::Null);
    }

    #[test]
    #[should_panic(expected = "reserved")]
    fn a_detail_cannot_shadow_the_time() {
        let _ = line("x", 1.0, "step", json!({"seconds": 2.0}));
    }

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
    }
}
