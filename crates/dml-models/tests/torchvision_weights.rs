//! Torchvision weight import: tiny ResNets saved by PyTorch in the exact torchvision
//! `state_dict` layout must reproduce PyTorch's `layer4` and `logits` (eval mode).
//!
//! Reads every `resnet_forward` case (`*.json`) in `$DML_REFERENCE_DIR`, defaulting to
//! the workspace's `tests/fixtures/weights`, with the `.pth` named by the case beside it,
//! and names every failing case.

use std::path::{Path, PathBuf};

use burn::tensor::{Device, Tensor, TensorData};
use dml_models::{BlockKind, ResNetConfig};
use serde_json::Value;

fn case_dir() -> PathBuf {
    std::env::var_os("DML_REFERENCE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/weights")))
}

fn flatten(v: &Value, out: &mut Vec<f64>) {
    match v {
        Value::Array(items) => items.iter().for_each(|i| flatten(i, out)),
        Value::Number(n) => out.push(n.as_f64().expect("number")),
        other => panic!("unexpected JSON value {other}"),
    }
}

fn shape_of(v: &Value) -> Vec<usize> {
    let mut shape = Vec::new();
    let mut cur = v;
    while let Value::Array(items) = cur {
        shape.push(items.len());
        cur = &items[0];
    }
    shape
}

fn config_of(case: &Value) -> Result<ResNetConfig, String> {
    let c = &case["config"];
    let block = match c["block"].as_str() {
        Some("BasicBlock") => BlockKind::Basic,
        Some("Bottleneck") => BlockKind::Bottleneck,
        other => return Err(format!("unknown block {other:?}")),
    };
    let four = |key: &str| -> Result<[usize; 4], String> {
        let v: Vec<usize> = c[key]
            .as_array()
            .ok_or(format!("config.{key} missing"))?
            .iter()
            .map(|x| {
                x.as_u64()
                    .map(|x| x as usize)
                    .ok_or(format!("config.{key} not integers"))
            })
            .collect::<Result<_, _>>()?;
        v.try_into().map_err(|_| format!("config.{key} must have 4 entries"))
    };
    Ok(ResNetConfig {
        block,
        layers: four("layers")?,
        widths: four("widths")?,
        num_classes: c["num_classes"].as_u64().map(|n| n as usize),
    })
}

fn compare(name: &str, got: &[f32], want: &Value, rel: f64, abs: f64) -> Result<(), String> {
    let mut expected = Vec::new();
    flatten(want, &mut expected);
    if got.len() != expected.len() {
        return Err(format!("{name}: {} values, expected {}", got.len(), expected.len()));
    }
    let (worst, i) = got
        .iter()
        .zip(&expected)
        .enumerate()
        .map(|(i, (&g, &w))| (((g as f64) - w).abs() - (abs + rel * w.abs()), i))
        .fold((f64::NEG_INFINITY, 0), |a, b| if b.0 > a.0 { b } else { a });
    if worst > 0.0 {
        return Err(format!("{name}[{i}]: got {} want {}", got[i], expected[i]));
    }
    Ok(())
}

fn run_case(path: &Path, case: &Value) -> Result<(), String> {
    let device = Device::flex();
    let config = config_of(case)?;
    let mut model = config.init(&device).map_err(|e| e.to_string())?;
    let weights = path.with_file_name(
        case["config"]["weights_file"]
            .as_str()
            .ok_or("config.weights_file missing")?,
    );
    let report = model.load_torchvision(&weights, false).map_err(|e| e.to_string())?;
    // Only BatchNorm's step counters have no place in the model.
    if let Some(bad) = report.unused.iter().find(|k| !k.ends_with("num_batches_tracked")) {
        return Err(format!("unexpected unused key {bad}"));
    }
    let images = &case["inputs"]["images"];
    let mut pixels = Vec::new();
    flatten(images, &mut pixels);
    let shape = shape_of(images);
    let input = Tensor::<4>::from_data(
        TensorData::new(pixels.iter().map(|&x| x as f32).collect::<Vec<f32>>(), shape.clone()),
        &device,
    );
    let (rel, abs) = (
        case["tolerance"]["rel"].as_f64().unwrap_or(1e-4),
        case["tolerance"]["abs"].as_f64().unwrap_or(1e-5),
    );
    let maps = model.forward_features(input.clone());
    for (stage, key) in [
        (1, "layer1_shape"),
        (2, "layer2_shape"),
        (3, "layer3_shape"),
        (4, "layer4_shape"),
    ] {
        let want: Vec<usize> = case["expected"][key]
            .as_array()
            .ok_or(format!("expected.{key} missing"))?
            .iter()
            .map(|x| x.as_u64().unwrap_or(0) as usize)
            .collect();
        let got = maps.stages[stage].dims().to_vec();
        if got != want {
            return Err(format!("{key}: got {got:?} want {want:?}"));
        }
    }
    let layer4 = maps
        .last()
        .clone()
        .into_data()
        .try_to_vec::<f32>()
        .map_err(|e| format!("{e:?}"))?;
    compare("layer4", &layer4, &case["expected"]["layer4"], rel, abs)?;
    let logits = model.forward_logits(input).ok_or("model has no classifier")?;
    let logits = logits.into_data().try_to_vec::<f32>().map_err(|e| format!("{e:?}"))?;
    compare("logits", &logits, &case["expected"]["logits"], rel, abs)
}

#[test]
fn tiny_torchvision_resnets_reproduce_pytorch() {
    let dir = case_dir();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    entries.sort();
    let mut ran = 0;
    let mut failures = Vec::new();
    for path in entries {
        let case: Value = match std::fs::read_to_string(&path).map(|s| serde_json::from_str(&s)) {
            Ok(Ok(case)) => case,
            other => {
                failures.push(format!("{}: unreadable ({other:?})", path.display()));
                continue;
            }
        };
        if case["kind"] != "resnet_forward" {
            continue;
        }
        ran += 1;
        if let Err(e) = run_case(&path, &case) {
            failures.push(format!("{}: {e}", path.file_name().unwrap().to_string_lossy()));
        }
    }
    assert!(ran > 0, "no resnet_forward case in {}", dir.display());
    assert!(
        failures.is_empty(),
        "{} of {ran} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

fn weights(name: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/weights")).join(name)
}

fn tiny18() -> ResNetConfig {
    ResNetConfig {
        block: BlockKind::Basic,
        layers: [2, 2, 2, 2],
        widths: [8, 16, 32, 64],
        num_classes: Some(10),
    }
}

#[test]
fn shape_mismatch_names_the_key_and_both_shapes() {
    let device = Device::flex();
    let mut model = ResNetConfig {
        widths: [8, 16, 32, 128],
        ..tiny18()
    }
    .init(&device)
    .unwrap();
    let e = model
        .load_torchvision(&weights("tiny_resnet18_layout.pth"), false)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("tiny_resnet18_layout.pth") && e.contains("layer4.0.conv1"),
        "{e}"
    );
    assert!(e.contains("128") && e.contains("64"), "{e}");
}

#[test]
fn missing_and_unused_keys_are_reported() {
    let device = Device::flex();
    // A third block in layer1 has no weights in the file.
    let mut model = ResNetConfig {
        layers: [3, 2, 2, 2],
        ..tiny18()
    }
    .init(&device)
    .unwrap();
    let path = weights("tiny_resnet18_layout.pth");
    let e = model.load_torchvision(&path, false).unwrap_err().to_string();
    assert!(e.contains("layer1.2.conv1.weight"), "{e}");
    let report = model.load_torchvision(&path, true).unwrap();
    assert!(report.missing.iter().any(|k| k == "layer1.2.bn2.weight"), "{report:?}");
    // A headless backbone leaves the classifier unused.
    let mut headless = ResNetConfig {
        num_classes: None,
        ..tiny18()
    }
    .init(&device)
    .unwrap();
    let report = headless.load_torchvision(&path, false).unwrap();
    assert!(report.unused.iter().any(|k| k.contains("fc.weight")), "{report:?}");
    let e = headless
        .load_torchvision(Path::new("/nonexistent/w.pth"), false)
        .unwrap_err()
        .to_string();
    assert!(e.contains("/nonexistent/w.pth"), "{e}");
}
