//! `--resume` through the real binary continues a run as it was configured: a 3-epoch run
//! stopped after one epoch and resumed with no other argument than its name trains to epoch 3
//! and leaves `config.toml` byte-identical; a changed setting is refused with `key: saved →
//! given`; more epochs are allowed and recorded.

mod common;

use std::process::{Command, Output};

fn train_cli(args: &[String]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_train")).args(args).output().unwrap()
}

fn epochs_done(run: &std::path::Path) -> usize {
    std::fs::read_to_string(run.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .count()
        - 1
}

#[test]
fn resume_continues_the_run_as_configured_and_never_rewrites_it() {
    let runs = tempfile::tempdir().unwrap();
    let base: Vec<String> = vec![
        "--quiet".into(),
        "--name".into(),
        "r1".into(),
        "--run-dir".into(),
        runs.path().to_str().unwrap().into(),
    ];
    let first = common::cli_args(runs.path(), "r1", 40, &["--epochs", "3", "--stop-after", "1"]);
    let o = train_cli(&first);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // The run says what it trains with and how long it took.
    let out = String::from_utf8_lossy(&o.stdout);
    let said = out.lines().find(|l| l.starts_with("loss ")).unwrap_or_default();
    for part in [
        "loss margin (",
        "margin = 0.2",
        "miner distance_weighted (",
        "cutoff = 0.5",
        "(the loss's default)",
    ] {
        assert!(said.contains(part), "{part} missing from {said:?}:\n{out}");
    }
    assert!(out.contains("wall time: "), "{out}");
    let run = runs.path().join("r1");
    let saved = std::fs::read(run.join("config.toml")).unwrap();
    assert_eq!(epochs_done(&run), 1);

    // A changed setting is refused, naming the key with both values; nothing is written.
    let mut changed = base.clone();
    changed.extend(["--resume".into(), "--set".into(), "loss.margin=0.5".into()]);
    let o = train_cli(&changed);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(!o.status.success(), "a changed margin must be refused");
    assert!(err.contains("loss.margin: 0.2 → 0.5"), "{err}");
    assert_eq!(std::fs::read(run.join("config.toml")).unwrap(), saved);

    // Resuming by name alone continues to the configured 3 epochs, the file untouched. Loading the
    // optimiser state must not probe for a GPU on a CPU run: without a desktop session (no
    // XDG_RUNTIME_DIR) that probe prints the Vulkan loader's errors.
    let mut resume = base.clone();
    resume.push("--resume".into());
    let o = Command::new(env!("CARGO_BIN_EXE_train"))
        .args(&resume)
        .env_remove("XDG_RUNTIME_DIR")
        .env_remove("BURN_DEVICE")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{err}");
    assert!(!err.contains("XDG_RUNTIME_DIR") && !err.contains("error"), "{err}");
    assert_eq!(epochs_done(&run), 3);
    assert_eq!(std::fs::read(run.join("config.toml")).unwrap(), saved);

    // More epochs are the one allowed change, and the record says so.
    resume.extend(["--epochs".into(), "4".into()]);
    let o = train_cli(&resume);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(epochs_done(&run), 4);
    let text = std::fs::read_to_string(run.join("config.toml")).unwrap();
    let expected = String::from_utf8(saved).unwrap().replace("epochs = 3", "epochs = 4");
    assert_eq!(text, expected);
}
