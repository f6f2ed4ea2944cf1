//! `xtask prepare inshop` on miniature copies of the In-shop Clothes Retrieval benchmark,
//! in each accepted layout: `list_eval_partition.txt` at the top or in `Eval/`, images in
//! `img/`, `Img/img/`, `img.zip` or `Img/img.zip`.

mod common;

use std::path::{Path, PathBuf};

use common::{File, assert_err, assert_nothing_written, assert_same_bytes, prepare, read_rows, s, temp_dir};
use dml_data::Split;

const HEADER: &str = "image_name item_id evaluation_status";

/// The miniature's images: path as listed, item id, status. Items 1, 3 and 4 are
/// training items; 2 and 5 have query and gallery images; 6 only gallery images.
const IMAGES: [(&str, &str, &str); 15] = [
    ("img/MEN/Denim/id_00000001/01_1_front.jpg", "id_00000001", "train"),
    ("img/MEN/Denim/id_00000001/01_2_side.jpg", "id_00000001", "train"),
    ("img/WOMEN/Dresses/id_00000002/02_1_front.jpg", "id_00000002", "query"),
    ("img/WOMEN/Dresses/id_00000002/02_2_side.jpg", "id_00000002", "gallery"),
    ("img/WOMEN/Dresses/id_00000002/02_4_full.jpg", "id_00000002", "gallery"),
    ("img/WOMEN/Dresses/id_00000003/03_1_front.jpg", "id_00000003", "train"),
    ("img/WOMEN/Dresses/id_00000003/03_2_side.jpg", "id_00000003", "train"),
    ("img/WOMEN/Dresses/id_00000003/03_3_back.jpg", "id_00000003", "train"),
    (
        "img/WOMEN/Blouses_Shirts/id_00000004/01_1_front.jpg",
        "id_00000004",
        "train",
    ),
    (
        "img/WOMEN/Blouses_Shirts/id_00000004/01_7_additional.jpg",
        "id_00000004",
        "train",
    ),
    ("img/MEN/Tees_Tanks/id_00000005/01_1_front.jpg", "id_00000005", "query"),
    ("img/MEN/Tees_Tanks/id_00000005/01_2_side.jpg", "id_00000005", "query"),
    ("img/MEN/Tees_Tanks/id_00000005/01_3_back.jpg", "id_00000005", "gallery"),
    (
        "img/MEN/Tees_Tanks/id_00000006/02_1_front.jpg",
        "id_00000006",
        "gallery",
    ),
    ("img/MEN/Tees_Tanks/id_00000006/02_2_side.jpg", "id_00000006", "gallery"),
];

/// The official list for `rows` (path, item, status), with its image count first and
/// padded with spaces the way the real file is.
fn list(rows: &[(&str, &str, &str)]) -> String {
    let mut text = format!("{}\n{HEADER}\n", rows.len());
    for (path, item, status) in rows {
        text.push_str(&format!("{path:<60} {item}   {status}\n"));
    }
    text
}

/// The images as files named by their listed paths (`img/...`).
fn image_files() -> Vec<File> {
    IMAGES
        .iter()
        .enumerate()
        .map(|(i, (path, ..))| (path.to_string(), common::jpeg(i as u32)))
        .collect()
}

fn expected_rows() -> Vec<(String, u32, String, Split)> {
    IMAGES
        .iter()
        .map(|(path, item, status)| {
            let id = item.trim_start_matches("id_").parse().unwrap();
            (
                format!("images/{}", &path[4..]),
                id,
                item.to_string(),
                status.parse().unwrap(),
            )
        })
        .collect()
}

/// Where the miniature keeps its images.
#[derive(Clone, Copy, Debug)]
enum Images {
    /// `<src>/img/...`
    Dir,
    /// `<src>/Img/img/...`
    ImgDir,
    /// `<src>/img.zip`
    Zip,
    /// `<src>/Img/img.zip`
    ImgZip,
}

/// Writes a miniature benchmark directory; returns it and an output path.
fn benchmark(list_text: &str, list_in_eval: bool, images: Images, files: &[File]) -> (PathBuf, PathBuf) {
    let dir = temp_dir("inshop");
    let src = dir.join("In-shop Clothes Retrieval Benchmark");
    let list_dir = if list_in_eval { src.join("Eval") } else { src.clone() };
    std::fs::create_dir_all(&list_dir).unwrap();
    std::fs::write(list_dir.join("list_eval_partition.txt"), list_text).unwrap();
    // The real benchmark has more annotation files; they must be ignored.
    std::fs::create_dir_all(src.join("Anno")).unwrap();
    std::fs::write(src.join("Anno/list_item_inshop.txt"), "6\nid_00000001\n").unwrap();
    match images {
        Images::Dir => common::write_tree(&src, files),
        Images::ImgDir => common::write_tree(&src.join("Img"), files),
        Images::Zip => common::write_zip(&src.join("img.zip"), files),
        Images::ImgZip => {
            std::fs::create_dir_all(src.join("Img")).unwrap();
            common::write_zip(&src.join("Img/img.zip"), files);
        }
    }
    (src, dir.join("out"))
}

fn prepare_inshop(src: &Path, out: &Path, extra: &[&str]) -> Result<(), String> {
    let mut args = vec!["inshop", "--src", s(src), "--out", s(out)];
    args.extend_from_slice(extra);
    prepare(&args)
}

#[test]
fn every_layout_gives_the_official_splits() {
    let files = image_files();
    let layouts = [
        (false, Images::Dir),
        (true, Images::Zip),
        (true, Images::ImgDir),
        (false, Images::ImgZip),
    ];
    for (list_in_eval, images) in layouts {
        let (src, out) = benchmark(&list(&IMAGES), list_in_eval, images, &files);
        prepare_inshop(&src, &out, &["--no-verify-counts"]).unwrap_or_else(|e| panic!("{images:?}: {e}"));
        assert_eq!(read_rows(&out), expected_rows(), "{images:?}");
        let renamed: Vec<(&str, String)> = IMAGES
            .iter()
            .map(|(p, ..)| (*p, format!("images/{}", &p[4..])))
            .collect();
        let renamed: Vec<(&str, &str)> = renamed.iter().map(|(a, b)| (*a, b.as_str())).collect();
        assert_same_bytes(&files, &out, &renamed);
    }
}

#[test]
fn official_counts_are_checked_by_default() {
    let (src, out) = benchmark(&list(&IMAGES), true, Images::Zip, &image_files());
    assert_err(
        prepare_inshop(&src, &out, &[]),
        &[
            "inshop",
            "train: expected 25882 images, found 7",
            "query: expected 14218 images, found 3",
            "gallery: expected 12612 images, found 5",
        ],
    );
    assert_nothing_written(&out);
}

#[test]
fn val_classes_holds_out_the_last_training_item() {
    let (src, out) = benchmark(&list(&IMAGES), false, Images::Dir, &image_files());
    prepare_inshop(&src, &out, &["--no-verify-counts", "--val-classes", "1"]).unwrap();
    let want: Vec<_> = expected_rows()
        .into_iter()
        .map(|(p, c, n, split)| (p, c, n, if c == 4 { Split::Val } else { split }))
        .collect();
    assert_eq!(read_rows(&out), want);
}

#[test]
fn the_announced_count_must_match_the_rows() {
    let text = list(&IMAGES).replacen("15\n", "16\n", 1);
    let (src, out) = benchmark(&text, true, Images::Dir, &image_files());
    assert_err(
        prepare_inshop(&src, &out, &["--no-verify-counts"]),
        &["Eval/list_eval_partition.txt:1: the first line announces 16 images but 15 are listed"],
    );
    assert_nothing_written(&out);
}

#[test]
fn a_training_item_with_one_image_is_named() {
    let rows: Vec<_> = IMAGES
        .iter()
        .copied()
        .filter(|r| r.0 != "img/MEN/Denim/id_00000001/01_2_side.jpg")
        .collect();
    let (src, out) = benchmark(&list(&rows), true, Images::Dir, &image_files());
    assert_err(
        prepare_inshop(&src, &out, &["--no-verify-counts"]),
        &["list_eval_partition.txt:3: training item id_00000001 has a single image"],
    );
    assert_nothing_written(&out);
}

#[test]
fn malformed_rows_name_the_file_and_line() {
    let mut rows = IMAGES.to_vec();
    rows[4].2 = "galery";
    let (src, out) = benchmark(&list(&rows), false, Images::Dir, &image_files());
    assert_err(
        prepare_inshop(&src, &out, &["--no-verify-counts"]),
        &["list_eval_partition.txt:7: evaluation status \"galery\" is not train, query or gallery"],
    );
    let text = list(&IMAGES).replace("02_4_full.jpg", "02_4_full.jpg extra");
    let (src, out) = benchmark(&text, false, Images::Dir, &image_files());
    assert_err(
        prepare_inshop(&src, &out, &["--no-verify-counts"]),
        &["list_eval_partition.txt:7: expected '<image_name> <item_id> <evaluation_status>'"],
    );
    let text = list(&IMAGES).replace(HEADER, "image item status");
    let (src, out) = benchmark(&text, false, Images::Dir, &image_files());
    assert_err(
        prepare_inshop(&src, &out, &["--no-verify-counts"]),
        &["list_eval_partition.txt:2: expected the header"],
    );
    assert_nothing_written(&out);
}

#[test]
fn missing_images_are_named() {
    let gone = "img/WOMEN/Dresses/id_00000003/03_3_back.jpg";
    let files: Vec<File> = image_files().into_iter().filter(|(n, _)| n != gone).collect();
    for images in [Images::ImgDir, Images::Zip] {
        let (src, out) = benchmark(&list(&IMAGES), true, images, &files);
        assert_err(
            prepare_inshop(&src, &out, &["--no-verify-counts"]),
            &["1 listed file(s) are missing", gone],
        );
        assert_nothing_written(&out);
    }
}

#[test]
fn corrupt_image_zip_names_the_archive() {
    let (src, out) = benchmark(&list(&IMAGES), true, Images::ImgZip, &image_files());
    let archive = src.join("Img/img.zip");
    common::truncate(&archive, 0.5);
    assert_err(
        prepare_inshop(&src, &out, &["--no-verify-counts"]),
        &[s(&archive), "truncated or corrupt"],
    );
    assert_nothing_written(&out);
}

#[test]
fn corrupt_jpegs_are_named() {
    let bad = "img/MEN/Tees_Tanks/id_00000005/01_2_side.jpg";
    let files: Vec<File> = image_files()
        .into_iter()
        .map(|(n, b)| {
            if n == bad {
                (n, common::truncated_jpeg(3))
            } else {
                (n, b)
            }
        })
        .collect();
    let (src, out) = benchmark(&list(&IMAGES), true, Images::Zip, &files);
    assert_err(
        prepare_inshop(&src, &out, &["--no-verify-counts"]),
        &[
            "1 of 15 images cannot be decoded",
            "images/MEN/Tees_Tanks/id_00000005/01_2_side.jpg",
            "truncated JPEG",
        ],
    );
    assert_nothing_written(&out);
}

#[test]
fn missing_list_or_images_are_explained() {
    let (src, out) = benchmark(&list(&IMAGES), true, Images::Dir, &image_files());
    std::fs::remove_file(src.join("Eval/list_eval_partition.txt")).unwrap();
    assert_err(
        prepare_inshop(&src, &out, &["--no-verify-counts"]),
        &["neither list_eval_partition.txt nor Eval/list_eval_partition.txt exists"],
    );
    let (src, out) = benchmark(&list(&IMAGES), true, Images::Dir, &image_files());
    std::fs::remove_dir_all(src.join("img")).unwrap();
    assert_err(
        prepare_inshop(&src, &out, &["--no-verify-counts"]),
        &["expected img/, Img/img/, img.zip or Img/img.zip"],
    );
    assert_nothing_written(&out);
}

#[test]
fn existing_output_needs_force() {
    let (src, out) = benchmark(&list(&IMAGES), false, Images::Dir, &image_files());
    prepare_inshop(&src, &out, &["--no-verify-counts"]).unwrap();
    assert_err(
        prepare_inshop(&src, &out, &["--no-verify-counts"]),
        &["already exists", "--force"],
    );
    prepare_inshop(&src, &out, &["--no-verify-counts", "--force"]).unwrap();
}
