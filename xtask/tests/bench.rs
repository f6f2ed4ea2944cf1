//! `cargo xtask bench` end to end: it builds a real bench of the workspace, runs it for every
//! repeat, and writes the JSON report and the markdown table atomically; bad options fail
//! before anything is built, naming the option. (The peers need PyTorch from pip and are not
//! run by the tests; their pairing is tested in `xtask/src/bench/summary.rs`.)

use std::path::PathBuf;
use std::process::Command;

fn tempdir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("xtask-bench-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn a_real_bench_runs_each_repeat_into_one_report_and_table() {
    let dir = tempdir("report");
    let out = dir.join("bench.json");
    // The dev profile reuses the test build (the workspace's feature set); `retrieval-c10` is
    // the cheapest bench without Burn (P@1 + MAP@R of 60,000 × 128, a few seconds).
    let output = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args([
            "bench",
            "--only",
            "retrieval-c10",
            "--repeats",
            "2",
            "--profile",
            "dev",
            "--out",
        ])
        .arg(&out)
        .output()
        .expect("run xtask");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "xtask bench failed:\n{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let records = report["records"].as_array().unwrap();
    assert_eq!(records.len(), 2, "one measurement per repeat: {records:?}");
    for (repeat, r) in records.iter().enumerate() {
        assert_eq!(r["id"], "retrieval/60000x128_c10");
        assert_eq!(r["side"], "ours");
        assert_eq!(r["repeat"], repeat);
        assert!(r["seconds"].as_f64().unwrap() > 0.0);
        // The bench's details come through: the metrics of well-separated clusters and its memory.
        assert!(r["details"]["precision_at_1"].as_f64().unwrap() > 0.5, "{r}");
        assert!(r["details"]["peak_rss_mb"].as_f64().unwrap() > 0.0, "{r}");
    }
    let measured = &report["summary"]["ours"][0];
    assert_eq!(measured["seconds"]["count"], 2);
    assert!(report["summary"]["comparisons"].as_array().unwrap().is_empty());
    assert_eq!(report["failures"].as_array().unwrap().len(), 0);
    assert_eq!(report["repeats"], 2);
    assert!(report["machine"]["cores"].as_u64().unwrap() >= 1);
    let table = std::fs::read_to_string(dir.join("bench.md")).unwrap();
    assert!(table.starts_with("Measured "), "{table}");
    assert!(
        table.contains("| `retrieval/60000x128_c10` | evaluation (P@1 + MAP@R) |"),
        "{table}"
    );
    assert!(table.contains(" MB |"), "peak memory shown: {table}");
    // Nothing but the two outputs: the temporary files were renamed into place.
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["bench.json", "bench.md"]);
    // `--from` summarises the report again without running anything: the same table.
    let again = dir.join("again.json");
    let output = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["bench", "--from"])
        .arg(&out)
        .arg("--out")
        .arg(&again)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(!String::from_utf8_lossy(&output.stderr).contains("building"));
    assert_eq!(std::fs::read_to_string(dir.join("again.md")).unwrap(), table);
    let err = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["bench", "--from"])
        .arg(dir.join("bench.md"))
        .output()
        .unwrap();
    assert!(!err.status.success());
    assert!(String::from_utf8_lossy(&err.stderr).contains("bench.md is not a report"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_options_fail_naming_them_before_any_build() {
    let run = |args: &[&str]| {
        let output = Command::new(env!("CARGO_BIN_EXE_xtask")).args(args).output().unwrap();
        assert!(!output.status.success(), "{args:?} should fail");
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    let err = run(&["bench", "--only", "resnet", "--out", "/nonexistent/x.json"]);
    assert!(err.contains("--only resnet") && err.contains("throughput"), "{err}");
    let err = run(&["bench", "--repeats", "0"]);
    assert!(err.contains("--repeats 0"), "{err}");
    assert!(!err.contains("building"), "nothing is built for a bad option: {err}");
}

#[test]
fn list_names_every_bench_and_its_peer() {
    let output = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["bench", "--list"])
        .output()
        .unwrap();
    assert!(output.status.success());
    let text = String::from_utf8_lossy(&output.stdout);
    for name in [
        "throughput",
        "losses",
        "sinkhorn",
        "rerank",
        "retrieval-1m",
        "loader",
        "saliency",
        "geodesic",
    ] {
        assert!(
            text.lines().any(|l| l.starts_with(name)),
            "{name} missing from:\n{text}"
        );
    }
    assert!(
        text.contains("peer xtask/peers/train.py") && text.contains("only with --only"),
        "{text}"
    );
}
