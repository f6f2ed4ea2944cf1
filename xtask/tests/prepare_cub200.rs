//! `xtask prepare cub200` on miniature copies of CUB_200_2011.tgz and its directory.

mod common;

use std::path::{Path, PathBuf};

use common::{File, assert_err, assert_nothing_written, assert_same_bytes, prepare, read_rows, s, temp_dir};
use dml_data::Split;

/// The miniature's classes: both sides of the train/test boundary (100 | 101) and the
/// extremes, plus class 3, which has no image and must not appear.
const CLASSES: [(u32, &str); 7] = [
    (1, "Black_footed_Albatross"),
    (2, "Laysan_Albatross"),
    (3, "Sooty_Albatross"),
    (100, "Brown_Pelican"),
    (101, "White_Pelican"),
    (102, "Western_Wood_Pewee"),
    (200, "Common_Yellowthroat"),
];

/// Images per class (class 3 has none).
fn images_per_class(class: u32) -> u32 {
    match class {
        3 => 0,
        2 | 101 => 3,
        _ => 2,
    }
}

/// One image of the miniature: id, class id, class name, path below images/.
struct Image {
    id: u32,
    class: u32,
    name: &'static str,
    path: String,
}

fn images() -> Vec<Image> {
    let mut images = Vec::new();
    for (class, name) in CLASSES {
        for k in 0..images_per_class(class) {
            let id = images.len() as u32 + 1;
            let file = format!("{}_{:04}_{}.jpg", name, k + 1, 796_000 + id);
            images.push(Image {
                id,
                class,
                name,
                path: format!("{class:03}.{name}/{file}"),
            });
        }
    }
    images
}

/// The files of the official archive, below `CUB_200_2011/` (plus the top-level
/// `attributes.txt` the real archive has), with `images.txt` replaced by `images_txt`
/// when given.
fn cub_files(images_txt: Option<&str>) -> Vec<File> {
    let images = images();
    let text = |lines: Vec<String>| lines.join("\n").into_bytes();
    let mut files: Vec<File> = vec![
        (
            "CUB_200_2011/images.txt".into(),
            match images_txt {
                Some(t) => t.as_bytes().to_vec(),
                None => text(images.iter().map(|i| format!("{} {}", i.id, i.path)).collect()),
            },
        ),
        (
            "CUB_200_2011/image_class_labels.txt".into(),
            text(images.iter().map(|i| format!("{} {}", i.id, i.class)).collect()),
        ),
        (
            "CUB_200_2011/classes.txt".into(),
            text(CLASSES.iter().map(|(c, n)| format!("{c} {c:03}.{n}")).collect()),
        ),
        (
            "CUB_200_2011/train_test_split.txt".into(),
            text(images.iter().map(|i| format!("{} {}", i.id, i.id % 2)).collect()),
        ),
        ("CUB_200_2011/bounding_boxes.txt".into(), b"1 0 0 10 10\n".to_vec()),
        (
            "CUB_200_2011/attributes/certainties.txt".into(),
            b"1 not visible\n".to_vec(),
        ),
        ("attributes.txt".into(), b"1 has_bill_shape::curved\n".to_vec()),
    ];
    for image in &images {
        files.push((format!("CUB_200_2011/images/{}", image.path), common::jpeg(image.id)));
    }
    // An image in the archive that no list mentions: it must be ignored.
    files.push((
        "CUB_200_2011/images/001.Black_footed_Albatross/unlisted.jpg".into(),
        common::jpeg(99),
    ));
    files
}

/// The manifest rows the miniature must give.
fn expected_rows() -> Vec<(String, u32, String, Split)> {
    images()
        .into_iter()
        .map(|i| {
            let split = if i.class <= 100 { Split::Train } else { Split::Test };
            (format!("images/{}", i.path), i.class, i.name.to_string(), split)
        })
        .collect()
}

/// Writes the miniature as a `.tgz` in a fresh directory; returns the archive and the
/// output path to use.
fn tgz(files: &[File]) -> (PathBuf, PathBuf) {
    let dir = temp_dir("cub-tgz");
    let archive = dir.join("CUB_200_2011.tgz");
    common::write_tgz(&archive, files);
    (archive, dir.join("out"))
}

/// Writes the miniature as an extracted tree in a fresh directory; returns the directory
/// holding `CUB_200_2011/` and the output path to use.
fn tree(files: &[File]) -> (PathBuf, PathBuf) {
    let dir = temp_dir("cub-dir");
    common::write_tree(&dir.join("src"), files);
    (dir.join("src"), dir.join("out"))
}

fn prepare_cub(src: &Path, out: &Path, extra: &[&str]) -> Result<(), String> {
    let mut args = vec!["cub200", "--src", s(src), "--out", s(out)];
    args.extend_from_slice(extra);
    prepare(&args)
}

fn assert_copied(files: &[File], out: &Path) {
    let pairs: Vec<(String, String)> = images()
        .iter()
        .map(|i| (format!("CUB_200_2011/images/{}", i.path), format!("images/{}", i.path)))
        .collect();
    let pairs: Vec<(&str, &str)> = pairs.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    assert_same_bytes(files, out, &pairs);
    assert!(!out.join("images/001.Black_footed_Albatross/unlisted.jpg").exists());
}

#[test]
fn tgz_gives_classes_1_to_100_as_train_and_101_to_200_as_test() {
    let files = cub_files(None);
    let (archive, out) = tgz(&files);
    prepare_cub(&archive, &out, &["--no-verify-counts"]).unwrap();
    assert_eq!(read_rows(&out), expected_rows());
    assert_copied(&files, &out);
}

#[test]
fn extracted_directory_and_its_parent_are_accepted() {
    let files = cub_files(None);
    let (src, out) = tree(&files);
    prepare_cub(&src.join("CUB_200_2011"), &out, &["--no-verify-counts"]).unwrap();
    assert_eq!(read_rows(&out), expected_rows());
    assert_copied(&files, &out);

    let out_parent = out.with_file_name("out-parent");
    prepare_cub(&src, &out_parent, &["--no-verify-counts"]).unwrap();
    assert_eq!(read_rows(&out_parent), expected_rows());
    assert_copied(&files, &out_parent);
}

#[test]
fn official_counts_are_checked_by_default() {
    let (archive, out) = tgz(&cub_files(None));
    assert_err(
        prepare_cub(&archive, &out, &[]),
        &[
            "cub200",
            "expected 5864 images, found 7",
            "expected 5924 images, found 7",
            "--no-verify-counts",
        ],
    );
    assert_nothing_written(&out);
}

#[test]
fn val_classes_holds_out_the_last_training_class() {
    let (archive, out) = tgz(&cub_files(None));
    prepare_cub(&archive, &out, &["--no-verify-counts", "--val-classes", "1"]).unwrap();
    let want: Vec<_> = expected_rows()
        .into_iter()
        .map(|(p, c, n, split)| (p, c, n, if c == 100 { Split::Val } else { split }))
        .collect();
    assert_eq!(read_rows(&out), want);
}

#[test]
fn truncated_tgz_names_the_archive_and_leaves_nothing() {
    for fraction in [0.005, 0.3, 0.7, 0.97] {
        let (archive, out) = tgz(&cub_files(None));
        common::truncate(&archive, fraction);
        assert_err(
            prepare_cub(&archive, &out, &["--no-verify-counts"]),
            &[s(&archive), "truncated or corrupt"],
        );
        assert_nothing_written(&out);
    }
}

#[test]
fn missing_images_are_named() {
    let files = cub_files(None);
    let (src, out) = tree(&files);
    let gone = "CUB_200_2011/images/101.White_Pelican/White_Pelican_0002_796009.jpg";
    std::fs::remove_file(src.join(gone)).unwrap();
    assert_err(
        prepare_cub(&src, &out, &["--no-verify-counts"]),
        &["1 listed file(s) are missing", gone],
    );
    assert_nothing_written(&out);

    // The same image missing from the archive.
    let files: Vec<File> = files.into_iter().filter(|(n, _)| n != gone).collect();
    let (archive, out) = tgz(&files);
    assert_err(
        prepare_cub(&archive, &out, &["--no-verify-counts"]),
        &[s(&archive), "1 listed file(s) are missing", gone],
    );
    assert_nothing_written(&out);
}

#[test]
fn corrupt_jpegs_are_named() {
    let mut files = cub_files(None);
    let truncated = "images/002.Laysan_Albatross/Laysan_Albatross_0001_796003.jpg";
    let garbage = "images/200.Common_Yellowthroat/Common_Yellowthroat_0002_796014.jpg";
    for (name, bytes) in &mut files {
        if name.ends_with(truncated) {
            *bytes = common::truncated_jpeg(1);
        } else if name.ends_with(garbage) {
            *bytes = common::garbage_jpeg(2);
        }
    }
    let (archive, out) = tgz(&files);
    assert_err(
        prepare_cub(&archive, &out, &["--no-verify-counts"]),
        &[
            "2 of 14 images",
            "cannot be decoded",
            truncated,
            garbage,
            "truncated JPEG",
            "corrupt JPEG",
        ],
    );
    assert_nothing_written(&out);
}

#[test]
fn malformed_lines_name_the_file_and_line() {
    let bad = "1 001.Black_footed_Albatross/Black_footed_Albatross_0001_796001.jpg\n2 x.jpg\nthree x.jpg\n";
    let (archive, out) = tgz(&cub_files(Some(bad)));
    assert_err(
        prepare_cub(&archive, &out, &["--no-verify-counts"]),
        &["CUB_200_2011/images.txt:3: expected '<image_id> <path>'", "three"],
    );
    assert_nothing_written(&out);

    let duplicate = "1 a/x.jpg\n2 a/y.jpg\n1 a/z.jpg\n";
    let (src, out) = tree(&cub_files(Some(duplicate)));
    assert_err(
        prepare_cub(&src, &out, &["--no-verify-counts"]),
        &["images.txt:3: duplicate image id 1 (first on line 1)"],
    );

    // A label file that mentions an image images.txt does not list.
    let short = "1 001.Black_footed_Albatross/Black_footed_Albatross_0001_796001.jpg\n";
    let (src, out) = tree(&cub_files(Some(short)));
    assert_err(
        prepare_cub(&src, &out, &["--no-verify-counts"]),
        &["image_class_labels.txt:2: image id 2 is not listed in"],
    );
}

#[test]
fn existing_output_needs_force() {
    let (archive, out) = tgz(&cub_files(None));
    prepare_cub(&archive, &out, &["--no-verify-counts"]).unwrap();
    assert_err(
        prepare_cub(&archive, &out, &["--no-verify-counts"]),
        &["already exists", "--force"],
    );
    prepare_cub(&archive, &out, &["--no-verify-counts", "--force", "--val-classes", "1"]).unwrap();
    assert!(read_rows(&out).iter().any(|r| r.3 == Split::Val));
}

#[test]
fn a_source_that_is_not_cub_is_rejected() {
    let dir = temp_dir("cub-other");
    std::fs::write(dir.join("notes.txt"), "hello").unwrap();
    assert_err(
        prepare_cub(&dir, &dir.join("out"), &["--no-verify-counts"]),
        &["holds neither CUB_200_2011/images.txt nor images.txt"],
    );
    assert_err(
        prepare_cub(&dir.join("notes.txt"), &dir.join("out"), &["--no-verify-counts"]),
        &["notes.txt is neither a directory nor a recognised archive"],
    );
    assert_nothing_written(&dir.join("out"));
}
