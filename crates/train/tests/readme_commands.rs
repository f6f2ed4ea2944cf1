//! Every `cargo run --release -p train -- …` line of the README's ```` ```sh ```` blocks, run as
//! written through bash against the built binary, with small sizes appended: a README example
//! that errors fails this test, so the README cannot drift from the program. The commands run in
//! the README's order in one scratch directory (so `--resume`, `eval` and `explain` find the runs
//! the lines before them trained); the few that cannot run here are skipped, each for a reason
//! listed below and printed.

use std::path::PathBuf;

use dml_testkit::readme::{Mapping, SKIP_CARGO_BENCH, SKIP_CARGO_TEST, Skip, Substitution, run_readme};

/// Appended to every training and `config` command: one epoch of one batch on a small synthetic
/// set (300 images of 32², at 24²), so that the two dozen runs take seconds each.
const SMALL: &[&str] = &[
    "--set",
    "train.epochs=1",
    "--set",
    "train.samples_per_epoch=40",
    "--set",
    "data.synth_images=300",
    "--set",
    "data.synth_size=32",
    "--set",
    "data.image_size=24",
    "--set",
    "eval.batch_size=100",
];

/// Commands that need what this machine cannot have, or that are not examples of `train`.
const SKIPS: &[Skip] = &[
    Skip {
        pattern: "*model.pretrained=*",
        reason: "needs pretrained weights under weights/, downloaded by `cargo xtask fetch-weights`",
    },
    Skip {
        pattern: "cargo xtask*",
        reason: "an xtask command: xtask/tests/readme_commands.rs runs these",
    },
    SKIP_CARGO_TEST,
    SKIP_CARGO_BENCH,
];

/// Changes to the README's text before it runs, each for the reason given.
const SUBSTITUTIONS: &[Substitution] = &[
    Substitution {
        from: "for seed in 0 1 2;",
        to: "for seed in 0;",
        why: "one seed of each three-seed reproduction loop",
    },
    Substitution {
        from: "for data in synth fashion-mnist;",
        to: "for data in synth;",
        why: "Fashion-MNIST's 35,000 test images are embedded at every evaluation; the Fashion-MNIST \
              example of the Train section runs that path once",
    },
    Substitution {
        from: "runs/avsl/fashion-mnist-true-s0",
        to: "runs/avsl/synth-true-s0",
        why: "the AVSL loop above runs on the synthetic set only",
    },
    Substitution {
        from: "synth-n4000-s64",
        to: "synth-n300-s32",
        why: "the small synthetic set of SMALL",
    },
    Substitution {
        from: "--triplets 100",
        to: "--triplets 4",
        why: "fewer triplets",
    },
    Substitution {
        from: "--images 200",
        to: "--images 4 --samples 2",
        why: "fewer images and SmoothGrad samples",
    },
];

#[test]
fn every_readme_command_runs_as_written() {
    let cwd = tempfile::tempdir().unwrap();
    // The datasets persist between test runs (Fashion-MNIST's preparation is the slow part), in the
    // directory cargo keeps for integration tests' scratch files; `data/` is where the README's
    // paths point.
    let data = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("readme-data");
    std::fs::create_dir_all(&data).unwrap();
    std::os::unix::fs::symlink(&data, cwd.path().join("data")).unwrap();
    // The README's `--config my.toml` example reads a file of the user's.
    std::fs::write(cwd.path().join("my.toml"), "[optimizer]\nlr_head = 2e-3\n").unwrap();
    let mapping = Mapping {
        prefix: ["run", "--release", "-p", "train"].map(String::from).to_vec(),
        binary: env!("CARGO_BIN_EXE_train").into(),
        extra: SMALL.iter().map(|s| s.to_string()).collect(),
        no_extra_for: ["eval", "explain", "analyze", "config"].map(String::from).to_vec(),
    };
    let readme = dml_testkit::workspace_root().join("README.md");
    let report = run_readme(&readme, cwd.path(), &[mapping], SKIPS, SUBSTITUTIONS);
    assert!(report.ran.len() >= 20, "only {} commands ran", report.ran.len());

    // The first run says which loss and miner it trains with, and how long it took.
    let default = &report.ran[0];
    assert!(
        default.stdout.contains("loss margin (") && default.stdout.contains("miner distance_weighted ("),
        "{}",
        default.stdout
    );
    assert!(default.stdout.contains("wall time: "), "{}", default.stdout);
    // `config --loss multi_similarity` shows the loss's own miner, not the default run's.
    let config = report
        .runs_with("config --loss multi_similarity")
        .next()
        .expect("the config example");
    let shown: toml::Table = config.stdout.parse().unwrap();
    assert_eq!(
        shown["miner"]["name"].as_str(),
        Some("multi_similarity"),
        "{}",
        config.stdout
    );
    // `eval --checkpoint best` of a run without a val split says that it used the latest, and
    // where it wrote the embeddings.
    let eval = report
        .runs_with("--checkpoint best --export-embeddings out/")
        .next()
        .expect("the eval example");
    assert!(
        eval.stderr.contains("no best.json") && eval.stderr.contains("using the latest"),
        "{}",
        eval.stderr
    );
    assert!(eval.stdout.contains("wrote out/embeddings.npy"), "{}", eval.stdout);
    assert!(cwd.path().join("out/labels.npy").is_file());
    // The val example keeps a best checkpoint.
    assert!(cwd.path().join("runs/with-val/best.json").is_file());
    // A CPU run never probes for a GPU: no Vulkan loader noise, on resume or otherwise.
    for ran in &report.ran {
        assert!(!ran.stderr.contains("XDG_RUNTIME_DIR"), "{}:\n{}", ran.line, ran.stderr);
    }
}
