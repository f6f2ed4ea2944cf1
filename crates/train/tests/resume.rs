//! Killing a run (SIGKILL, through the real binary) and resuming it gives exactly the
//! metrics of a run that was never interrupted; a checkpoint is never half-written.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

fn train_cmd(runs: &Path, name: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_train"));
    let config = common::tiny_config(runs, name, &["train.epochs=3", "eval.every=1"]);
    let file = runs.join(format!("{name}.toml"));
    std::fs::write(&file, config.to_toml().unwrap()).unwrap();
    cmd.args(["--quiet", "--config"]).arg(&file);
    cmd
}

#[test]
fn sigkill_then_resume_matches_an_uninterrupted_run() {
    let runs = tempfile::tempdir().unwrap();
    let status = train_cmd(runs.path(), "straight").status().unwrap();
    assert!(status.success());
    let straight = common::records(&runs.path().join("straight"));
    assert_eq!(straight.len(), 4);

    // Kill the second run as soon as its first checkpoint is committed, i.e. while it
    // trains epoch 2 (or while it writes the next checkpoint).
    let run = runs.path().join("killed");
    let mut child = train_cmd(runs.path(), "killed").spawn().unwrap();
    let start = Instant::now();
    while !run.join("latest.json").exists() {
        assert!(start.elapsed() < Duration::from_secs(600), "no checkpoint appeared");
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended before it could be killed"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL on Unix.
    child.wait().unwrap();
    let interrupted = common::records(&run);
    assert!(
        interrupted.len() < straight.len(),
        "the kill came too late to test anything"
    );

    // Without --resume an existing run is refused rather than overwritten.
    let refused = train_cmd(runs.path(), "killed").output().unwrap();
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--resume"));

    let resumed = train_cmd(runs.path(), "killed").arg("--resume").status().unwrap();
    assert!(resumed.success());
    assert_eq!(common::records(&run), straight);
}
