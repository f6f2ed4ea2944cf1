//! One writer per run, through the real binary: while a run trains, a second `train` on the same
//! run directory is refused naming the first's process id, and `eval` reads the run; once the first
//! is killed with SIGKILL (no chance to clean up), `train --resume` takes the run again: the kernel
//! released the lock.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn args(runs: &Path, extra: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = vec!["--quiet".into(), "--name".into(), "locked".into(), "--run-dir".into()];
    a.push(runs.to_str().unwrap().into());
    let root = format!("data.root={}", common::toml_string(common::data_root()));
    for set in [
        "data.synth_images=300",
        "data.synth_size=32",
        "data.image_size=24",
        "train.batch_size=20",
        "train.m=4",
        "train.samples_per_epoch=200",
        "eval.batch_size=100",
        root.as_str(),
    ] {
        a.extend(["--set".to_string(), set.to_string()]);
    }
    a.extend(["--epochs".into(), "200".into()]);
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}

fn wait_for(what: &str, mut ready: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ready() {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_second_writer_is_refused_and_a_killed_run_leaves_no_stale_lock() {
    let runs = tempfile::tempdir().unwrap();
    let run = runs.path().join("locked");
    let bin = env!("CARGO_BIN_EXE_train");
    let mut first = Command::new(bin)
        .args(args(runs.path(), &[]))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The first epoch committed: the lock is held and there is a checkpoint to read.
    wait_for("the first checkpoint", || run.join("latest.json").is_file());
    let pid = first.id().to_string();
    assert_eq!(std::fs::read_to_string(run.join("train.lock")).unwrap().trim(), pid);
    let second = Command::new(bin)
        .args(args(runs.path(), &["--resume"]))
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success(), "a second writer ran");
    assert!(e.contains(&format!("being trained by process {pid}")), "{e}");
    let eval = Command::new(bin)
        .args(["eval", run.to_str().unwrap(), "--checkpoint", "latest"])
        .output()
        .unwrap();
    assert!(eval.status.success(), "{}", String::from_utf8_lossy(&eval.stderr));
    // SIGKILL: the process cannot release anything itself.
    first.kill().unwrap();
    first.wait().unwrap();
    let resumed = Command::new(bin)
        .args(args(runs.path(), &["--resume", "--stop-after", "1"]))
        .output()
        .unwrap();
    assert!(resumed.status.success(), "{}", String::from_utf8_lossy(&resumed.stderr));
}
