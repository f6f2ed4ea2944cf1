//! `train import`, `train embed` and `train export` through the real binary, without the shared
//! PyTorch case (`import_reference.rs` checks against PyTorch): a ResNet-18 run trained here is
//! exported and imported back with bit-identical embeddings, and, where a Python with torch is
//! found (`$DML_TORCH_PYTHON`, else the peers' environment `$CARGO_TARGET_DIR/peers-venv`), loaded
//! by PyTorch as the README it writes says, giving the same embeddings; an import is a run that
//! `eval` evaluates; `embed` of a split writes the labels; each bad input is one error naming it.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use dml_train::Silent;
use dml_train::{RunOptions, train};

fn cli(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_train")).args(args).output().unwrap()
}

fn ok(args: &[&str]) -> String {
    let o = cli(args);
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "{args:?}: {all}");
    all
}

fn fails(args: &[&str], wanted: &str) {
    let o = cli(args);
    let e = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(!o.status.success(), "{args:?} succeeded");
    assert!(e.contains(wanted), "{args:?}: {e}");
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A safetensors file of `f32` tensors.
fn write_tensors(path: &Path, tensors: &[(&str, Vec<usize>)]) {
    let data: Vec<(String, Vec<usize>, Vec<u8>)> = tensors
        .iter()
        .map(|(k, shape)| {
            let n: usize = shape.iter().product();
            let bytes = (0..n).flat_map(|i| (i as f32 * 1e-3).to_le_bytes()).collect();
            (k.to_string(), shape.clone(), bytes)
        })
        .collect();
    let views: Vec<(String, safetensors::tensor::TensorView)> = data
        .iter()
        .map(|(k, shape, bytes)| {
            (
                k.clone(),
                safetensors::tensor::TensorView::new(safetensors::Dtype::F32, shape.clone(), bytes).unwrap(),
            )
        })
        .collect();
    std::fs::write(path, safetensors::serialize(views, None).unwrap()).unwrap();
}

#[test]
fn export_import_round_trip_and_bad_input() {
    let runs = tempfile::tempdir().unwrap();
    let r = runs.path();
    let config = common::tiny_config(
        r,
        "r18",
        &[
            "model.backbone=\"resnet18\"",
            "train.epochs=1",
            "train.samples_per_epoch=40",
            "model.embedding_dim=16",
        ],
    );
    let run = train(&config, &RunOptions::default(), &Silent).unwrap().run_dir;
    let export = r.join("export");
    ok(&[
        "export",
        "--run",
        s(&run),
        "--checkpoint",
        "latest",
        "--out",
        s(&export),
    ]);
    let readme = std::fs::read_to_string(export.join("README.md")).unwrap();
    assert!(
        readme.contains("torch.nn.Linear(512, 16)") && readme.contains("torchvision.models.resnet18()"),
        "{readme}"
    );
    let root = common::toml_string(common::data_root());
    let data_root = format!("data.root={root}");
    let import = |name: &str, extra: &[&str]| -> Vec<String> {
        let mut args: Vec<String> = [
            "import",
            "--backbone",
            "resnet18",
            "--name",
            name,
            "--run-dir",
            s(r),
            "--set",
            "data.synth_images=300",
            "--set",
            "data.synth_size=32",
            "--set",
            "data.image_size=24",
            "--set",
            &data_root,
        ]
        .iter()
        .map(|a| a.to_string())
        .collect();
        args.extend(extra.iter().map(|a| a.to_string()));
        args
    };
    let trunk = export.join("trunk.safetensors");
    let embedder = export.join("embedder.safetensors");
    let args = import("back", &["--trunk", s(&trunk), "--embedder", s(&embedder)]);
    let printed = ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(printed.contains("embedder: Linear(512, 16)"), "{printed}");

    // The same images through the trained run and its re-import: the same bytes.
    let images: Vec<String> = (0..3)
        .map(|i| {
            common::data_root()
                .join(format!("synth-n300-s32/images/{i:06}.png"))
                .display()
                .to_string()
        })
        .collect();
    let embed = |run: &Path, out: &Path| {
        let mut a = vec!["embed", "--run", s(run), "--checkpoint", "latest", "--out", s(out)];
        a.extend(images.iter().map(String::as_str));
        ok(&a);
        std::fs::read(out).unwrap()
    };
    let trained = embed(&run, &r.join("trained.npy"));
    let imported = embed(&r.join("back"), &r.join("imported.npy"));
    assert_eq!(trained, imported, "export → import changed the embeddings");
    pytorch_loads_the_export(&run, &export, r);
    // An imported run is a run: eval takes it, and embed writes a split with its labels.
    ok(&["eval", s(&r.join("back")), "--checkpoint", "latest"]);
    let split = r.join("split.npy");
    let printed = ok(&[
        "embed",
        "--run",
        s(&r.join("back")),
        "--checkpoint",
        "latest",
        "--split",
        "test",
        "--out",
        s(&split),
    ]);
    assert!(printed.contains("embeddings of dimension 16"), "{printed}");
    let labels = std::fs::read(r.join("split.labels.npy")).unwrap();
    let paths = std::fs::read_to_string(r.join("split.paths.txt")).unwrap();
    let rows = paths.lines().count();
    assert!(
        rows > 0 && labels.len() > 8 * rows,
        "{rows} rows, {} label bytes",
        labels.len()
    );

    // Embedders of several layers: an nn.Sequential with a ReLU between (indices two apart) and
    // PML's MLP (a leading ReLU, layers one apart); exported as an nn.Sequential PyTorch loads.
    let mlp = r.join("mlp.safetensors");
    write_tensors(
        &mlp,
        &[
            ("0.weight", vec![32, 512]),
            ("0.bias", vec![32]),
            ("2.weight", vec![16, 32]),
            ("2.bias", vec![16]),
        ],
    );
    let args = import("mlp", &["--trunk", s(&trunk), "--embedder", s(&mlp)]);
    let printed = ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(
        printed.contains("2 linear layers 512 → 32 → 16, ReLU between"),
        "{printed}"
    );
    let mlp_export = r.join("mlp-export");
    ok(&["export", "--run", s(&r.join("mlp")), "--out", s(&mlp_export)]);
    let readme = std::fs::read_to_string(mlp_export.join("README.md")).unwrap();
    assert!(
        readme.contains("torch.nn.Sequential(torch.nn.Linear(512, 32), torch.nn.ReLU(), torch.nn.Linear(32, 16))"),
        "{readme}"
    );
    let args = import(
        "mlp-back",
        &[
            "--trunk",
            s(&mlp_export.join("trunk.safetensors")),
            "--embedder",
            s(&mlp_export.join("embedder.safetensors")),
        ],
    );
    ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let first = embed(&r.join("mlp"), &r.join("mlp.npy"));
    assert_eq!(first, embed(&r.join("mlp-back"), &r.join("mlp-back.npy")));
    assert_ne!(first, imported, "the two-layer embedder changed nothing");
    pytorch_loads_the_export(&r.join("mlp"), &mlp_export, r);
    let pml = r.join("pml-mlp.safetensors");
    write_tensors(
        &pml,
        &[
            ("net.1.weight", vec![32, 512]),
            ("net.1.bias", vec![32]),
            ("net.2.weight", vec![16, 32]),
            ("net.2.bias", vec![16]),
        ],
    );
    let args = import("pml-mlp", &["--trunk", s(&trunk), "--embedder", s(&pml)]);
    let printed = ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(printed.contains("2 linear layers 512 → 32 → 16 (D = 16)"), "{printed}");

    // Bad input, each one error naming it.
    let gaps = r.join("gaps.safetensors");
    write_tensors(
        &gaps,
        &[
            ("0.weight", vec![32, 512]),
            ("0.bias", vec![32]),
            ("1.weight", vec![32, 32]),
            ("1.bias", vec![32]),
            ("3.weight", vec![16, 32]),
            ("3.bias", vec![16]),
        ],
    );
    let narrow = r.join("narrow.safetensors");
    write_tensors(&narrow, &[("weight", vec![16, 256]), ("bias", vec![16])]);
    let odd = r.join("odd.safetensors");
    write_tensors(&odd, &[("proj.kernel", vec![16, 512])]);
    for (name, extra, wanted) in [
        (
            "m1",
            vec!["--trunk", s(&trunk), "--embedder", s(&gaps)],
            "indices [0, 1, 3]",
        ),
        (
            "m2",
            vec!["--trunk", s(&trunk), "--embedder", s(&narrow)],
            "[16, 256], but the resnet18 trunk gives 512",
        ),
        ("m3", vec!["--trunk", s(&trunk), "--embedder", s(&odd)], "proj.kernel"),
        ("m4", vec!["--trunk", s(&embedder)], "conv1.weight"),
        ("m5", vec!["--trunk", s(&r.join("nope.pth"))], "nope.pth"),
        ("back", vec!["--trunk", s(&trunk)], "exists"),
    ] {
        let args = import(name, &extra);
        fails(&args.iter().map(String::as_str).collect::<Vec<_>>(), wanted);
        if name != "back" {
            assert!(!r.join(name).exists(), "{name} was left behind");
        }
    }
    let mut small = import("small", &["--trunk", s(&trunk)]);
    small[2] = "small_cnn".into();
    fails(
        &small.iter().map(String::as_str).collect::<Vec<_>>(),
        "only resnet18, resnet50, bn_inception",
    );
    // A run of the small CNN has no PyTorch layout to export to.
    let cnn = common::tiny_config(r, "cnn", &["train.epochs=1", "train.samples_per_epoch=40"]);
    let cnn = train(&cnn, &RunOptions::default(), &Silent).unwrap().run_dir;
    fails(
        &[
            "export",
            "--run",
            s(&cnn),
            "--checkpoint",
            "latest",
            "--out",
            s(&r.join("x")),
        ],
        "small_cnn",
    );
    assert!(!r.join("x").exists());
}

/// A Python that imports torch, torchvision and safetensors, if one is configured.
fn torch_python() -> Option<std::path::PathBuf> {
    let candidates = [
        std::env::var_os("DML_TORCH_PYTHON").map(std::path::PathBuf::from),
        std::env::var_os("CARGO_TARGET_DIR").map(|d| std::path::PathBuf::from(d).join("peers-venv/bin/python")),
    ];
    candidates.into_iter().flatten().find(|p| {
        Command::new(p)
            .args(["-c", "import torch, torchvision, safetensors, PIL, numpy"])
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// PyTorch loads the export of `run` and embeds three images of the run's input size as `train
/// embed` does (`xtask/peers/check_export.py`).
fn pytorch_loads_the_export(run: &Path, export: &Path, scratch: &Path) {
    let Some(python) = torch_python() else {
        eprintln!("skipped the PyTorch check of the export: no Python with torch (set DML_TORCH_PYTHON)");
        return;
    };
    // 24 × 24 crops: the run's input size, so that no resizing enters the comparison.
    let images: Vec<String> = (0..3)
        .map(|i| {
            let source = common::data_root().join(format!("synth-n300-s32/images/{i:06}.png"));
            let crop = image::open(&source).unwrap().crop_imm(4, 4, 24, 24).to_rgb8();
            let path = scratch.join(format!("crop{i}.png"));
            crop.save(&path).unwrap();
            path.display().to_string()
        })
        .collect();
    let npy = scratch.join("crops.npy");
    let mut args = vec!["embed", "--run", s(run), "--checkpoint", "latest", "--out", s(&npy)];
    args.extend(images.iter().map(String::as_str));
    ok(&args);
    let script = dml_testkit::workspace_root().join("xtask/peers/check_export.py");
    let o = Command::new(&python)
        .arg(&script)
        .arg(export)
        .arg(&npy)
        .args(&images)
        .arg("--normalize")
        .output()
        .unwrap();
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "PyTorch disagrees with the export: {all}");
    eprintln!("PyTorch check of the export: {all}");
}
