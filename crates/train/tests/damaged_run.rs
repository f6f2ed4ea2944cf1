//! A damaged run gets a diagnosis, through the real binary: `train check` finds a sound run sound
//! and names the file and the damage of a truncated weight file, a `latest.json` naming a missing
//! checkpoint, a `metrics.jsonl` cut mid-line and a `config.toml` with a misspelt key; `eval` and
//! `--resume` name the same files, and a resume repairs the cut metrics file.

mod common;

use std::path::Path;
use std::process::{Command, Output};

fn cli(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_train")).args(args).output().unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn check_names_every_damage_and_resume_repairs_a_cut_metrics_line() {
    let runs = tempfile::tempdir().unwrap();
    let r = runs.path();
    let o = Command::new(env!("CARGO_BIN_EXE_train"))
        .args(common::cli_args(r, "sound", 40, &["--epochs", "2"]))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let sound = r.join("sound");
    let o = cli(&["check", sound.to_str().unwrap()]);
    assert!(o.status.success() && text(&o).contains("sound"), "{}", text(&o));
    let damaged = |name: &str, damage: &dyn Fn(&Path)| {
        let dir = r.join(name);
        common::copy_dir(&sound, &dir);
        damage(&dir);
        dir
    };

    let truncated = damaged("truncated", &|d| {
        let f = d.join("checkpoints/epoch-0002/model.bpk");
        let bytes = std::fs::read(&f).unwrap();
        std::fs::write(&f, &bytes[..bytes.len() / 2]).unwrap();
    });
    let o = cli(&["check", truncated.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("epoch-0002/model.bpk: cannot be read"),
        "{}",
        text(&o)
    );
    let o = cli(&["eval", truncated.to_str().unwrap(), "--checkpoint", "latest"]);
    assert!(!o.status.success() && text(&o).contains("model.bpk"), "{}", text(&o));

    let dangling = damaged("dangling", &|d| {
        std::fs::write(d.join("latest.json"), r#"{"checkpoint": "checkpoints/epoch-0009"}"#).unwrap();
    });
    let o = cli(&["check", dangling.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("latest.json") && text(&o).contains("epoch-0009"),
        "{}",
        text(&o)
    );

    let cut = damaged("cut", &|d| {
        let f = d.join("metrics.jsonl");
        let t = std::fs::read_to_string(&f).unwrap();
        std::fs::write(&f, &t[..t.len() - 20]).unwrap();
    });
    let o = cli(&["check", cut.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("metrics.jsonl: line 3 is not a record"),
        "{}",
        text(&o)
    );
    // `--resume` rewrites the file from the checkpoint's history and goes on.
    let o = Command::new(env!("CARGO_BIN_EXE_train"))
        .args(common::cli_args(r, "cut", 40, &["--epochs", "3", "--resume"]))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let o = cli(&["check", cut.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));

    let edited = damaged("edited", &|d| {
        let f = d.join("config.toml");
        let t = std::fs::read_to_string(&f).unwrap();
        std::fs::write(&f, t.replace("image_size = 24", "image_sise = 24")).unwrap();
    });
    let o = cli(&["check", edited.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("config.toml") && text(&o).contains("image_sise"),
        "{}",
        text(&o)
    );
}
