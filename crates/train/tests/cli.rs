//! The `train` binary says what it does: `--help` lists every device form, `config` refuses the
//! options that only training has, and a configuration whose batches the training split cannot
//! fill fails before any work, naming the keys to change.

mod common;

use std::process::{Command, Output};

fn train_cli(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_train")).args(args).output().unwrap()
}

#[test]
fn help_lists_every_device_form_and_the_miner_flag() {
    let o = train_cli(&["--help"]);
    let help = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success());
    for form in [
        "wgpu:cpu",
        "wgpu:discrete[:N]",
        "cuda[:N]",
        "--miner",
        "--features cuda",
    ] {
        assert!(help.contains(form), "{form} missing from --help:\n{help}");
    }
}

#[test]
fn config_refuses_options_that_only_training_has() {
    for flag in ["--resume", "--quiet", "--stop-after=1"] {
        let o = train_cli(&["config", flag]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "config {flag} was accepted");
        let name = flag.split('=').next().unwrap();
        assert!(err.contains(name), "{err}");
    }
    let o = train_cli(&["config", "--loss", "proxy_anchor"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let shown: toml::Table = String::from_utf8_lossy(&o.stdout).parse().unwrap();
    assert_eq!(shown["loss"]["name"].as_str(), Some("proxy_anchor"));
    assert!(!shown.contains_key("miner"), "Proxy-Anchor brings no miner");
}

#[test]
fn too_few_training_classes_fail_before_any_work_naming_the_keys() {
    let runs = tempfile::tempdir().unwrap();
    let root = format!("data.root={}", common::toml_string(common::data_root()));
    let o = train_cli(&[
        "--run-dir",
        runs.path().to_str().unwrap(),
        "--set",
        "data.synth_images=300",
        "--set",
        "data.synth_size=32",
        "--set",
        &root,
        "--set",
        "data.val_classes=2",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("train.batch_size = 40 with train.m = 8 draws 5 classes")
            && err.contains("has 3 classes after data.val_classes = 2")
            && err.contains("--batch-size 24"),
        "{err}"
    );
    assert!(!runs.path().join("default").exists(), "nothing may be written");
}

#[test]
fn a_bad_winograd_switch_is_reported_once_by_the_program() {
    let run = |value: &str| {
        Command::new(env!("CARGO_BIN_EXE_train"))
            .args(["config"])
            .env("DML_WINOGRAD", value)
            .output()
            .unwrap()
    };
    let o = run("sometimes");
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.matches("warning: DML_WINOGRAD=\"sometimes\"").count(), 1, "{err}");
    assert!(err.contains("stay on"), "{err}");
    let o = run("f4");
    assert!(!String::from_utf8_lossy(&o.stderr).contains("warning"));
}

/// A misspelt dataset name gets the nearest one; `--version` answers; `--loss` lists the losses.
#[test]
fn a_misspelt_dataset_gets_the_nearest_name_and_version_answers() {
    let runs = tempfile::tempdir().unwrap();
    let o = train_cli(&["--run-dir", runs.path().to_str().unwrap(), "--dataset", "fashion_mnist"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains("did you mean \"fashion-mnist\"?"), "{err}");
    let o = train_cli(&["--version"]);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("train "));
    // --loss names every loss in the help and in its error.
    let help = String::from_utf8_lossy(&train_cli(&["--help"]).stdout).into_owned();
    assert!(
        help.contains("possible values: contrastive") && help.contains("proxy_anchor"),
        "{help}"
    );
    let o = train_cli(&["--loss", "fancy"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("'fancy'") && err.contains("multi_similarity"),
        "{err}"
    );
}
