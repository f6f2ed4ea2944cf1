//! Every `cargo run --release -p train -- …` line of the ```` ```sh ```` blocks of the README and
//! of every page under `docs/`, run as written through bash against the built binary, with small
//! sizes appended: an example that errors fails its page's test, so the pages cannot drift from
//! the program. Each page runs in a scratch directory of its own, in its own order (so `--resume`,
//! `eval` and `explain` find the runs that the page's earlier lines trained: a page that needs a
//! trained run trains it itself). The few commands that cannot run here are skipped, each for a
//! reason listed below and printed; the `cargo xtask` lines are `xtask/tests/docs_commands.rs`'s.
//! Every page with an `sh` block has a test here, which
//! `every_page_with_sh_blocks_has_a_test` checks against the files.

use std::path::PathBuf;

use dml_testkit::readme::{
    Mapping, Report, SKIP_CARGO_BENCH, SKIP_CARGO_TEST, Skip, Substitution, assert_pages_tested, pages_with_sh_blocks,
    run_page,
};

/// Appended to every training and `config` command: one epoch of one batch on a small synthetic
/// set (300 images of 32², at 24²), so that each run takes seconds.
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

const SKIP_PRETRAINED: Skip = Skip {
    pattern: "*model.pretrained=*",
    reason: "needs pretrained weights under weights/, downloaded by `cargo xtask fetch-weights`",
};

const SKIP_XTASK: Skip = Skip {
    pattern: "cargo xtask*",
    reason: "an xtask command: xtask/tests/docs_commands.rs runs these",
};

const ONE_SEED: Substitution = Substitution {
    from: "for seed in 0 1 2;",
    to: "for seed in 0;",
    why: "one seed of each three-seed reproduction loop",
};

const SMALL_SET: Substitution = Substitution {
    from: "synth-n4000-s64",
    to: "synth-n300-s32",
    why: "the small synthetic set of SMALL",
};

/// Appended after [`SMALL`] on the parts set's page, overriding two of its settings: the parts
/// set needs 256 images (two per class) of at least 48² (so the parts stay visible).
const SMALL_PARTS: &[&str] = &["--set", "data.synth_images=256", "--set", "data.synth_size=48"];

/// What a page's test skips and changes before its blocks run, and what it appends to every
/// training command after [`SMALL`].
struct Spec {
    skips: &'static [Skip],
    substitutions: &'static [Substitution],
    extra: &'static [&'static str],
}

/// The skip rules and substitutions of each page: each must match something in its page.
fn spec(page: &str) -> Spec {
    match page {
        "README.md" => Spec {
            skips: &[SKIP_CARGO_TEST],
            substitutions: &[],
            extra: &[],
        },
        "docs/training.md" => Spec {
            skips: &[SKIP_PRETRAINED, SKIP_XTASK, SKIP_CARGO_BENCH],
            substitutions: &[
                ONE_SEED,
                Substitution {
                    from: "for data in synth fashion-mnist;",
                    to: "for data in synth;",
                    why: "Fashion-MNIST's 35,000 test images are embedded at every evaluation; the \
                          Fashion-MNIST example of the configuration section runs that path once",
                },
                Substitution {
                    from: "runs/avsl/fashion-mnist-true-s0",
                    to: "runs/avsl/synth-true-s0",
                    why: "the AVSL loop above runs on the synthetic set only",
                },
            ],
            extra: &[],
        },
        "docs/explaining.md" => Spec {
            skips: &[],
            substitutions: &[
                SMALL_SET,
                Substitution {
                    from: "--triplets 100",
                    to: "--triplets 4",
                    why: "fewer triplets",
                },
                Substitution {
                    from: "--pairs 100",
                    to: "--pairs 2 --randomisation-pairs 1 --samples 4",
                    why: "fewer pairs, cascade pairs and SmoothGrad samples",
                },
            ],
            extra: &[],
        },
        "docs/analysis.md" => Spec {
            skips: &[],
            substitutions: &[Substitution {
                from: "--images 200",
                to: "--images 4 --samples 2",
                why: "fewer images and SmoothGrad samples",
            }],
            extra: &[],
        },
        "docs/datasets.md" => Spec {
            skips: &[SKIP_XTASK],
            substitutions: &[],
            extra: &[],
        },
        "docs/benchmarks.md" => Spec {
            skips: &[SKIP_XTASK, SKIP_CARGO_BENCH],
            substitutions: &[],
            extra: &[],
        },
        "docs/testing.md" => Spec {
            skips: &[SKIP_CARGO_TEST],
            substitutions: &[],
            extra: &[],
        },
        "docs/synth-parts.md" => Spec {
            skips: &[SKIP_XTASK],
            substitutions: &[
                ONE_SEED,
                Substitution {
                    from: "for s in 0 1 2;",
                    to: "for s in 0 1;",
                    why: "two seeds of the baseline, whose runs the analysis at the end compares",
                },
                Substitution {
                    from: "--images 200",
                    to: "--images 4 --samples 2",
                    why: "fewer images and SmoothGrad samples",
                },
                Substitution {
                    from: "--pairs 100",
                    to: "--pairs 2 --randomisation-pairs 1 --samples 4",
                    why: "fewer pairs, cascade pairs and SmoothGrad samples",
                },
            ],
            extra: SMALL_PARTS,
        },
        "docs/pytorch.md" => Spec {
            skips: &[],
            substitutions: &[
                SMALL_SET,
                Substitution {
                    from: "--pairs 100",
                    to: "--pairs 2 --randomisation-pairs 1 --samples 4",
                    why: "fewer pairs, cascade pairs and SmoothGrad samples",
                },
            ],
            extra: &[],
        },
        other => panic!("{other} has no entry in spec()"),
    }
}

dml_testkit::page_tests! {
    run;
    readme: "README.md" => check_readme,
    training: "docs/training.md" => check_training,
    explaining: "docs/explaining.md" => check_explaining,
    analysis: "docs/analysis.md" => check_analysis,
    datasets: "docs/datasets.md" => check_nothing_ran,
    benchmarks: "docs/benchmarks.md" => check_nothing_ran,
    testing: "docs/testing.md" => check_nothing_ran,
    synth_parts: "docs/synth-parts.md" => check_synth_parts,
    pytorch: "docs/pytorch.md" => check_pytorch,
}

/// A page's run: what ran, and the scratch directory it ran in (kept until the checks end).
struct Run {
    report: Report,
    dir: tempfile::TempDir,
}

impl Run {
    fn path(&self, relative: &str) -> PathBuf {
        self.dir.path().join(relative)
    }
}

/// Runs `page`'s blocks in a fresh scratch directory. Its `data/` persists between test runs
/// (Fashion-MNIST's preparation is the slow part) in the directory cargo keeps for integration
/// tests' scratch files, one per page, so that pages running at once never share a data set
/// being generated.
fn run(page: &str) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let data = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("docs-data")
        .join(page.replace(['/', '.'], "-"));
    std::fs::create_dir_all(&data).unwrap();
    std::os::unix::fs::symlink(&data, dir.path().join("data")).unwrap();
    // Recipes such as `--config assets/configs/synth-parts.toml` are read from the repository.
    std::os::unix::fs::symlink(dml_testkit::workspace_root().join("assets"), dir.path().join("assets")).unwrap();
    // docs/pytorch.md imports the files a PyTorch user saved: the shared PML case's (CI has it).
    let case = dml_testkit::workspace_root().join("../shared/reference/import/pml_resnet18_linear");
    for file in ["trunk.pth", "embedder.pth"] {
        if case.join(file).is_file() {
            std::os::unix::fs::symlink(case.join(file), dir.path().join(file)).unwrap();
        }
    }
    // The `--config my.toml` example of docs/training.md reads a file of the user's.
    std::fs::write(dir.path().join("my.toml"), "[optimizer]\nlr_head = 2e-3\n").unwrap();
    let spec = spec(page);
    let mapping = Mapping {
        prefix: ["run", "--release", "-p", "train"].map(String::from).to_vec(),
        binary: env!("CARGO_BIN_EXE_train").into(),
        extra: SMALL.iter().chain(spec.extra).map(|s| s.to_string()).collect(),
        no_extra_for: ["eval", "explain", "analyze", "config", "embed", "export", "check"]
            .map(String::from)
            .to_vec(),
    };
    let path = dml_testkit::workspace_root().join(page);
    let report = run_page(&path, dir.path(), &[mapping], spec.skips, spec.substitutions);
    // A CPU run never probes for a GPU: no Vulkan loader noise, on resume or otherwise.
    for ran in &report.ran {
        assert!(!ran.stderr.contains("XDG_RUNTIME_DIR"), "{}:\n{}", ran.line, ran.stderr);
    }
    Run { report, dir }
}

#[test]
fn every_page_with_sh_blocks_has_a_test() {
    let on_disk = pages_with_sh_blocks(&dml_testkit::workspace_root());
    assert_pages_tested(PAGES, &on_disk, "```sh blocks");
}

/// The README's one training command says which loss and miner it trains with, and how long it
/// took.
fn check_readme(run: &Run) {
    assert_eq!(run.report.ran.len(), 1, "{:?}", lines(run));
    let default = &run.report.ran[0];
    assert!(
        default.stdout.contains("loss margin (") && default.stdout.contains("miner distance_weighted ("),
        "{}",
        default.stdout
    );
    assert!(default.stdout.contains("wall time: "), "{}", default.stdout);
}

fn check_training(run: &Run) {
    let report = &run.report;
    assert!(report.ran.len() >= 18, "only {} commands ran", report.ran.len());
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
    assert!(run.path("out/labels.npy").is_file());
    // The val example keeps a best checkpoint.
    assert!(run.path("runs/with-val/best.json").is_file());
    // The reproduction loops trained what they name.
    for dir in [
        "runs/ppgml/synth-gml_pa-s0",
        "runs/simmine/synth-true-s0",
        "runs/avsl/synth-true-s0",
    ] {
        assert!(run.path(dir).join("latest.json").is_file(), "{dir}");
    }
}

/// The page trains the runs it explains, and every explanation writes its files.
fn check_explaining(run: &Run) {
    for file in [
        "out/attention/attention.png",
        "out/attention/attention.json",
        "out/pair/attention.png",
        "runs/default/explain/report/report.html",
        "runs/default/explain/query-report/report.html",
        "out/avsl/avsl.json",
        "out/avsl/avsl_summary.png",
        "out/benchmark/benchmark.md",
        "out/benchmark/benchmark.json",
        "out/benchmark/benchmark.png",
    ] {
        assert!(run.path(file).is_file(), "{file} missing after {:?}", lines(run));
    }
    assert!(
        run.report.runs_with("explain faithfulness").next().is_some(),
        "{:?}",
        lines(run)
    );
    assert!(run.path("out/faithfulness").is_dir());
}

fn check_analysis(run: &Run) {
    assert_eq!(run.report.ran.len(), 9, "eight runs and the analysis: {:?}", lines(run));
    assert!(run.path("out/analysis/report.md").is_file());
}

/// Pages whose commands are all another test's or not examples of use: each line was skipped
/// for its reason, and none ran.
fn check_nothing_ran(run: &Run) {
    assert!(run.report.ran.is_empty(), "{:?}", lines(run));
    assert!(!run.report.skipped.is_empty());
}

/// The parts page's loops train and evaluate on the parts set (one seed each here).
fn check_synth_parts(run: &Run) {
    assert!(run.report.ran.len() >= 10, "{:?}", lines(run));
    assert!(run.path("data/synth-parts-n256-s48/manifest.csv").is_file());
    let bench = std::fs::read_to_string(run.path("out/benchmark-parts-s0/benchmark.md")).unwrap();
    // The parts set's runs have the part-level columns, and the AVSL run its AVSL row.
    assert!(
        bench.contains("| avsl |") && !bench.contains("need the parts set"),
        "{bench}"
    );
}

/// The PyTorch page imports the shared PML model, embeds, explains, benchmarks and exports it.
fn check_pytorch(run: &Run) {
    for file in [
        "runs/pml/config.toml",
        "out/pml-test.npy",
        "out/pml-test.labels.npy",
        "runs/pml/explain/report/report.html",
        "out/pml-benchmark/benchmark.md",
        "out/pml-export/trunk.safetensors",
        "out/pml-export/embedder.safetensors",
    ] {
        assert!(run.path(file).is_file(), "{file} missing after {:?}", lines(run));
    }
}

fn lines(run: &Run) -> Vec<&str> {
    run.report.ran.iter().map(|r| r.line.as_str()).collect()
}
