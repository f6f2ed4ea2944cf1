//! Torchvision weight import: tiny ResNets saved by PyTorch in the exact torchvision
//! `state_dict` layout must reproduce PyTorch's `layer4` and `logits` (eval mode).
//!
//! Reads every `resnet_forward` case (`*.json`) in `$DML_REFERENCE_DIR`, defaulting to
//! the workspace's `tests/fixtures/weights`, with the `.pth` named by the case beside it,
//! and names every failing case. Each case is loaded twice: from the `.pth` and from a
//! `.safetensors` rewrite of it.

use std::path::{Path, PathBuf};

use burn::tensor::{Device, Tensor, TensorData};
use dml_models::{BlockKind, ResNetConfig};
use dml_testkit::{Array, Case, Report, cases_or_panic, get};
use serde_json::Value;

/// Rewrites a `.pth` state dict as a `.safetensors` file with the same (torchvision) key
/// names, byte for byte, using only the PyTorch reader and the safetensors format
/// definition (8-byte little-endian header length, JSON header, raw data), so that the
/// safetensors import is checked against PyTorch's numbers, not against our own writer.
fn pth_to_safetensors(pth: &Path, out: &Path) {
    let reader = burn::store::pytorch_reader::PytorchReader::new(pth).expect("read .pth");
    let mut keys = reader.keys();
    keys.sort();
    let mut header = serde_json::Map::new();
    let mut data = Vec::new();
    for key in &keys {
        let t = reader.get(key).expect("key listed");
        let bytes = t.read().expect("tensor bytes");
        let dtype = match format!("{:?}", t.dtype()).as_str() {
            "F32" | "Float32" => "F32",
            "I64" | "Int64" => "I64",
            other => panic!("unexpected dtype {other} for {key}"),
        };
        header.insert(
            key.clone(),
            serde_json::json!({"dtype": dtype, "shape": t.shape(), "data_offsets": [data.len(), data.len() + bytes.len()]}),
        );
        data.extend_from_slice(&bytes);
    }
    let mut json = serde_json::to_vec(&Value::Object(header)).unwrap();
    while !json.len().is_multiple_of(8) {
        json.push(b' ');
    }
    let mut file = (json.len() as u64).to_le_bytes().to_vec();
    file.extend_from_slice(&json);
    file.extend_from_slice(&data);
    std::fs::write(out, file).unwrap();
}

fn config_of(case: &Case) -> Result<ResNetConfig, String> {
    let c = case.field("config")?;
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

fn to_f64(t: Tensor<4>) -> Result<Vec<f64>, String> {
    let v = t.into_data().try_to_vec::<f32>().map_err(|e| format!("{e:?}"))?;
    Ok(v.into_iter().map(f64::from).collect())
}

/// Loads the case's weights in `format` ("pth" or "safetensors") and compares `layer4`
/// and `logits` with PyTorch's.
fn run_case(case: &Case, format: &str) -> Result<(), String> {
    let device = Device::flex();
    let config = config_of(case)?;
    let mut model = config.init(&device).map_err(|e| e.to_string())?;
    let pth = case.path.with_file_name(
        get(&case.json, "config.weights_file")?
            .as_str()
            .ok_or("config.weights_file is not a string")?,
    );
    let report = if format == "pth" {
        model.load_torchvision(&pth, false)
    } else {
        let dir = std::env::temp_dir().join(format!("dml-models-st-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let st = dir.join(format!("{}.safetensors", case.file_name()));
        pth_to_safetensors(&pth, &st);
        model.load_weights(&st, false)
    }
    .map_err(|e| e.to_string())?;
    // Only BatchNorm's step counters have no place in the model.
    if let Some(bad) = report.unused.iter().find(|k| !k.ends_with("num_batches_tracked")) {
        return Err(format!("unexpected unused key {bad}"));
    }
    let images = Array::from_json(get(&case.json, "inputs.images")?, "inputs.images")?;
    let input = Tensor::<4>::from_data(TensorData::new(images.to_f32(), images.shape.clone()), &device);
    let tol = case.tolerance()?;
    let maps = model.forward_features(input.clone());
    for stage in 1..=4 {
        let key = format!("expected.layer{stage}_shape");
        let want: Vec<usize> = Array::from_json(get(&case.json, &key)?, &key)?
            .data
            .iter()
            .map(|&x| x as usize)
            .collect();
        let got = maps.stages[stage].dims().to_vec();
        if got != want {
            return Err(format!("{key}: got {got:?} want {want:?}"));
        }
    }
    let want = Array::from_json(get(&case.json, "expected.layer4")?, "layer4")?;
    tol.compare(&format!("{format} layer4"), &to_f64(maps.last().clone())?, &want.data)?;
    let logits = model.forward_logits(input).ok_or("model has no classifier")?;
    let logits = logits.into_data().try_to_vec::<f32>().map_err(|e| format!("{e:?}"))?;
    let logits: Vec<f64> = logits.into_iter().map(f64::from).collect();
    let want = Array::from_json(get(&case.json, "expected.logits")?, "logits")?;
    tol.compare(&format!("{format} logits"), &logits, &want.data)
}

#[test]
fn tiny_torchvision_resnets_reproduce_pytorch() {
    let mut report = Report::new();
    for case in cases_or_panic("weights", &["resnet_forward"]) {
        let outcome = run_case(&case, "pth").and_then(|()| run_case(&case, "safetensors"));
        report.record(&case, outcome);
    }
    report.finish("resnet_forward");
}

fn weights(name: &str) -> PathBuf {
    dml_testkit::workspace_root().join("tests/fixtures/weights").join(name)
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
