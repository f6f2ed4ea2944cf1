//! `train import` and `train embed` against PyTorch: every case of kind `model_import` (a folder
//! holding `case.json`, a pytorch-metric-learning trunk and embedder and five images) under
//! `$DML_REFERENCE_DIR`, by default `../shared/reference/import` beside the workspace. Importing the
//! two files and embedding the images reproduces the embeddings PyTorch computed, raw and
//! L2-normalised, within the case's tolerance. The trunk is 45 MB, so the cases are not copied into
//! the repository; without them the test fails under `CI` and says so elsewhere.

use std::path::{Path, PathBuf};
use std::process::Command;

use dml_testkit::{Case, Tolerance};
use serde_json::Value;

/// The case folders: `$DML_REFERENCE_DIR` (relative to the workspace root) or the shared default.
fn case_dirs() -> (PathBuf, Vec<PathBuf>) {
    let root = dml_testkit::workspace_root();
    let dir = match std::env::var_os("DML_REFERENCE_DIR").map(PathBuf::from) {
        Some(d) if d.is_absolute() => d,
        Some(d) => root.join(d),
        None => root.join("../shared/reference/import"),
    };
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    dirs.push(dir.clone());
    dirs.retain(|d| d.join("case.json").is_file());
    dirs.sort();
    (dir, dirs)
}

fn train(args: &[&str]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_train")).args(args).output().unwrap();
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "train {args:?}: {all}");
    all
}

/// The `.npy` of `train embed` as rows.
fn read_npy(path: &Path) -> Vec<f32> {
    let bytes = std::fs::read(path).unwrap();
    let header = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    bytes[10 + header..]
        .chunks(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()))
        .collect()
}

#[test]
fn imported_pml_models_embed_as_pytorch_does() {
    let (dir, cases) = case_dirs();
    let cases: Vec<(PathBuf, Case)> = cases
        .into_iter()
        .map(|d| {
            let path = d.join("case.json");
            let json: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            (d, Case { path, json })
        })
        .filter(|(_, c)| c.kind() == "model_import")
        .collect();
    if cases.is_empty() {
        let message = format!("no model_import case under {}", dir.display());
        assert!(std::env::var_os("CI").is_none(), "{message}");
        eprintln!("skipped: {message} (set DML_REFERENCE_DIR to a folder of import cases)");
        return;
    }
    let runs = tempfile::tempdir().unwrap();
    for (folder, case) in &cases {
        let config = &case.json["config"];
        let backbone = config["backbone"].as_str().unwrap().split_whitespace().next().unwrap();
        let size = config["image_size"].as_u64().unwrap();
        let resize = (size as f64 * 256.0 / 224.0).round() as u64;
        let triple = |k: &str| {
            let v: Vec<String> = config[k]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap().to_string())
                .collect();
            format!("[{}]", v.join(", "))
        };
        let images: Vec<String> = case.json["inputs"]["images"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| folder.join(p.as_str().unwrap()).display().to_string())
            .collect();
        let tolerance = Tolerance::from_json(&case.json["tolerance"]).unwrap();
        for (normalize, expected) in [("false", "embeddings"), ("true", "normalized")] {
            let name = format!("{}-{normalize}", case.name());
            let trunk = folder.join(config["trunk"].as_str().unwrap());
            let mut args = vec![
                "import".to_string(),
                "--backbone".into(),
                backbone.into(),
                "--trunk".into(),
                trunk.display().to_string(),
                "--name".into(),
                name.clone(),
                "--run-dir".into(),
                runs.path().display().to_string(),
            ];
            if let Some(e) = config["embedder"].as_str() {
                args.extend(["--embedder".into(), folder.join(e).display().to_string()]);
            }
            for set in [
                format!("data.image_size={size}"),
                format!("data.eval_resize={resize}"),
                format!("data.mean={}", triple("mean")),
                format!("data.std={}", triple("std")),
                format!("model.normalize={normalize}"),
            ] {
                args.extend(["--set".into(), set]);
            }
            train(&args.iter().map(String::as_str).collect::<Vec<_>>());
            let out = runs.path().join(format!("{name}.npy"));
            let run = runs.path().join(&name);
            let mut embed = vec!["embed", "--run", run.to_str().unwrap(), "--out", out.to_str().unwrap()];
            embed.extend(images.iter().map(String::as_str));
            train(&embed);
            let got: Vec<f64> = read_npy(&out).into_iter().map(f64::from).collect();
            let want = floats(&case.json["expected"][expected]);
            if let Err(e) = tolerance.compare(&format!("{} {expected}", case.name()), &got, &want) {
                panic!("{e}");
            }
            let listed = std::fs::read_to_string(runs.path().join(format!("{name}.paths.txt"))).unwrap();
            assert_eq!(listed.lines().collect::<Vec<_>>(), images);
        }
    }
}
