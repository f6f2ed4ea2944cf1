//! `cargo xtask synth` on the command line: its defaults, and output (images, object masks
//! and manifest) byte-identical from run to run and to what the `dml-datasets` library
//! (which a training run calls on first use) writes for the same settings. The renderer itself is tested in `dml-datasets`.

use std::path::{Path, PathBuf};

use clap::Parser;
use dml_data::Manifest;
use dml_datasets::synth::{SynthConfig, generate};
use dml_testkit::read_tree;

/// A fresh directory under the system temp dir, deleted when dropped, so that tests
/// running in parallel (and repeated runs) never see each other's output.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = std::env::temp_dir().join(format!("xtask-synth-test-{name}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("cannot create temp dir");
        Self(dir)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `cargo xtask synth` in-process with the given flags.
fn synth_cli(out: &Path, flags: &[&str]) {
    let out_str = out.to_str().expect("utf-8 temp path");
    let mut args = vec!["xtask", "synth", "--out", out_str];
    args.extend(flags);
    let cli = xtask::Cli::try_parse_from(args).expect("arguments parse");
    xtask::run(cli).expect("cli run");
}

#[test]
fn defaults_parse_to_the_documented_values() {
    let defaults = xtask::Cli::try_parse_from(["xtask", "synth"]).expect("defaults parse");
    match defaults.command {
        xtask::Command::Synth(a) => {
            assert_eq!(a.out(), PathBuf::from("data/synth"));
            assert_eq!((a.n, a.seed, a.size, a.force, a.parts), (None, 0, 64, false, false));
            assert_eq!(a.config(), SynthConfig::default());
        }
        other => panic!("parsed as {other:?}"),
    }
}

#[test]
fn same_seed_is_byte_identical_and_matches_the_library() {
    let tmp = TempDir::new("cli");
    let flags = ["--n", "20", "--seed", "4", "--size", "24"];
    let (first, second) = (tmp.path().join("first"), tmp.path().join("second"));
    synth_cli(&first, &flags);
    synth_cli(&second, &flags);
    let manifest = Manifest::read(first.join("manifest.csv")).expect("valid manifest");
    assert_eq!(manifest.records.len(), 20);
    let image = image::open(manifest.image_path(&manifest.records[0])).expect("decodable image");
    assert_eq!((image.width(), image.height()), (24, 24));
    let tree = read_tree(&first);
    assert_eq!(tree.len(), 41, "20 images, their 20 masks and the manifest");
    let mask = dml_datasets::synth::read_mask(dml_datasets::synth::mask_path(
        &manifest.root,
        &manifest.records[0].path,
    ))
    .expect("readable mask");
    assert_eq!(mask.dimensions(), (24, 24));
    assert_eq!(tree, read_tree(&second), "the same seed must give byte-identical files");

    let config = SynthConfig {
        n: 20,
        seed: 4,
        size: 24,
    };
    let direct = generate(&config, &tmp.path().join("direct"), false).expect("library run");
    assert_eq!(tree, read_tree(&direct.root), "the CLI and the library must agree");
}

#[test]
fn bad_settings_are_refused_by_name() {
    let tmp = TempDir::new("bad");
    let out = tmp.path().join("out");
    let cli = xtask::Cli::try_parse_from(["xtask", "synth", "--out", out.to_str().unwrap(), "--size", "4"])
        .expect("arguments parse");
    let error = xtask::run(cli).expect_err("4 pixels is too small");
    assert!(format!("{error:#}").contains("size = 4"), "unhelpful error: {error:#}");
    assert!(!out.exists());
}

/// Runs `cargo xtask synth` in-process with `args` after the subcommand.
fn synth_args(args: &[&str]) -> anyhow::Result<()> {
    let cli = xtask::Cli::try_parse_from(["xtask", "synth"].iter().chain(args)).expect("arguments parse");
    xtask::run(cli)
}

#[test]
fn parts_set_matches_the_library_and_defaults_are_documented() {
    let defaults = xtask::Cli::try_parse_from(["xtask", "synth", "--parts"]).expect("defaults parse");
    match defaults.command {
        xtask::Command::Synth(a) => {
            assert_eq!(a.out(), PathBuf::from("data/synth-parts"));
            assert_eq!(a.parts_config(), dml_datasets::synth::parts::PartsConfig::default());
            assert_eq!(a.parts_config().n, 4000);
        }
        other => panic!("parsed as {other:?}"),
    }
    let tmp = TempDir::new("parts");
    let out = tmp.path().join("cli");
    let out_str = out.to_str().expect("utf-8");
    synth_args(&["--parts", "--n", "256", "--seed", "2", "--size", "48", "--out", out_str]).expect("cli run");
    let config = dml_datasets::synth::parts::PartsConfig {
        n: 256,
        seed: 2,
        size: 48,
    };
    let direct = dml_datasets::synth::parts::generate(&config, &tmp.path().join("direct"), false).expect("library");
    assert_eq!(
        read_tree(&out),
        read_tree(&direct.root),
        "the CLI and the library must agree"
    );
    assert_eq!(
        read_tree(&out).len(),
        2 * 256 + 1,
        "images, part masks and the manifest"
    );
}

#[test]
fn counterfactual_writes_the_library_render_and_names_bad_input() {
    use dml_datasets::synth::parts::{Edit, PartType, PartsConfig, Slot, render_counterfactual};
    let tmp = TempDir::new("counterfactual");
    let file = tmp.path().join("cf.png");
    let file_str = file.to_str().expect("utf-8");
    let set = ["--parts", "--n", "256", "--size", "48"];
    let with = |extra: &[&str]| -> Vec<String> { set.iter().chain(extra).map(|s| s.to_string()).collect() };
    let run = |extra: &[&str]| {
        let args = with(extra);
        synth_args(&args.iter().map(String::as_str).collect::<Vec<_>>())
    };
    run(&["--counterfactual", "9", "--swap", "tail=ring", "--out", file_str]).expect("swap");
    let written = image::open(&file).expect("decodable").to_rgb8();
    let config = PartsConfig {
        n: 256,
        seed: 0,
        size: 48,
    };
    let (expected, _) = render_counterfactual(&config, 9, Edit::Swap(Slot::Tail, PartType::Ring)).expect("library");
    assert_eq!(written, expected);

    let error = |extra: &[&str]| format!("{:#}", run(extra).expect_err("refused"));
    let e = error(&["--counterfactual", "9", "--remove", "tail", "--out", file_str]);
    assert!(e.contains("already exists") && e.contains("--force"), "{e}");
    assert_eq!(
        image::open(&file).expect("kept").to_rgb8(),
        expected,
        "the existing file was touched"
    );
    let other = tmp.path().join("other.png");
    let other_str = other.to_str().expect("utf-8");
    let e = error(&["--counterfactual", "9", "--remove", "wing", "--out", other_str]);
    assert!(
        e.contains("unknown slot \"wing\"") && e.contains("crest, front, sides, tail"),
        "{e}"
    );
    let e = error(&["--counterfactual", "9", "--swap", "tail=beak", "--out", other_str]);
    assert!(e.contains("unknown part type \"beak\""), "{e}");
    let e = error(&["--counterfactual", "256", "--remove", "tail", "--out", other_str]);
    assert!(e.contains("index = 256") && e.contains("outside the set of 256"), "{e}");
    let e = error(&["--counterfactual", "9", "--out", other_str]);
    assert!(e.contains("--remove SLOT or --swap SLOT=TYPE"), "{e}");
    let e = error(&[
        "--counterfactual",
        "9",
        "--remove",
        "tail",
        "--out",
        tmp.path().join("x.jpg").to_str().unwrap(),
    ]);
    assert!(e.contains("x.jpg") && e.contains("PNG"), "{e}");
    assert!(!other.exists());
    let leftovers: Vec<_> = std::fs::read_dir(tmp.path())
        .expect("dir")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(leftovers, vec![std::ffi::OsString::from("cf.png")], "no partial files");
    // --remove without --counterfactual is a usage error of the parser.
    assert!(xtask::Cli::try_parse_from(["xtask", "synth", "--parts", "--remove", "tail"]).is_err());
}

#[test]
fn parts_figure_is_written() {
    let tmp = TempDir::new("figure");
    let file = tmp.path().join("figure.png");
    synth_args(&["--parts", "--n", "256", "--figure", file.to_str().expect("utf-8")]).expect("figure");
    let figure = image::open(&file).expect("decodable");
    let tile = xtask::synth_figure::TILE;
    assert_eq!(
        (figure.width(), figure.height()),
        (8 * (tile + 4) - 4, 2 * (tile + 4) - 4)
    );
}
