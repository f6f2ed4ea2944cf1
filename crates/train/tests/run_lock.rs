//! One writer per run, through the real binary: while a run trains, a second `train` on the same
//! run directory is refused naming the first's process id, and `eval` reads the run; once the first
//! is killed with SIGKILL (no chance to clean up), `train --resume` takes the run again: the kernel
//! released the lock.

mod common;

use std::process::{Command, Stdio};

#[test]
fn a_second_writer_is_refused_and_a_killed_run_leaves_no_stale_lock() {
    let runs = tempfile::tempdir().unwrap();
    let run = runs.path().join("locked");
    let bin = env!("CARGO_BIN_EXE_train");
    let mut first = Command::new(bin)
        .args(common::cli_args(runs.path(), "locked", 200, &["--epochs", "200"]))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The first epoch committed: the lock is held and there is a checkpoint to read.
    common::wait_for("the first checkpoint", || run.join("latest.json").is_file());
    let pid = first.id().to_string();
    assert_eq!(std::fs::read_to_string(run.join("train.lock")).unwrap().trim(), pid);
    let second = Command::new(bin)
        .args(common::cli_args(
            runs.path(),
            "locked",
            200,
            &["--epochs", "200", "--resume"],
        ))
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
        .args(common::cli_args(
            runs.path(),
            "locked",
            200,
            &["--epochs", "200", "--resume", "--stop-after", "1"],
        ))
        .output()
        .unwrap();
    assert!(resumed.status.success(), "{}", String::from_utf8_lossy(&resumed.stderr));
}
