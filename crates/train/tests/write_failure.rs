//! A checkpoint that cannot be written loses nothing, through the real binary: with a file-size
//! limit below its largest file (as a full disk would refuse it), the run stops with an error
//! naming the file and the cause, `latest.json` still names the checkpoint before, no temporary
//! folder is left, and `--resume` without the limit continues to the metrics of an uninterrupted
//! run. (A file-size limit, not permissions: the tests may run as root, whom permissions do not
//! stop.)

mod common;

use std::process::Command;

#[test]
fn a_checkpoint_that_cannot_be_written_loses_nothing() {
    let runs = tempfile::tempdir().unwrap();
    let bin = env!("CARGO_BIN_EXE_train");
    let ok = |a: Vec<String>| {
        let o = Command::new(bin).args(a).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    ok(common::cli_args(runs.path(), "whole", 100, &["--epochs", "2"]));
    ok(common::cli_args(
        runs.path(),
        "full",
        100,
        &["--epochs", "2", "--stop-after", "1"],
    ));
    let run = runs.path().join("full");
    let first = run.join("checkpoints/epoch-0001");
    let largest = std::fs::read_dir(&first)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .max()
        .unwrap();
    // bash's ulimit -f counts 1024-byte blocks; an ignored SIGXFSZ makes an oversized write fail
    // with EFBIG instead of killing the process.
    let blocks = largest / 1024 - 1;
    let mut limited = Command::new("bash");
    limited
        .arg("-c")
        .arg(format!("trap '' XFSZ; ulimit -f {blocks}; exec \"$0\" \"$@\""))
        .arg(bin)
        .args(common::cli_args(
            runs.path(),
            "full",
            100,
            &["--epochs", "2", "--resume"],
        ));
    let o = limited.output().unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "the limited run succeeded ({blocks} blocks): {e}");
    assert!(e.contains("checkpoints") && e.contains("File too large"), "{e}");
    let latest = std::fs::read_to_string(run.join("latest.json")).unwrap();
    assert!(latest.contains("checkpoints/epoch-0001"), "{latest}");
    let left: Vec<String> = std::fs::read_dir(run.join("checkpoints"))
        .unwrap()
        .map(|d| d.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, ["epoch-0001"], "a temporary checkpoint was left behind");
    ok(common::cli_args(
        runs.path(),
        "full",
        100,
        &["--epochs", "2", "--resume"],
    ));
    assert_eq!(common::records(&run), common::records(&runs.path().join("whole")));
}
