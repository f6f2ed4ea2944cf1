//! `train explain benchmark` through the real binary, on a run of the tiny shapes set (object
//! masks, no parts) and one of a small parts set (parts and counterfactuals): the three files are
//! written and nothing else; every method and baseline is a row; the numbers obey what their
//! definitions force (a uniform map's ROC AUC is 1/2, the baselines do not change when the model is
//! randomised, a centre prior does not depend on the partner, the trained model's maps do); the
//! part-level metrics exist on the parts set only, with the reason elsewhere; bad input is one
//! error naming it and leaves an earlier output as it was.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use dml_train::Silent;
use dml_train::{RunOptions, train};
use serde_json::Value;

fn explain(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_train"))
        .arg("explain")
        .args(args)
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Every pair's scores of `row`.
fn scores<'a>(run: &'a Value, row: &str) -> Vec<&'a Value> {
    run["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| &p["methods"][row])
        .collect()
}

#[test]
fn benchmark_of_a_shapes_run_and_a_parts_run() {
    let runs = tempfile::tempdir().unwrap();
    let shapes = common::tiny_config(
        runs.path(),
        "shapes",
        &["train.epochs=1", "train.samples_per_epoch=100"],
    );
    let shapes = train(&shapes, &RunOptions::default(), &Silent).unwrap().run_dir;
    let parts = common::tiny_config(
        runs.path(),
        "parts",
        &[
            "data.dataset=\"synth-parts\"",
            "data.synth_images=300",
            "data.synth_size=48",
            "data.image_size=48",
            "data.augment=false",
            "train.epochs=1",
            "train.samples_per_epoch=100",
        ],
    );
    let parts = train(&parts, &RunOptions::default(), &Silent).unwrap().run_dir;
    let out = runs.path().join("bench");
    let o = explain(&[
        "benchmark",
        "--run",
        s(&shapes),
        "--run",
        s(&parts),
        "--pairs",
        "3",
        "--randomisation-pairs",
        "2",
        "--samples",
        "4",
        "--out",
        s(&out),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mut files: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(files, ["benchmark.json", "benchmark.md", "benchmark.png"]);
    let staged: Vec<_> = std::fs::read_dir(runs.path())
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().contains("staging"))
        .collect();
    assert!(staged.is_empty(), "{staged:?}");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(out.join("benchmark.json")).unwrap()).unwrap();
    let md = std::fs::read_to_string(out.join("benchmark.md")).unwrap();
    let [shapes_run, parts_run] = [&report["runs"][0], &report["runs"][1]];
    for run in [shapes_run, parts_run] {
        let rows: Vec<&str> = run["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_str().unwrap())
            .collect();
        assert_eq!(
            rows,
            [
                "attention_stage4",
                "attention_stage3",
                "diml_marginal",
                "diml_flow",
                "smoothgrad",
                "uniform",
                "random",
                "centre_prior",
                "edges"
            ]
        );
        let pairs = run["pairs"].as_array().unwrap();
        assert_eq!(pairs.len(), 6);
        for p in pairs {
            let s0 = p["similarity"].as_f64().unwrap();
            assert!(s0 > 0.0 && s0 <= 1.0, "{s0}");
        }
        // Definitions: a uniform map ranks every pixel alike (AUC 1/2, no ROAD curve of its own).
        for u in scores(run, "uniform") {
            assert_eq!(u["values"]["auc"].as_f64(), Some(0.5));
            assert!(u["missing"]["road"].as_str().unwrap().contains("uniform"));
        }
        // Scores are fractions; a map without one (an all-zero attention map of this barely trained
        // model) says why, and the baselines always have them.
        for row in &rows {
            let mut measured = 0;
            for sc in scores(run, row) {
                for m in ["mass", "rank", "auc", "top_k", "sparseness"] {
                    match sc["values"][m].as_f64() {
                        Some(v) => {
                            // The Gini index of a near-uniform map rounds to -1e-17.
                            assert!((-1e-12..=1.0).contains(&v), "{row} {m} = {v}");
                            measured += 1;
                        }
                        None => {
                            assert!(!row.ends_with("prior") && *row != "edges", "{row} {m}: {sc}");
                            assert!(sc["missing"][m].as_str().unwrap().contains("map"), "{row} {m}: {sc}");
                        }
                    }
                }
            }
            assert!(measured > 0, "{row} has no localisation score");
        }
        // The centre prior and the edge map know nothing of the partner or of the weights.
        let same: Vec<&Value> = run["pairs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["relation"] == "same")
            .collect();
        assert_eq!(same.len(), 3);
        for p in &same {
            for b in ["centre_prior", "edges"] {
                assert_eq!(p["methods"][b]["values"]["partner_spearman"].as_f64(), Some(1.0), "{b}");
            }
        }
        let steps = run["cascade_steps"].as_array().unwrap();
        assert_eq!(steps.len(), 5, "head and four stages");
        let records = run["randomisation_records"].as_array().unwrap();
        assert_eq!(records.len(), 5 * 2);
        let mut changed = 0;
        for r in records {
            for b in ["random", "centre_prior", "edges"] {
                assert_eq!(r["methods"][b]["values"]["spearman"].as_f64(), Some(1.0), "{b} {r}");
            }
            if r["methods"]["attention_stage4"]["values"]["spearman"]
                .as_f64()
                .is_none_or(|v| v < 0.999)
            {
                changed += 1;
            }
        }
        // With every weight fresh the trained model's attention is gone.
        assert!(changed >= 2, "attention unchanged by randomisation: {records:?}");
    }
    // Part-level rows: not available on the shapes set, with the reason; measured on the parts set.
    for sc in scores(shapes_run, "smoothgrad") {
        assert!(
            sc["missing"]["part_rho"].as_str().unwrap().contains("synth-parts"),
            "{sc}"
        );
    }
    assert!(
        md.contains("part_rho, differing_mass, shared_mass: the set has object masks but no parts"),
        "{md}"
    );
    let parts_pairs = parts_run["pairs"].as_array().unwrap();
    let mut with_parts = 0;
    for p in parts_pairs {
        let drops = p["part_drops"].as_object().map_or(0, |d| d.len());
        if drops == 0 {
            continue;
        }
        with_parts += 1;
        let key = if p["relation"] == "same" {
            "shared_mass"
        } else {
            "differing_mass"
        };
        for row in ["smoothgrad", "edges", "uniform"] {
            let sc = &p["methods"][row];
            let v = sc["values"][key].as_f64().or_else(|| {
                let why = sc["missing"][key].as_str().unwrap();
                assert!(why.contains("differ are empty"), "{why}");
                None
            });
            if let Some(v) = v {
                assert!((0.0..=1.0).contains(&v), "{row} {key} = {v}");
            }
        }
    }
    assert!(with_parts >= 1, "no query of the parts set has a part: {parts_pairs:?}");
}

#[test]
fn bad_requests_are_one_error_and_leave_earlier_output() {
    let runs = tempfile::tempdir().unwrap();
    let config = common::tiny_config(runs.path(), "cnn", &["train.epochs=1", "train.samples_per_epoch=40"]);
    let run = train(&config, &RunOptions::default(), &Silent).unwrap().run_dir;
    let out = runs.path().join("bench");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("benchmark.md"), "earlier").unwrap();
    for (args, wanted) in [
        (vec!["--pairs", "0"], "--pairs 0"),
        (vec!["--method", "avsl"], "[avsl] enabled = true"),
        (vec!["--method", "gradcam"], "supports attention_stage4"),
    ] {
        let mut all = vec!["benchmark", "--run", s(&run), "--out", s(&out)];
        all.extend(args.iter().copied());
        let o = explain(&all);
        assert!(!o.status.success(), "{args:?}");
        let e = stderr(&o);
        assert!(e.contains(wanted), "{args:?}: {e}");
        assert_eq!(std::fs::read_to_string(out.join("benchmark.md")).unwrap(), "earlier");
    }
    let o = explain(&["benchmark", "--run", s(&runs.path().join("nope")), "--out", s(&out)]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("nope"), "{}", stderr(&o));

    // A set without masks: the run evaluated on a copy of its set without `masks/` runs, with
    // the mask and part columns not available and saying why.
    let bare = runs.path().join("bare-set");
    let set = common::data_root().join("synth-n300-s32");
    common::copy_dir(&set.join("images"), &bare.join("images"));
    std::fs::copy(set.join("manifest.csv"), bare.join("manifest.csv")).unwrap();
    let bare_run = runs.path().join("bare-run");
    common::copy_dir(&run, &bare_run);
    let config = std::fs::read_to_string(run.join("config.toml")).unwrap();
    let manifest = common::toml_string(&bare.join("manifest.csv"));
    let config = config.replace("dataset = \"synth\"", &format!("dataset = {manifest}"));
    std::fs::write(bare_run.join("config.toml"), config).unwrap();
    let o = explain(&[
        "benchmark",
        "--run",
        s(&bare_run),
        "--pairs",
        "2",
        "--randomisation-pairs",
        "0",
        "--samples",
        "2",
        "--method",
        "smoothgrad",
        "--out",
        s(&out),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let md = std::fs::read_to_string(out.join("benchmark.md")).unwrap();
    assert!(
        md.contains("| smoothgrad |") && !md.contains("| attention_stage4 |"),
        "{md}"
    );
    assert!(md.contains("pointing, mass, rank, auc, top_k: the set"), "{md}");
    assert!(md.contains("has no object masks"), "{md}");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(out.join("benchmark.json")).unwrap()).unwrap();
    assert!(report["runs"][0]["table"]["smoothgrad"]["road"]["mean"].is_f64());
    // explain faithfulness, which needs masks, says which sets have them (not to regenerate).
    let o = explain(&["faithfulness", "--run", s(&bare_run), "--triplets", "2"]);
    let e = stderr(&o);
    assert!(!o.status.success());
    assert!(
        e.contains("has no object masks") && e.contains("synth or synth-parts") && !e.contains("--force"),
        "{e}"
    );
}
