//! The `xtask` binary on bad input: a clear error naming the input, a non-zero exit
//! status, and no output directory left behind.

use dml_testkit::mini_fashion_mnist;
use std::path::{Path, PathBuf};
use std::process::Command;

fn tempdir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("xtask-cli-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn xtask(args: &[&str]) -> (bool, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(args)
        .output()
        .expect("run xtask");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn fashion_mnist_miniature_prepares_with_split_by_class() {
    let root = tempdir("fm-ok");
    let src = root.join("src");
    std::fs::create_dir_all(&src).unwrap();
    mini_fashion_mnist(&src, 20);
    let out = root.join("out");
    let (ok, stderr) = xtask(&[
        "prepare",
        "fashion-mnist",
        "--src",
        src.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--no-verify-counts",
        "--val-classes",
        "1",
    ]);
    assert!(ok, "{stderr}");
    let manifest = dml_data::Manifest::read(out.join("manifest.csv")).unwrap();
    assert_eq!(manifest.records.len(), 40);
    for record in &manifest.records {
        let want = match record.class_id {
            0..=3 => dml_data::Split::Train,
            4 => dml_data::Split::Val,
            _ => dml_data::Split::Test,
        };
        assert_eq!(record.split, want, "{record:?}");
    }
    assert_eq!(manifest.records[1].class_name, "Trouser");
    // Pixels survive the PNG round trip exactly.
    let img = image::open(out.join(&manifest.records[3].path)).unwrap().to_luma8();
    assert_eq!(img.dimensions(), (28, 28));
    let want: Vec<u8> = (3 * 784..4 * 784).map(|i| (i % 251) as u8).collect();
    assert_eq!(img.as_raw(), &want);
    // Without --no-verify-counts the miniature is refused with the official counts named.
    let o2 = root.join("o2");
    let (ok, stderr) = xtask(&[
        "prepare",
        "fashion-mnist",
        "--src",
        src.to_str().unwrap(),
        "--out",
        o2.to_str().unwrap(),
    ]);
    assert!(!ok);
    assert!(stderr.contains("expected 35000 images, found 20"), "{stderr}");
    // Existing output is not overwritten without --force.
    let (ok, stderr) = xtask(&[
        "prepare",
        "fashion-mnist",
        "--src",
        src.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(!ok && stderr.contains("already exists"), "{stderr}");
    let mut names = leftovers(&root);
    names.sort();
    assert_eq!(names, vec!["out", "src"]);
}

#[test]
fn truncated_idx_archive_fails_cleanly() {
    let root = tempdir("fm-truncated");
    let src = root.join("src");
    std::fs::create_dir_all(&src).unwrap();
    mini_fashion_mnist(&src, 20);
    let images = src.join("t10k-images-idx3-ubyte.gz");
    let bytes = std::fs::read(&images).unwrap();
    std::fs::write(&images, &bytes[..bytes.len() / 2]).unwrap();
    let out = root.join("out");
    let (ok, stderr) = xtask(&[
        "prepare",
        "fashion-mnist",
        "--src",
        src.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--no-verify-counts",
    ]);
    assert!(!ok);
    assert!(
        stderr.contains("t10k-images-idx3-ubyte.gz") && stderr.contains("truncated"),
        "{stderr}"
    );
    assert_eq!(
        leftovers(&root),
        vec!["src"],
        "no output and no staging directory left behind"
    );
}

#[test]
fn unknown_dataset_and_missing_source_are_reported() {
    let (ok, stderr) = xtask(&["prepare", "imagenet"]);
    assert!(!ok && stderr.contains("imagenet"), "{stderr}");
    let root = tempdir("fm-missing");
    let nowhere = root.join("nowhere");
    let out = root.join("out");
    let (ok, stderr) = xtask(&[
        "prepare",
        "fashion-mnist",
        "--src",
        nowhere.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(
        !ok && stderr.contains("nowhere") && stderr.contains("train-images-idx3-ubyte"),
        "{stderr}"
    );
    assert!(leftovers(&root).is_empty());
}

#[test]
fn check_validates_a_manifest_and_names_bad_lines() {
    let root = tempdir("check");
    std::fs::create_dir_all(root.join("images")).unwrap();
    let img = image::RgbImage::from_fn(8, 8, |x, y| image::Rgb([(x * 30) as u8, (y * 30) as u8, 9]));
    for name in ["a", "b", "c", "d"] {
        img.save(root.join(format!("images/{name}.jpg"))).unwrap();
    }
    let manifest = root.join("manifest.csv");
    let head = "path,class_id,class_name,split\n";
    let good =
        format!("{head}images/a.jpg,0,x,train\nimages/b.jpg,0,x,train\nimages/c.jpg,1,y,test\nimages/d.jpg,1,y,test\n");
    std::fs::write(&manifest, &good).unwrap();
    let path = manifest.to_str().unwrap();
    let (ok, stderr) = xtask(&["check", path, "--decode"]);
    assert!(ok, "{stderr}");

    std::fs::write(&manifest, format!("{good}images/e.jpg,1,y,test\n")).unwrap();
    let (ok, stderr) = xtask(&["check", path]);
    assert!(
        !ok && stderr.contains("manifest.csv:6") && stderr.contains("e.jpg"),
        "{stderr}"
    );

    std::fs::write(&manifest, format!("{good}images/e.jpg,1,test\n")).unwrap();
    let (ok, stderr) = xtask(&["check", path]);
    assert!(
        !ok && stderr.contains("manifest.csv:6") && stderr.contains("expected 4 columns"),
        "{stderr}"
    );

    // A truncated JPEG passes the file checks but not decoding.
    std::fs::write(&manifest, &good).unwrap();
    let bytes = std::fs::read(root.join("images/c.jpg")).unwrap();
    std::fs::write(root.join("images/c.jpg"), &bytes[..bytes.len() - 40]).unwrap();
    let (ok, stderr) = xtask(&["check", path, "--decode"]);
    assert!(
        !ok && stderr.contains("images/c.jpg") && stderr.contains("truncated"),
        "{stderr}"
    );
}

#[test]
fn fetch_weights_without_network_fails_clearly_and_installs_nothing() {
    let dir = tempdir("fetch");
    let out = dir.join("weights");
    // Port 9 (discard) on the loopback interface refuses the connection: the download
    // fails exactly as it does on a machine without network access, without touching
    // any network.
    let output = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["fetch-weights", "resnet50", "--out"])
        .arg(&out)
        .env("DML_WEIGHTS_BASE_URL", "http://127.0.0.1:9")
        .output()
        .expect("run xtask");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("resnet50-0676ba61.pth") && stderr.contains("--from FILE"),
        "{stderr}"
    );
    assert!(leftovers(&out).is_empty(), "{:?}", leftovers(&out));
}
