//! Every `cargo xtask …` line of the ```` ```sh ```` blocks of the README and of the pages under
//! `docs/`, run as written through bash against the built binary (the `train` lines are
//! `crates/train/tests/docs_commands.rs`'s, which also runs every page): an example that errors
//! fails its page's test. Each page runs in a scratch directory of its own. The few commands that
//! cannot run here are skipped, each for a reason listed below and printed. Every page with a
//! `cargo xtask` line has a test here, which `every_page_with_xtask_lines_has_a_test` checks
//! against the files.

use std::path::PathBuf;

use dml_testkit::readme::{
    Mapping, Report, SKIP_CARGO_BENCH, Skip, Substitution, assert_pages_tested, pages_with_sh_blocks, run_page,
    sh_blocks,
};

const SKIP_TRAIN: Skip = Skip {
    pattern: "cargo run --release -p train*",
    reason: "a train command: crates/train/tests/docs_commands.rs runs these",
};

const SKIP_FETCH_WEIGHTS: Skip = Skip {
    pattern: "cargo xtask fetch-weights*",
    reason: "downloads weights from the network",
};

/// What a page's test skips and changes before its blocks run.
struct Spec {
    skips: &'static [Skip],
    substitutions: &'static [Substitution],
}

/// The skip rules and substitutions of each page: each must match something in its page.
fn spec(page: &str) -> Spec {
    match page {
        "docs/training.md" => Spec {
            skips: &[SKIP_TRAIN, SKIP_FETCH_WEIGHTS, SKIP_CARGO_BENCH],
            substitutions: &[],
        },
        "docs/datasets.md" => Spec {
            skips: &[
                Skip {
                    pattern: "cargo xtask prepare cub200*|cargo xtask prepare cars196*|cargo xtask prepare sop*|cargo xtask prepare inshop*",
                    reason: "needs the data set's official archive, which cannot be downloaded here",
                },
                Skip {
                    pattern: "cargo xtask prepare fashion-mnist*",
                    reason: "writes all 70,000 images; tests/tests/fashion_mnist.rs runs this command (with --out)",
                },
            ],
            substitutions: &[
                Substitution {
                    from: "synth --n 2000",
                    to: "synth --n 100",
                    why: "a smaller synthetic set",
                },
                Substitution {
                    from: "synth --parts ",
                    to: "synth --parts --n 256 --size 48 ",
                    why: "a smaller parts set",
                },
                Substitution {
                    from: "data/mine/manifest.csv",
                    to: "data/synth/manifest.csv",
                    why: "the manifest \"you assembled yourself\" is the user's; the synthetic set of the line above stands in",
                },
            ],
        },
        "docs/benchmarks.md" => Spec {
            skips: &[SKIP_CARGO_BENCH],
            substitutions: &[],
        },
        "docs/synth-parts.md" => Spec {
            skips: &[SKIP_TRAIN],
            substitutions: &[Substitution {
                from: "synth --parts ",
                to: "synth --parts --n 256 --size 48 ",
                why: "a smaller parts set",
            }],
        },
        other => panic!("{other} has no entry in spec()"),
    }
}

dml_testkit::page_tests! {
    run;
    training: "docs/training.md" => check_training,
    datasets: "docs/datasets.md" => check_datasets,
    benchmarks: "docs/benchmarks.md" => check_benchmarks,
    synth_parts: "docs/synth-parts.md" => check_synth_parts,
}

/// A page's run: what ran, and its scratch directory (removed when the run is dropped).
struct Run {
    report: Report,
    dir: PathBuf,
}

impl Drop for Run {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs `page`'s `cargo xtask` lines in a fresh scratch directory.
fn run(page: &str) -> Run {
    let dir = scratch_dir(page);
    let mapping = Mapping {
        prefix: vec!["xtask".into()],
        binary: env!("CARGO_BIN_EXE_xtask").into(),
        extra: Vec::new(),
        no_extra_for: Vec::new(),
    };
    let spec = spec(page);
    let path = dml_testkit::workspace_root().join(page);
    let report = run_page(&path, &dir, &[mapping], spec.skips, spec.substitutions);
    Run { report, dir }
}

#[test]
fn every_page_with_xtask_lines_has_a_test() {
    let root = dml_testkit::workspace_root();
    let with_xtask: Vec<String> = pages_with_sh_blocks(&root)
        .into_iter()
        .filter(|page| {
            let text = std::fs::read_to_string(root.join(page)).unwrap();
            sh_blocks(&text).iter().any(|block| block.contains("cargo xtask"))
        })
        .collect();
    assert_pages_tested(PAGES, &with_xtask, "`cargo xtask` in their ```sh blocks");
}

/// The only xtask line of the page downloads weights, and is skipped for that reason.
fn check_training(Run { report, .. }: &Run) {
    assert!(report.ran.is_empty(), "{:?}", lines(report));
    assert!(
        report
            .skipped
            .iter()
            .any(|(line, _)| line.starts_with("cargo xtask fetch-weights")),
        "{:?}",
        report.skipped
    );
}

fn check_datasets(Run { report, dir }: &Run) {
    let lines = lines(report);
    assert!(lines.iter().any(|l| l.starts_with("cargo xtask synth")), "{lines:?}");
    assert!(lines.iter().any(|l| l.starts_with("cargo xtask check")), "{lines:?}");
    assert!(dir.join("data/synth/manifest.csv").is_file());
    assert!(dir.join("data/synth-parts/manifest.csv").is_file());
}

/// The set, two counterfactual renders and the figure are written.
fn check_synth_parts(Run { report, dir }: &Run) {
    assert_eq!(report.ran.len(), 4, "{:?}", lines(report));
    assert!(dir.join("data/synth-parts/manifest.csv").is_file());
    for file in ["out/17-no-crest.png", "out/17-ring-tail.png", "out/synth_parts.png"] {
        image::open(dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
    }
}

/// `cargo xtask bench --list` runs and names the benches; the timing forms are skipped.
fn check_benchmarks(Run { report, .. }: &Run) {
    let list = report
        .runs_with("cargo xtask bench --list")
        .next()
        .expect("bench --list ran");
    assert!(list.stdout.contains("throughput"), "{}", list.stdout);
    assert_eq!(report.ran.len(), 1, "{:?}", lines(report));
}

fn lines(report: &Report) -> Vec<&str> {
    report.ran.iter().map(|r| r.line.as_str()).collect()
}

/// A fresh scratch directory per page (xtask's tests have no tempfile dependency).
fn scratch_dir(page: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "xtask-docs-{}-{}",
        std::process::id(),
        page.replace(['/', '.'], "-")
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
