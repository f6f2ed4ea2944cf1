//! End-to-end tests of `cargo xtask prepare cars196` on miniature datasets in the
//! official layout: a `cars_annos.mat` written by a minimal MAT v5 writer below (or by
//! scipy, see `fixtures/cars_annos_scipy.mat`), and small real JPEGs as `car_ims.tgz` or
//! an extracted `car_ims/` directory.

use std::io::Cursor;
use std::path::{Path, PathBuf};

use clap::Parser;
use dml_data::{Manifest, Split};
use xtask::prepare::mat::{self, MatValue, NumericClass};

/// A minimal writer of Level 5 MAT-files as MATLAB writes them: little-endian, doubles
/// stored in the narrowest unsigned type that holds them (`miUINT8`, `miUINT16`), text
/// as `miUINT16`, names of up to four bytes as small data elements, and optionally every
/// variable wrapped in an `miCOMPRESSED` element.
mod matfile {
    use std::io::Write;

    const MI_INT8: u32 = 1;
    const MI_UINT8: u32 = 2;
    const MI_UINT16: u32 = 4;
    const MI_INT32: u32 = 5;
    const MI_UINT32: u32 = 6;
    const MI_DOUBLE: u32 = 9;
    const MI_MATRIX: u32 = 14;
    const MI_COMPRESSED: u32 = 15;

    /// A MATLAB value to write.
    pub enum V {
        /// A 1×n double row vector.
        Num(Vec<f64>),
        /// A 1×n char row vector.
        Text(String),
        /// A 1×n cell array.
        Cell(Vec<V>),
        /// A 1×n struct array: field names and, per element, one value per field.
        Struct(Vec<String>, Vec<Vec<V>>),
    }

    /// A data element, padded to eight bytes; the small form when the data fits.
    fn element(ty: u32, data: &[u8]) -> Vec<u8> {
        if data.len() <= 4 && ty != MI_MATRIX {
            let mut e = (((data.len() as u32) << 16) | ty).to_le_bytes().to_vec();
            e.extend_from_slice(data);
            e.resize(8, 0);
            return e;
        }
        let mut e = ty.to_le_bytes().to_vec();
        e.extend_from_slice(&(data.len() as u32).to_le_bytes());
        e.extend_from_slice(data);
        e.resize(e.len().next_multiple_of(8), 0);
        e
    }

    fn numbers(values: &[f64]) -> Vec<u8> {
        let whole = values.iter().all(|v| v.fract() == 0.0 && *v >= 0.0);
        if whole && values.iter().all(|&v| v <= 255.0) {
            element(MI_UINT8, &values.iter().map(|&v| v as u8).collect::<Vec<_>>())
        } else if whole && values.iter().all(|&v| v <= 65535.0) {
            element(
                MI_UINT16,
                &values
                    .iter()
                    .flat_map(|&v| (v as u16).to_le_bytes())
                    .collect::<Vec<_>>(),
            )
        } else {
            element(
                MI_DOUBLE,
                &values.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<_>>(),
            )
        }
    }

    /// An miMATRIX element for `value` named `name` (empty inside cells and structs).
    pub fn matrix(name: &str, value: &V) -> Vec<u8> {
        let (class, n, body) = match value {
            V::Num(values) => (6u32, values.len(), numbers(values)),
            V::Text(text) => {
                let units: Vec<u8> = text.encode_utf16().flat_map(u16::to_le_bytes).collect();
                (4, text.encode_utf16().count(), element(MI_UINT16, &units))
            }
            V::Cell(items) => (1, items.len(), items.iter().flat_map(|item| matrix("", item)).collect()),
            V::Struct(fields, elements) => {
                let width = fields.iter().map(String::len).max().unwrap_or(0) + 1;
                let mut names = Vec::new();
                for field in fields {
                    let mut slot = field.as_bytes().to_vec();
                    slot.resize(width, 0);
                    names.extend(slot);
                }
                let mut body = element(MI_INT32, &(width as i32).to_le_bytes());
                body.extend(element(MI_INT8, &names));
                for values in elements {
                    for value in values {
                        body.extend(matrix("", value));
                    }
                }
                (2, elements.len(), body)
            }
        };
        let flags: Vec<u8> = [class.to_le_bytes(), [0; 4]].concat();
        let mut content = element(MI_UINT32, &flags);
        content.extend(element(
            MI_INT32,
            &[1i32.to_le_bytes(), (n as i32).to_le_bytes()].concat(),
        ));
        content.extend(element(MI_INT8, name.as_bytes()));
        content.extend(body);
        element(MI_MATRIX, &content)
    }

    /// A complete file holding `variables`.
    pub fn file(variables: &[(&str, V)], compressed: bool) -> Vec<u8> {
        let mut out = b"MATLAB 5.0 MAT-file, Platform: GLNXA64, Created on: Mon Jan  1 00:00:00 2024".to_vec();
        out.resize(116, b' ');
        out.extend_from_slice(&[0; 8]);
        out.extend_from_slice(&0x0100u16.to_le_bytes());
        out.extend_from_slice(b"IM");
        for (name, value) in variables {
            let element = matrix(name, value);
            if compressed {
                let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
                z.write_all(&element).unwrap();
                let data = z.finish().unwrap();
                out.extend_from_slice(&MI_COMPRESSED.to_le_bytes());
                out.extend_from_slice(&(data.len() as u32).to_le_bytes());
                out.extend(data);
            } else {
                out.extend(element);
            }
        }
        out
    }
}

use matfile::V;

/// A fresh, empty directory for one test.
fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("xtask-cars196-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A small JPEG whose content depends on `seed`, so that every image is distinct.
fn jpeg(seed: u32) -> Vec<u8> {
    let img = image::RgbImage::from_fn(24, 16, |x, y| {
        image::Rgb([(x * 10 + seed * 7) as u8, (y * 15 + seed * 3) as u8, (seed * 40) as u8])
    });
    let mut out = Cursor::new(Vec::new());
    img.write_to(&mut out, image::ImageFormat::Jpeg).unwrap();
    out.into_inner()
}

/// The official name of class `c` in the miniature.
fn class_name(c: u32) -> String {
    match c {
        1 => "AM General Hummer SUV 2000".to_string(),
        // Commas and non-ASCII letters must survive the CSV manifest.
        99 => "Citroën C4, Hatchback 2012".to_string(),
        196 => "smart fortwo Convertible 2012".to_string(),
        c => format!("Make Model {c:03}"),
    }
}

/// The miniature: (relative_im_path, class) per annotation, classes at both ends of
/// both splits with 2–3 images each, interleaved as in the official file.
fn annotations() -> Vec<(String, u32)> {
    let classes = [1, 2, 98, 99, 100, 196, 1, 2, 98, 99, 100, 196, 1, 99];
    classes
        .iter()
        .enumerate()
        .map(|(i, &c)| (format!("car_ims/{:06}.jpg", i + 1), c))
        .collect()
}

/// The `annotations` struct array (with the given fields) and the 1×196 `class_names`
/// cell array of the official file.
fn annotation_variables(annos: &[(String, u32)], fields: &[&str]) -> Vec<(&'static str, V)> {
    let elements = annos
        .iter()
        .enumerate()
        .map(|(i, (path, class))| {
            fields
                .iter()
                .map(|&field| match field {
                    "relative_im_path" => V::Text(path.clone()),
                    "bbox_x1" => V::Num(vec![3.0 + i as f64]),
                    "bbox_y1" => V::Num(vec![5.0]),
                    "bbox_x2" => V::Num(vec![600.0 + i as f64]),
                    "bbox_y2" => V::Num(vec![400.0]),
                    "class" => V::Num(vec![f64::from(*class)]),
                    // The official per-image flag, which the DML split must ignore.
                    "test" => V::Num(vec![(i % 2) as f64]),
                    other => panic!("unknown field {other}"),
                })
                .collect()
        })
        .collect();
    let names = V::Cell((1..=196).map(|c| V::Text(class_name(c))).collect());
    vec![
        (
            "annotations",
            V::Struct(fields.iter().map(|f| f.to_string()).collect(), elements),
        ),
        ("class_names", names),
    ]
}

const FIELDS: [&str; 7] = [
    "relative_im_path",
    "bbox_x1",
    "bbox_y1",
    "bbox_x2",
    "bbox_y2",
    "class",
    "test",
];

/// How the images are provided.
#[derive(Clone, Copy, PartialEq)]
enum Images {
    Archive,
    Directory,
}

/// Writes `car_ims.tgz`: every listed image, one unlisted image, a directory entry and a
/// member whose name escapes the archive (written through the raw header, since the tar
/// builder refuses such names).
fn write_tgz(path: &Path, files: &[(String, Vec<u8>)]) {
    let gz = flate2::write::GzEncoder::new(std::fs::File::create(path).unwrap(), flate2::Compression::fast());
    let mut builder = tar::Builder::new(gz);
    let mut dir = tar::Header::new_gnu();
    dir.set_entry_type(tar::EntryType::Directory);
    dir.set_mode(0o755);
    dir.set_size(0);
    builder.append_data(&mut dir, "car_ims/", std::io::empty()).unwrap();
    let mut add = |name: &str, data: &[u8]| {
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        builder.append_data(&mut header, name, data).unwrap();
    };
    for (name, data) in files {
        add(name, data);
    }
    add("car_ims/999999.jpg", &jpeg(999));
    let evil = jpeg(666);
    let mut header = tar::Header::new_old();
    let name = b"../evil.jpg";
    header.as_old_mut().name[..name.len()].copy_from_slice(name);
    header.set_size(evil.len() as u64);
    header.set_mode(0o644);
    header.set_cksum();
    builder.append(&header, evil.as_slice()).unwrap();
    builder.into_inner().unwrap().finish().unwrap();
}

/// Builds a source directory with `cars_annos.mat` (from `mat`) and the images of
/// `annos`. Returns the source directory and the image bytes by relative path.
fn write_source(root: &Path, mat: &[u8], annos: &[(String, u32)], images: Images) -> (PathBuf, Vec<(String, Vec<u8>)>) {
    let src = root.join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("cars_annos.mat"), mat).unwrap();
    let files: Vec<(String, Vec<u8>)> = annos
        .iter()
        .enumerate()
        .map(|(i, (path, _))| (path.clone(), jpeg(i as u32)))
        .collect();
    match images {
        Images::Archive => write_tgz(&src.join("car_ims.tgz"), &files),
        Images::Directory => {
            for (path, data) in &files {
                let dest = src.join(path);
                std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
                std::fs::write(dest, data).unwrap();
            }
            std::fs::write(src.join("car_ims/999999.jpg"), jpeg(999)).unwrap();
        }
    }
    (src, files)
}

/// Runs `xtask prepare cars196 --src <src> --out <out> <extra…>`.
fn prepare(src: &Path, out: &Path, extra: &[&str]) -> anyhow::Result<()> {
    let mut args = vec![
        "xtask".to_string(),
        "prepare".into(),
        "cars196".into(),
        "--src".into(),
        src.display().to_string(),
        "--out".into(),
        out.display().to_string(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    xtask::run(xtask::Cli::try_parse_from(args)?)
}

/// The message of an expected error, with its whole context chain.
fn error_of(result: anyhow::Result<()>) -> String {
    format!("{:#}", result.expect_err("expected the preparation to fail"))
}

/// Fails if a failed run left its output or a staging directory behind.
fn assert_no_output(root: &Path, out: &Path) {
    assert!(!out.exists(), "{} must not exist after a failure", out.display());
    for entry in std::fs::read_dir(root).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        assert!(!name.contains(".partial-"), "staging directory {name} was left behind");
    }
}

/// Checks a prepared miniature against its annotations and source images.
fn check_prepared(out: &Path, annos: &[(String, u32)], files: &[(String, Vec<u8>)]) -> Manifest {
    let manifest = Manifest::read(out.join("manifest.csv")).unwrap();
    assert_eq!(manifest.records.len(), annos.len());
    assert!(manifest.property_names.is_empty());
    for ((record, (path, class)), (_, bytes)) in manifest.records.iter().zip(annos).zip(files) {
        assert_eq!(record.path, format!("images/{path}"));
        assert_eq!(record.class_id, *class);
        assert_eq!(record.class_name, class_name(*class));
        let want = if *class <= 98 { Split::Train } else { Split::Test };
        assert_eq!(record.split, want, "{path}");
        assert_eq!(&std::fs::read(out.join(&record.path)).unwrap(), bytes, "{path}");
    }
    // Only listed images are copied, and nothing escapes the output directory.
    let copied = std::fs::read_dir(out.join("images/car_ims")).unwrap().count();
    assert_eq!(copied, annos.len());
    assert!(!out.join("images/car_ims/999999.jpg").exists());
    assert!(!out.join("evil.jpg").exists() && !out.parent().unwrap().join("evil.jpg").exists());
    let counts = manifest.split_counts();
    assert_eq!(counts.get(&Split::Train), Some(&7));
    assert_eq!(counts.get(&Split::Test), Some(&7));
    manifest
}

#[test]
fn prepares_from_tgz_with_compressed_mat() {
    let root = temp_dir("tgz");
    let annos = annotations();
    let mat = matfile::file(&annotation_variables(&annos, &FIELDS), true);
    let (src, files) = write_source(&root, &mat, &annos, Images::Archive);
    let out = root.join("out");
    prepare(&src, &out, &["--no-verify-counts"]).unwrap();
    check_prepared(&out, &annos, &files);
    // A successful run leaves no staging directory either.
    assert_no_output(&root, &root.join("never-written"));
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn prepares_from_directory_with_uncompressed_mat() {
    let root = temp_dir("dir");
    let annos = annotations();
    let mat = matfile::file(&annotation_variables(&annos, &FIELDS), false);
    let (src, files) = write_source(&root, &mat, &annos, Images::Directory);
    let out = root.join("out");
    prepare(&src, &out, &["--no-verify-counts"]).unwrap();
    check_prepared(&out, &annos, &files);
    // The source directory is left as it was.
    assert_eq!(std::fs::read(src.join("car_ims/000001.jpg")).unwrap(), files[0].1);
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn holds_out_validation_classes() {
    let root = temp_dir("val");
    let annos = annotations();
    let mat = matfile::file(&annotation_variables(&annos, &FIELDS), true);
    let (src, _) = write_source(&root, &mat, &annos, Images::Directory);
    let out = root.join("out");
    prepare(&src, &out, &["--no-verify-counts", "--val-classes", "1"]).unwrap();
    let manifest = Manifest::read(out.join("manifest.csv")).unwrap();
    for record in &manifest.records {
        let want = match record.class_id {
            98 => Split::Val,
            c if c <= 98 => Split::Train,
            _ => Split::Test,
        };
        assert_eq!(record.split, want, "{}", record.path);
    }
    assert_eq!(manifest.split_counts().get(&Split::Val), Some(&2));
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn reports_official_count_mismatch() {
    let root = temp_dir("counts");
    let annos = annotations();
    let mat = matfile::file(&annotation_variables(&annos, &FIELDS), true);
    let (src, _) = write_source(&root, &mat, &annos, Images::Archive);
    let out = root.join("out");
    let e = error_of(prepare(&src, &out, &[]));
    assert!(
        e.contains("train: expected 8054 images, found 7")
            && e.contains("test: expected 8131 images, found 7")
            && e.contains("--no-verify-counts"),
        "{e}"
    );
    assert_no_output(&root, &out);
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn truncated_archive_fails_naming_it() {
    let root = temp_dir("truncated");
    let annos = annotations();
    let mat = matfile::file(&annotation_variables(&annos, &FIELDS), true);
    let (src, _) = write_source(&root, &mat, &annos, Images::Archive);
    let archive = src.join("car_ims.tgz");
    let bytes = std::fs::read(&archive).unwrap();
    let out = root.join("out");
    // Cut inside the image data, and just before the gzip trailer, where only its
    // checksum can tell that something is missing.
    for cut in [bytes.len() / 2, bytes.len() - 4] {
        std::fs::write(&archive, &bytes[..cut]).unwrap();
        let e = error_of(prepare(&src, &out, &["--no-verify-counts"]));
        assert!(e.contains(&archive.display().to_string()), "cut {cut}: {e}");
        assert_no_output(&root, &out);
    }
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn corrupt_or_missing_mat_fails_naming_it() {
    let root = temp_dir("badmat");
    let annos = annotations();
    let mat = matfile::file(&annotation_variables(&annos, &FIELDS), true);
    let (src, _) = write_source(&root, &mat, &annos, Images::Directory);
    let mat_path = src.join("cars_annos.mat");
    let out = root.join("out");
    for (what, bytes) in [("truncated", &mat[..mat.len() - 20]), ("header only", &mat[..100])] {
        std::fs::write(&mat_path, bytes).unwrap();
        let e = error_of(prepare(&src, &out, &["--no-verify-counts"]));
        assert!(
            e.contains(&mat_path.display().to_string()) && e.contains("at byte"),
            "{what}: {e}"
        );
        assert_no_output(&root, &out);
    }
    std::fs::remove_file(&mat_path).unwrap();
    let e = error_of(prepare(&src, &out, &["--no-verify-counts"]));
    assert!(
        e.contains(&mat_path.display().to_string()) && e.contains("missing"),
        "{e}"
    );
    assert_no_output(&root, &out);
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn names_missing_variables_fields_and_bad_classes() {
    let root = temp_dir("fields");
    let annos = annotations();
    let (src, _) = write_source(&root, &[], &annos, Images::Directory);
    let mat_path = src.join("cars_annos.mat");
    let out = root.join("out");
    let run_with = |variables: Vec<(&str, V)>| {
        std::fs::write(&mat_path, matfile::file(&variables, true)).unwrap();
        let e = error_of(prepare(&src, &out, &["--no-verify-counts"]));
        assert_no_output(&root, &out);
        e
    };

    let without_class: Vec<&str> = FIELDS.iter().copied().filter(|&f| f != "class").collect();
    let e = run_with(annotation_variables(&annos, &without_class));
    assert!(e.contains("no field `class`") && e.contains("cars_annos.mat"), "{e}");

    let mut variables = annotation_variables(&annos, &FIELDS);
    variables.pop();
    let e = run_with(variables);
    assert!(
        e.contains("no variable `class_names`") && e.contains("annotations"),
        "{e}"
    );

    let e = run_with(vec![("class_names", V::Cell(vec![]))]);
    assert!(e.contains("no variable `annotations`"), "{e}");

    let mut bad = annos.clone();
    bad[2].1 = 197;
    let e = run_with(annotation_variables(&bad, &FIELDS));
    assert!(
        e.contains("annotation 3") && e.contains("class 197 is outside 1–196"),
        "{e}"
    );
    bad[2].1 = 0;
    let e = run_with(annotation_variables(&bad, &FIELDS));
    assert!(e.contains("annotation 3") && e.contains("class 0 is outside"), "{e}");

    let mut escape = annos.clone();
    escape[4].0 = "car_ims/../cars_annos.mat".to_string();
    let e = run_with(annotation_variables(&escape, &FIELDS));
    assert!(
        e.contains("annotation 5") && e.contains("not a file below car_ims/"),
        "{e}"
    );
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn missing_image_fails_naming_it() {
    let root = temp_dir("missing");
    let annos = annotations();
    let mat = matfile::file(&annotation_variables(&annos, &FIELDS), false);
    let (src, _) = write_source(&root, &mat, &annos, Images::Directory);
    std::fs::remove_file(src.join("car_ims/000004.jpg")).unwrap();
    let out = root.join("out");
    let e = error_of(prepare(&src, &out, &["--no-verify-counts"]));
    assert!(
        e.contains("car_ims/000004.jpg") && e.contains("1 listed file(s) are missing"),
        "{e}"
    );
    assert_no_output(&root, &out);
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn corrupt_jpeg_fails_naming_it() {
    let root = temp_dir("jpeg");
    let annos = annotations();
    let mat = matfile::file(&annotation_variables(&annos, &FIELDS), true);
    let (src, files) = write_source(&root, &mat, &annos, Images::Directory);
    let victim = src.join("car_ims/000007.jpg");
    std::fs::write(&victim, &files[6].1[..files[6].1.len() / 2]).unwrap();
    let out = root.join("out");
    let e = error_of(prepare(&src, &out, &["--no-verify-counts"]));
    assert!(
        e.contains("car_ims/000007.jpg") && e.contains("cannot be decoded"),
        "{e}"
    );
    assert_no_output(&root, &out);
    std::fs::remove_dir_all(&root).unwrap();
}

/// `fixtures/cars_annos_scipy.mat` was written by scipy 1.17 (numpy 2.4) with:
///
/// ```python
/// import numpy as np, scipy.io
/// classes = [1, 1, 2, 2, 98, 98, 99, 99, 100, 100, 196, 196]
/// n = len(classes)
/// dt = [(f, object) for f in ("relative_im_path", "bbox_x1", "bbox_y1", "bbox_x2", "bbox_y2", "class", "test")]
/// ann = np.zeros((1, n), dtype=dt)
/// for i, c in enumerate(classes):
///     ann[0, i] = (f"car_ims/{i + 1:06d}.jpg", np.uint16(10 + i), np.uint16(20 + i),
///                  np.uint16(300 + i), np.uint16(200 + i), np.uint8(c), np.uint8(i % 2))
/// names = np.empty((1, 196), dtype=object)
/// for c in range(1, 197):
///     names[0, c - 1] = f"Make Model {c:03d}"
/// names[0, 0] = "AM General Hummer SUV 2000"
/// names[0, 98] = "Citroën C4, Hatchback 2012"
/// names[0, 195] = "smart fortwo Convertible 2012"
/// scipy.io.savemat("cars_annos_scipy.mat", {"annotations": ann, "class_names": names}, do_compression=True)
/// ```
///
/// It proves that the reader understands a third-party writer: compressed variables,
/// `miUTF8` text (with a non-ASCII letter), `uint8`/`uint16` classes and struct and cell
/// arrays as scipy lays them out.
fn scipy_fixture() -> PathBuf {
    dml_testkit::workspace_root().join("xtask/tests/fixtures/cars_annos_scipy.mat")
}

const SCIPY_CLASSES: [u32; 12] = [1, 1, 2, 2, 98, 98, 99, 99, 100, 100, 196, 196];

#[test]
fn reads_scipy_written_fixture_exactly() {
    let vars = mat::read_mat(scipy_fixture()).unwrap();
    assert_eq!(vars.keys().collect::<Vec<_>>(), vec!["annotations", "class_names"]);
    let annotations = vars["annotations"].as_struct().unwrap();
    assert_eq!(annotations.dims, vec![1, 12]);
    assert_eq!(annotations.field_names, FIELDS.to_vec());
    for (i, &class) in SCIPY_CLASSES.iter().enumerate() {
        let get = |field: &str| annotations.get(i, field).unwrap();
        assert_eq!(
            get("relative_im_path").text().unwrap(),
            format!("car_ims/{:06}.jpg", i + 1)
        );
        assert_eq!(get("relative_im_path").dims(), &[1, 18]);
        let number = |field: &str, class: NumericClass| {
            let array = get(field).as_numeric().unwrap();
            assert_eq!(
                (array.class, array.dims.as_slice(), array.logical),
                (class, [1, 1].as_slice(), false)
            );
            array.real[0]
        };
        let i_f = i as f64;
        assert_eq!(number("bbox_x1", NumericClass::UInt16), 10.0 + i_f);
        assert_eq!(number("bbox_y1", NumericClass::UInt16), 20.0 + i_f);
        assert_eq!(number("bbox_x2", NumericClass::UInt16), 300.0 + i_f);
        assert_eq!(number("bbox_y2", NumericClass::UInt16), 200.0 + i_f);
        assert_eq!(number("class", NumericClass::UInt8), f64::from(class));
        assert_eq!(number("test", NumericClass::UInt8), (i % 2) as f64);
    }
    let names = vars["class_names"].as_cell().unwrap();
    assert_eq!(names.dims, vec![1, 196]);
    let texts: Vec<String> = names.items.iter().map(|v| v.text().unwrap()).collect();
    let want: Vec<String> = (1..=196).map(class_name).collect();
    assert_eq!(texts, want);
    assert!(matches!(&names.items[98], MatValue::Char(c) if c.dims == [1, 26]));
}

#[test]
fn prepares_from_scipy_written_annotations() {
    let root = temp_dir("scipy");
    let annos: Vec<(String, u32)> = SCIPY_CLASSES
        .iter()
        .enumerate()
        .map(|(i, &c)| (format!("car_ims/{:06}.jpg", i + 1), c))
        .collect();
    let mat = std::fs::read(scipy_fixture()).unwrap();
    let (src, files) = write_source(&root, &mat, &annos, Images::Archive);
    let out = root.join("out");
    prepare(&src, &out, &["--no-verify-counts"]).unwrap();
    let manifest = Manifest::read(out.join("manifest.csv")).unwrap();
    assert_eq!(manifest.records.len(), 12);
    for ((record, (path, class)), (_, bytes)) in manifest.records.iter().zip(&annos).zip(&files) {
        assert_eq!(
            (record.path.as_str(), record.class_id, record.class_name.as_str()),
            (format!("images/{path}").as_str(), *class, class_name(*class).as_str())
        );
        assert_eq!(record.split, if *class <= 98 { Split::Train } else { Split::Test });
        assert_eq!(&std::fs::read(out.join(&record.path)).unwrap(), bytes);
    }
    std::fs::remove_dir_all(&root).unwrap();
}
