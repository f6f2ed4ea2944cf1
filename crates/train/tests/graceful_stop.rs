//! Ctrl-C through the real binary: the first SIGINT stops a run after its step with a checkpoint
//! and exit status 130, and `--resume` then trains to exactly the metrics (and the same final
//! checkpoint) of a run that was never stopped; a second signal exits at once, leaving the last
//! committed checkpoint to resume from.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// A quiet 3-epoch run `name` of 60 steps an epoch.
fn args(runs: &Path, name: &str, extra: &[&str]) -> Vec<String> {
    let mut extra_all = vec!["--epochs", "3"];
    extra_all.extend_from_slice(extra);
    common::cli_args(runs, name, 1200, &extra_all)
}

fn signal(pid: u32) {
    // SAFETY: kill(2) of a child this test spawned.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGINT) }, 0);
}

#[test]
fn a_stopped_run_resumes_to_the_metrics_of_an_unstopped_one() {
    let runs = tempfile::tempdir().unwrap();
    let bin = env!("CARGO_BIN_EXE_train");
    let whole = Command::new(bin)
        .args(args(runs.path(), "whole", &[]))
        .output()
        .unwrap();
    assert!(whole.status.success(), "{}", String::from_utf8_lossy(&whole.stderr));

    let run = runs.path().join("stopped");
    let child = Command::new(bin)
        .args(args(runs.path(), "stopped", &[]))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Inside the first epoch: the epoch-0 evaluation is recorded, no checkpoint yet.
    common::wait_for("the first epoch", || run.join("metrics.jsonl").is_file());
    std::thread::sleep(Duration::from_millis(300));
    signal(child.id());
    let out = child.wait_with_output().unwrap();
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{e}");
    assert!(
        e.contains("continue with --resume") && e.contains("resume with: train --resume --name stopped"),
        "{e}"
    );
    let stopped_at: Vec<String> = std::fs::read_dir(run.join("checkpoints"))
        .unwrap()
        .map(|d| d.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    eprintln!("stopped at {stopped_at:?}");
    let resumed = Command::new(bin)
        .args(args(runs.path(), "stopped", &["--resume"]))
        .output()
        .unwrap();
    assert!(resumed.status.success(), "{}", String::from_utf8_lossy(&resumed.stderr));
    assert_eq!(
        common::records(&run),
        common::records(&runs.path().join("whole")),
        "stopped at {stopped_at:?}"
    );
    // The final models embed three images to the same bytes.
    let embed = |r: &Path| {
        let out = r.join("e.npy");
        let mut a = vec![
            "embed".to_string(),
            "--run".into(),
            r.display().to_string(),
            "--checkpoint".into(),
        ];
        a.extend(["latest".into(), "--out".into(), out.display().to_string()]);
        a.extend((0..3).map(|i| {
            common::data_root()
                .join(format!("synth-n300-s32/images/{i:06}.png"))
                .display()
                .to_string()
        }));
        let o = Command::new(bin).args(&a).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        std::fs::read(out).unwrap()
    };
    assert_eq!(
        embed(&run),
        embed(&runs.path().join("whole")),
        "the final models differ"
    );

    // Two signals: out at once; the run resumes from its last committed checkpoint.
    let run = runs.path().join("twice");
    let child = Command::new(bin)
        .args(args(runs.path(), "twice", &[]))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    common::wait_for("the first checkpoint", || run.join("latest.json").is_file());
    signal(child.id());
    signal(child.id());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130));
    let resumed = Command::new(bin)
        .args(args(runs.path(), "twice", &["--resume"]))
        .output()
        .unwrap();
    assert!(resumed.status.success(), "{}", String::from_utf8_lossy(&resumed.stderr));
    assert_eq!(common::records(&run), common::records(&runs.path().join("whole")));
}
