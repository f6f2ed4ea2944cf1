//! `train analyze` through the real binary on two tiny runs (margin and contrastive) and a copy of
//! the first: every file is written; a model compared with its own copy has r = 1 and JSD = 0;
//! NR-Precision is reported for every property column, the class far beyond chance; groups get a
//! Mann–Whitney line; bad input is an error naming it.

mod common;

use std::path::Path;
use std::process::Command;

use dml_train::Silent;
use dml_train::{RunOptions, train};

#[test]
fn analyze_two_losses_and_a_copy() {
    let runs = tempfile::tempdir().unwrap();
    let mut dirs = Vec::new();
    for (name, loss) in [
        ("margin", "loss.name=\"margin\""),
        ("contrastive", "loss.name=\"contrastive\""),
    ] {
        let config = common::tiny_config(
            runs.path(),
            name,
            &[loss, "miner=none", "train.epochs=1", "train.samples_per_epoch=100"],
        );
        dirs.push(train(&config, &RunOptions::default(), &Silent).unwrap().run_dir);
    }
    let copy = runs.path().join("margin_copy");
    common::copy_dir(&dirs[0], &copy);
    // The copied pointer files name the original's checkpoint directory, which holds the same weights.
    dirs.push(copy);
    let out = runs.path().join("analysis");
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let mut args = vec!["analyze".to_string(), "--quiet".into()];
    args.extend(dirs.iter().map(|d| s(d)));
    args.extend(
        [
            "--images",
            "4",
            "--samples",
            "3",
            "--group",
            "a=margin,margin_copy",
            "--group",
            "b=contrastive",
            "--out",
        ]
        .iter()
        .map(|x| x.to_string()),
    );
    args.push(s(&out));
    let o = Command::new(env!("CARGO_BIN_EXE_train")).args(&args).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for f in [
        "report.md",
        "analysis.json",
        "saliency_pairs.csv",
        "nr_precision.csv",
        "saliency_correlation.png",
        "saliency_grid.png",
    ] {
        assert!(out.join(f).is_file(), "{f} missing");
    }
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("analysis.json")).unwrap()).unwrap();
    let pairs = report["pairs"].as_array().unwrap();
    assert_eq!(pairs.len(), 3);
    let same = pairs
        .iter()
        .find(|p| p["a"] == "margin" && p["b"] == "margin_copy")
        .expect("the copy's pair");
    assert!((same["mean_r"].as_f64().unwrap() - 1.0).abs() < 1e-9, "{same}");
    assert!(same["jsd_nats"].as_f64().unwrap().abs() < 1e-9, "{same}");
    let other = pairs.iter().find(|p| p["b"] == "contrastive").unwrap();
    assert!(other["mean_r"].as_f64().unwrap() < 0.999, "{other}");
    let nr = report["nr_precision"].as_array().unwrap();
    // The class first, then every manifest property column, the invisible control among them.
    for property in ["class", "rotation", "control"] {
        let row = nr
            .iter()
            .find(|r| r["model"] == "margin" && r["property"] == property)
            .unwrap_or_else(|| panic!("no {property} row"));
        assert!(row["nr_precision"].as_f64().unwrap().is_finite(), "{row}");
    }
    assert!(!report["group_tests"].as_array().unwrap().is_empty());
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        md.contains("Table 2") && md.contains("Table 6") && md.contains("Mann–Whitney"),
        "{md}"
    );

    // Bad input names what is wrong.
    let o = Command::new(env!("CARGO_BIN_EXE_train"))
        .args([
            "analyze",
            &s(&dirs[0]),
            &s(&dirs[1]),
            "--group",
            "x=nope",
            "--out",
            &s(&out),
        ])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("\"nope\""));
}
