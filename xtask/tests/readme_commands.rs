//! Every `cargo xtask …` line of the README's ```` ```sh ```` blocks, run as written through bash
//! against the built binary (the `train` lines are `crates/train/tests/readme_commands.rs`'s):
//! an example that errors fails this test. The few that cannot run here are skipped, each for a
//! reason listed below and printed.

use dml_testkit::readme::{Mapping, SKIP_CARGO_BENCH, SKIP_CARGO_TEST, Skip, Substitution, run_readme};

const SKIPS: &[Skip] = &[
    Skip {
        pattern: "cargo run --release -p train*",
        reason: "a train command: crates/train/tests/readme_commands.rs runs these",
    },
    Skip {
        pattern: "cargo xtask fetch-weights*",
        reason: "downloads weights from the network",
    },
    Skip {
        pattern: "cargo xtask prepare cub200*|cargo xtask prepare cars196*|cargo xtask prepare sop*|cargo xtask prepare inshop*",
        reason: "needs the data set's official archive, which cannot be downloaded here",
    },
    Skip {
        pattern: "cargo xtask prepare fashion-mnist*",
        reason: "writes all 70,000 images; tests/tests/fashion_mnist.rs runs this command (with --out)",
    },
    SKIP_CARGO_TEST,
    SKIP_CARGO_BENCH,
];

const SUBSTITUTIONS: &[Substitution] = &[
    Substitution {
        from: "synth --n 2000",
        to: "synth --n 100",
        why: "a smaller synthetic set",
    },
    Substitution {
        from: "data/mine/manifest.csv",
        to: "data/synth/manifest.csv",
        why: "the manifest \"you assembled yourself\" is the user's; the synthetic set of the line above stands in",
    },
];

#[test]
fn every_readme_xtask_command_runs_as_written() {
    let cwd = tempfile_dir();
    let mapping = Mapping {
        prefix: vec!["xtask".into()],
        binary: env!("CARGO_BIN_EXE_xtask").into(),
        extra: Vec::new(),
        no_extra_for: Vec::new(),
    };
    let readme = dml_testkit::workspace_root().join("README.md");
    let report = run_readme(&readme, &cwd, &[mapping], SKIPS, SUBSTITUTIONS);
    let lines: Vec<&str> = report.ran.iter().map(|r| r.line.as_str()).collect();
    assert!(lines.iter().any(|l| l.starts_with("cargo xtask synth")), "{lines:?}");
    assert!(lines.iter().any(|l| l.starts_with("cargo xtask check")), "{lines:?}");
    assert!(cwd.join("data/synth/manifest.csv").is_file());
    let _ = std::fs::remove_dir_all(&cwd);
}

/// A fresh scratch directory (xtask's tests have no tempfile dependency).
fn tempfile_dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("xtask-readme-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
