//! `xtask prepare sop` on miniature copies of Stanford_Online_Products (directory and zip).

mod common;

use std::path::{Path, PathBuf};

use common::{File, assert_err, assert_nothing_written, assert_same_bytes, prepare, read_rows, s, temp_dir};
use dml_data::Split;

const HEADER: &str = "image_id class_id super_class_id path";

/// The miniature's products: class id, super-class id, super-class directory, product
/// id, number of images. Classes 1–11,318 are training classes and 11,319–22,634 test
/// classes, as in the official lists.
const PRODUCTS: [(u32, u32, &str, &str, u32); 5] = [
    (1, 1, "bicycle_final", "111085122871", 2),
    (2, 1, "bicycle_final", "111265328556", 3),
    (11_318, 7, "chair_final", "360825367389", 2),
    (11_319, 8, "coffee_maker_final", "121089548218", 2),
    (22_634, 12, "toaster_final", "400612648396", 3),
];

/// `(path, class id, class name, split)` per image, in list order.
fn images() -> Vec<(String, u32, String, Split)> {
    let mut out = Vec::new();
    for (class, _, dir, product, n) in PRODUCTS {
        for k in 0..n {
            let split = if class <= 11_318 { Split::Train } else { Split::Test };
            out.push((
                format!("{dir}/{product}_{k}.JPG"),
                class,
                format!("{dir}/{product}"),
                split,
            ));
        }
    }
    out
}

/// The text of `Ebay_train.txt` or `Ebay_test.txt` for the miniature.
fn list(split: Split) -> String {
    let mut lines = vec![HEADER.to_string()];
    for (path, class, ..) in images().into_iter().filter(|i| i.3 == split) {
        let superclass = PRODUCTS.iter().find(|p| p.0 == class).unwrap().1;
        lines.push(format!("{} {class} {superclass} {path}", lines.len()));
    }
    lines.join("\n") + "\n"
}

/// The files of the official zip, below `Stanford_Online_Products/`, with the lists
/// given (`None` for the official ones).
fn sop_files(train: Option<&str>, test: Option<&str>) -> Vec<File> {
    let mut files: Vec<File> = vec![
        (
            "Stanford_Online_Products/Ebay_train.txt".into(),
            train.map_or_else(|| list(Split::Train), str::to_string).into_bytes(),
        ),
        (
            "Stanford_Online_Products/Ebay_test.txt".into(),
            test.map_or_else(|| list(Split::Test), str::to_string).into_bytes(),
        ),
        (
            "Stanford_Online_Products/Ebay_info.txt".into(),
            b"image_id class_id super_class_id path\n".to_vec(),
        ),
        (
            "Stanford_Online_Products/README".into(),
            b"Stanford Online Products\n".to_vec(),
        ),
    ];
    for (i, (path, ..)) in images().into_iter().enumerate() {
        files.push((format!("Stanford_Online_Products/{path}"), common::jpeg(i as u32)));
    }
    // A file that no list mentions: it must be ignored.
    files.push((
        "Stanford_Online_Products/bicycle_final/999_0.JPG".into(),
        common::jpeg(77),
    ));
    files
}

fn expected_rows() -> Vec<(String, u32, String, Split)> {
    images()
        .into_iter()
        .map(|(path, class, name, split)| (format!("images/{path}"), class, name, split))
        .collect()
}

/// The miniature as `Stanford_Online_Products.zip`; returns the archive and an output path.
fn zip(files: &[File]) -> (PathBuf, PathBuf) {
    let dir = temp_dir("sop-zip");
    let archive = dir.join("Stanford_Online_Products.zip");
    common::write_zip(&archive, files);
    (archive, dir.join("out"))
}

/// The miniature extracted; returns the `Stanford_Online_Products` directory and an
/// output path.
fn tree(files: &[File]) -> (PathBuf, PathBuf) {
    let dir = temp_dir("sop-dir");
    common::write_tree(&dir.join("src"), files);
    (dir.join("src/Stanford_Online_Products"), dir.join("out"))
}

fn prepare_sop(src: &Path, out: &Path, extra: &[&str]) -> Result<(), String> {
    let mut args = vec!["sop", "--src", s(src), "--out", s(out)];
    args.extend_from_slice(extra);
    prepare(&args)
}

fn assert_copied(files: &[File], out: &Path) {
    let pairs: Vec<(String, String)> = images()
        .into_iter()
        .map(|(path, ..)| (format!("Stanford_Online_Products/{path}"), format!("images/{path}")))
        .collect();
    let pairs: Vec<(&str, &str)> = pairs.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    assert_same_bytes(files, out, &pairs);
    assert!(!out.join("images/bicycle_final/999_0.JPG").exists());
}

#[test]
fn directory_gives_the_official_train_and_test_lists() {
    let files = sop_files(None, None);
    let (src, out) = tree(&files);
    prepare_sop(&src, &out, &["--no-verify-counts"]).unwrap();
    assert_eq!(read_rows(&out), expected_rows());
    assert_copied(&files, &out);

    // The directory holding Stanford_Online_Products/ is accepted too.
    let out_parent = out.with_file_name("out-parent");
    prepare_sop(src.parent().unwrap(), &out_parent, &["--no-verify-counts"]).unwrap();
    assert_eq!(read_rows(&out_parent), expected_rows());
}

#[test]
fn zip_gives_the_same_manifest() {
    let files = sop_files(None, None);
    let (archive, out) = zip(&files);
    prepare_sop(&archive, &out, &["--no-verify-counts"]).unwrap();
    assert_eq!(read_rows(&out), expected_rows());
    assert_copied(&files, &out);
}

#[test]
fn official_counts_are_checked_by_default() {
    let (archive, out) = zip(&sop_files(None, None));
    assert_err(
        prepare_sop(&archive, &out, &[]),
        &[
            "sop",
            "expected 59551 images, found 7",
            "expected 60502 images, found 5",
        ],
    );
    assert_nothing_written(&out);
}

#[test]
fn val_classes_holds_out_the_last_training_class() {
    let (src, out) = tree(&sop_files(None, None));
    prepare_sop(&src, &out, &["--no-verify-counts", "--val-classes", "1"]).unwrap();
    let want: Vec<_> = expected_rows()
        .into_iter()
        .map(|(p, c, n, split)| (p, c, n, if c == 11_318 { Split::Val } else { split }))
        .collect();
    assert_eq!(read_rows(&out), want);
}

#[test]
fn truncated_or_corrupt_zip_names_the_archive_and_leaves_nothing() {
    let (archive, out) = zip(&sop_files(None, None));
    common::truncate(&archive, 0.6);
    assert_err(
        prepare_sop(&archive, &out, &["--no-verify-counts"]),
        &[s(&archive), "truncated or corrupt"],
    );
    assert_nothing_written(&out);

    // Damaged member data: the central directory is intact, the images are not.
    let (archive, out) = zip(&sop_files(None, None));
    let mut bytes = std::fs::read(&archive).unwrap();
    let middle = bytes.len() / 2;
    for b in &mut bytes[middle..middle + 64] {
        *b ^= 0x5A;
    }
    std::fs::write(&archive, bytes).unwrap();
    assert_err(
        prepare_sop(&archive, &out, &["--no-verify-counts"]),
        &[s(&archive), "truncated or corrupt"],
    );
    assert_nothing_written(&out);
}

#[test]
fn missing_images_are_named() {
    let gone = "Stanford_Online_Products/toaster_final/400612648396_1.JPG";
    let files: Vec<File> = sop_files(None, None).into_iter().filter(|(n, _)| n != gone).collect();
    let (archive, out) = zip(&files);
    assert_err(
        prepare_sop(&archive, &out, &["--no-verify-counts"]),
        &[s(&archive), "1 listed file(s) are missing", gone],
    );
    assert_nothing_written(&out);
}

#[test]
fn corrupt_jpegs_are_named() {
    let mut files = sop_files(None, None);
    let bad = "bicycle_final/111265328556_2.JPG";
    for (name, bytes) in &mut files {
        if name.ends_with(bad) {
            *bytes = common::garbage_jpeg(5);
        }
    }
    let (src, out) = tree(&files);
    assert_err(
        prepare_sop(&src, &out, &["--no-verify-counts"]),
        &["1 of 12 images cannot be decoded", &format!("images/{bad}")],
    );
    assert_nothing_written(&out);
}

#[test]
fn malformed_lists_name_the_file_and_line() {
    let train = format!("{HEADER}\n1 1 1 bicycle_final/111085122871_0.JPG\n2 1 bicycle_final/111085122871_1.JPG\n");
    let (archive, out) = zip(&sop_files(Some(&train), None));
    assert_err(
        prepare_sop(&archive, &out, &["--no-verify-counts"]),
        &["Stanford_Online_Products/Ebay_train.txt:3: expected '<image_id> <class_id> <super_class_id> <path>'"],
    );
    assert_nothing_written(&out);

    let (src, out) = tree(&sop_files(Some("id class path\n"), None));
    assert_err(
        prepare_sop(&src, &out, &["--no-verify-counts"]),
        &["Ebay_train.txt:1: expected the header 'image_id class_id super_class_id path'"],
    );

    // A class in both lists breaks the class-disjoint protocol.
    let test = format!("{HEADER}\n1 2 1 bicycle_final/111265328556_0.JPG\n");
    let (src, out) = tree(&sop_files(None, Some(&test)));
    assert_err(
        prepare_sop(&src, &out, &["--no-verify-counts"]),
        &["Ebay_test.txt:2: image \"bicycle_final/111265328556_0.JPG\" is already listed at"],
    );
    let test = format!("{HEADER}\n1 2 1 bicycle_final/111265328556_9.JPG\n");
    let (src, out) = tree(&sop_files(None, Some(&test)));
    assert_err(
        prepare_sop(&src, &out, &["--no-verify-counts"]),
        &["Ebay_test.txt:2: class 2 is also listed at", "Ebay_train.txt:4"],
    );
}

#[test]
fn existing_output_needs_force() {
    let (archive, out) = zip(&sop_files(None, None));
    prepare_sop(&archive, &out, &["--no-verify-counts"]).unwrap();
    assert_err(
        prepare_sop(&archive, &out, &["--no-verify-counts"]),
        &["already exists", "--force"],
    );
    prepare_sop(&archive, &out, &["--no-verify-counts", "--force"]).unwrap();
}
