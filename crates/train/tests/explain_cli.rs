//! `train explain attention` and `train explain faithfulness` through the real binary on a run
//! trained for one epoch on the tiny synthetic set: the overlays and the JSON are written and the
//! JSON's scores are the model's; faithfulness reports finite metrics for every image; bad input
//! (a missing image, a wrong count, an unknown stage, a checkpoint of another architecture) is an
//! error naming it.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use dml_train::Silent;
use dml_train::{RunOptions, train};

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

fn synth_images(n: usize) -> Vec<PathBuf> {
    let dir = common::data_root().join("synth-n300-s32/images");
    (0..n).map(|i| dir.join(format!("{i:06}.png"))).collect()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn attention_and_faithfulness_of_a_trained_run() {
    let runs = tempfile::tempdir().unwrap();
    let config = common::tiny_config(runs.path(), "cnn", &["train.epochs=1", "train.samples_per_epoch=100"]);
    let run = train(&config, &RunOptions::default(), &Silent).unwrap().run_dir;
    let out = runs.path().join("explained");
    let images = synth_images(3);

    attention_writes_overlays_and_the_models_scores(&run, &out, &images);
    faithfulness_reports_finite_metrics_for_every_image(&run, &runs.path().join("faith"));
    bad_input_names_what_is_wrong(&run, runs.path(), &out);
}

/// `explain attention` of a triplet writes the overlays and a JSON whose scores are the model's;
/// an inner stage and a different-class pair run too.
fn attention_writes_overlays_and_the_models_scores(run: &Path, out: &Path, images: &[PathBuf]) {
    let ok = explain(&[
        "attention",
        "--run",
        s(run),
        "--out",
        s(out),
        s(&images[0]),
        s(&images[1]),
        s(&images[2]),
    ]);
    assert!(ok.status.success(), "{}", stderr(&ok));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("attention.json")).unwrap()).unwrap();
    assert_eq!(report["kind"], "triplet");
    assert_eq!(report["stage"], "stage4");
    let scores: Vec<f64> = report["images"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["score"].as_f64().unwrap())
        .collect();
    // s = wᵀf with w ≥ 0 elementwise... only for the Siamese different form; here check that the
    // scores are the weight vector against unit embeddings: |s| ≤ ‖w‖.
    let w: Vec<f64> = report["weight_vector"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    let norm = w.iter().map(|x| x * x).sum::<f64>().sqrt();
    assert!(
        scores.iter().all(|s| s.is_finite() && s.abs() <= norm + 1e-5),
        "{scores:?} vs ‖w‖ {norm}"
    );
    for file in [
        "attention.png",
        "attention_0_anchor.png",
        "attention_1_positive.png",
        "attention_2_negative.png",
    ] {
        let img = image::open(out.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(img.width() >= 24 && img.height() >= 24, "{file}");
    }
    let shape = report["map_shape"].as_array().unwrap();
    let attention = report["images"][0]["attention"].as_array().unwrap();
    assert_eq!(
        attention.len() as u64,
        shape[0].as_u64().unwrap() * shape[1].as_u64().unwrap()
    );
    assert!(attention.iter().all(|v| v.as_f64().unwrap() >= 0.0));

    // An inner stage through autodiff, and a different-class pair.
    let pair = explain(&[
        "attention",
        "--run",
        s(run),
        "--stage",
        "stage3",
        "--different",
        "--out",
        s(out),
        s(&images[0]),
        s(&images[2]),
    ]);
    assert!(pair.status.success(), "{}", stderr(&pair));
}

/// `explain faithfulness` of three triplets reports finite metrics for all nine images.
fn faithfulness_reports_finite_metrics_for_every_image(run: &Path, faith_out: &Path) {
    let faith = explain(&[
        "faithfulness",
        "--run",
        s(run),
        "--triplets",
        "3",
        "--out",
        s(faith_out),
    ]);
    assert!(faith.status.success(), "{}", stderr(&faith));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(faith_out.join("faithfulness.json")).unwrap()).unwrap();
    let images = report["images"].as_array().unwrap();
    assert_eq!(images.len(), 9);
    for record in images {
        for key in ["iou", "centre_prior_iou", "deletion_auc", "random_deletion_auc"] {
            let v = record[key]
                .as_f64()
                .unwrap_or_else(|| panic!("{key} missing: {record}"));
            assert!(v.is_finite() && v >= -1e3, "{key} = {v}");
        }
        let iou = record["iou"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&iou));
    }
}

/// A missing image, a wrong count, an unknown stage and a checkpoint of another architecture are
/// each one error naming it.
fn bad_input_names_what_is_wrong(run: &Path, runs: &Path, out: &Path) {
    // Bad input names what is wrong.
    let missing = runs.join("nope.png");
    for (args, wanted) in [
        (
            vec![
                "attention",
                "--run",
                s(run),
                "--out",
                s(out),
                s(&images_path(0)),
                s(&missing),
            ],
            "nope.png",
        ),
        (
            vec!["attention", "--run", s(run), "--out", s(out), s(&images_path(0))],
            "1 images given",
        ),
        (
            vec![
                "attention",
                "--run",
                s(run),
                "--stage",
                "layer3",
                "--out",
                s(out),
                s(&images_path(0)),
                s(&images_path(1)),
            ],
            "layer3",
        ),
    ] {
        let o = explain(&args);
        assert!(!o.status.success());
        assert!(stderr(&o).contains(wanted), "{args:?}: {}", stderr(&o));
    }
    // A checkpoint of a ResNet run given to the small CNN's run.
    let other = common::tiny_config(
        runs,
        "resnet",
        &[
            "train.epochs=1",
            "train.samples_per_epoch=40",
            "model.backbone=\"resnet18\"",
        ],
    );
    let other = train(&other, &RunOptions::default(), &Silent).unwrap().run_dir;
    let foreign = dml_train::checkpoint::resolve(&other, "latest", &Silent).unwrap();
    let o = explain(&[
        "attention",
        "--run",
        s(run),
        "--checkpoint",
        s(&foreign),
        "--out",
        s(out),
        s(&images_path(0)),
        s(&images_path(1)),
    ]);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(e.contains(s(&foreign)) && e.contains("do not fit"), "{e}");
}

fn images_path(i: usize) -> PathBuf {
    synth_images(i + 1).pop().unwrap()
}
