//! A folder of class subfolders is a dataset, through the real binary: `--dataset DIR` trains and
//! evaluates on it (classes sorted by name, the first half train, the rest test) with no manifest
//! written into it, and `eval` reads it again; a folder with a one-image class is refused naming
//! the class folder; a plain name that is a folder here says to give it as a path.

use std::path::Path;
use std::process::Command;

fn image(path: &Path, shade: u8) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    image::RgbImage::from_fn(20, 20, |x, y| image::Rgb([shade, (x * 9) as u8, (y * 9) as u8]))
        .save(path)
        .unwrap();
}

#[test]
fn a_folder_of_class_folders_trains_and_a_bad_one_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("mypngs");
    for (c, class) in ["apple", "bear", "cloud", "dune", "elm", "fig"].iter().enumerate() {
        for i in 0..6 {
            image(&data.join(format!("{class}/{i}.png")), (c * 40 + i * 3) as u8);
        }
    }
    let bin = env!("CARGO_BIN_EXE_train");
    let run = |extra: &[&str]| {
        let mut a = vec![
            "--quiet",
            "--run-dir",
            dir.path().to_str().unwrap(),
            "--dataset",
            data.to_str().unwrap(),
            "--set",
            "data.image_size=16",
            "--set",
            "train.batch_size=6",
            "--set",
            "train.m=2",
            "--set",
            "train.samples_per_epoch=12",
            "--set",
            "model.embedding_dim=8",
            "--set",
            "data.augment=false",
            "--epochs",
            "1",
        ];
        a.extend_from_slice(extra);
        Command::new(bin).args(&a).output().unwrap()
    };
    let o = run(&["--name", "folder"]);
    let out = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "{out}");
    assert!(out.contains("P@1"), "{out}");
    assert!(
        !data.join("manifest.csv").exists(),
        "a manifest was written into the user's folder"
    );
    let o = Command::new(bin)
        .args([
            "eval",
            dir.path().join("folder").to_str().unwrap(),
            "--checkpoint",
            "latest",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    std::fs::remove_file(data.join("fig/1.png")).unwrap();
    for i in 2..6 {
        std::fs::remove_file(data.join(format!("fig/{i}.png"))).unwrap();
    }
    let o = run(&["--name", "bad"]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(e.contains("mypngs/fig: holds 1 image(s)"), "{e}");

    let o = Command::new(bin)
        .current_dir(dir.path())
        .args(["--dataset", "mypngs", "--epochs", "1"])
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && e.contains("give it as a path: ./mypngs"), "{e}");
}
