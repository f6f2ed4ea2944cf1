//! Tests of the synthetic set generator: determinism (and a pinned fingerprint of one
//! small set, so that a refactoring cannot change the output silently), the manifest's
//! property columns, the rendered images, the object masks and their agreement with the
//! pixels, the claim that the class lives in the shape and not in the colour, the
//! invisible `control` column (uniform, independent of everything, ignored by the
//! renderer), and the no-half-written-output guarantee.

use std::collections::BTreeMap;
use std::path::Path;

use dml_data::{Manifest, Split};
use dml_datasets::DatasetError;
use dml_datasets::synth::{
    CONTROL_LEVELS, PROPERTIES, SynthConfig, generate, mask_path, plan, read_mask, render, render_with_mask,
};
use dml_testkit::{fnv1a, read_tree};

/// The property columns and their level counts that the spec promises, in manifest order.
const EXPECTED_PROPERTIES: [(&str, u32); 11] = [
    ("rotation", 8),
    ("object_hue", 8),
    ("object_saturation", 3),
    ("object_value", 3),
    ("background_hue", 8),
    ("background_saturation", 3),
    ("background_value", 3),
    ("light_elevation", 3),
    ("light_azimuth", 8),
    ("camera_height", 4),
    ("control", 8),
];

const CLASS_NAMES: [&str; 10] = [
    "sphere",
    "cube",
    "cylinder",
    "cone",
    "torus",
    "octahedron",
    "capsule",
    "hexagonal_prism",
    "square_pyramid",
    "ellipsoid",
];

/// Renders `n` images of `size` pixels with `seed` into `out`, refusing an existing `out`.
fn run(out: &Path, n: usize, seed: u64, size: u32) -> dml_datasets::Result<Manifest> {
    generate(&SynthConfig { n, seed, size }, out, false)
}

/// Names of leftover staging directories next to an output directory.
fn partial_dirs(parent: &Path) -> Vec<String> {
    std::fs::read_dir(parent)
        .expect("readable parent")
        .map(|e| e.expect("dir entry").file_name().to_string_lossy().into_owned())
        .filter(|name| name.contains(".partial-") || name.contains(".old-"))
        .collect()
}

fn load_rgb(manifest: &Manifest, index: usize) -> image::RgbImage {
    let path = manifest.image_path(&manifest.records[index]);
    let image = image::open(&path).unwrap_or_else(|e| panic!("cannot decode {}: {e}", path.display()));
    assert_eq!(
        image.color(),
        image::ColorType::Rgb8,
        "{} is not 8-bit RGB",
        path.display()
    );
    image.into_rgb8()
}

/// The most frequent pixel colour: the renderer paints every unshadowed background pixel
/// in exactly the background colour, which therefore dominates every image.
fn background_colour(image: &image::RgbImage) -> [u8; 3] {
    let mut counts: BTreeMap<[u8; 3], usize> = BTreeMap::new();
    for p in image.pixels() {
        *counts.entry(p.0).or_default() += 1;
    }
    counts
        .into_iter()
        .max_by_key(|&(c, n)| (n, c))
        .map(|(c, _)| c)
        .expect("non-empty image")
}

fn differs(a: [u8; 3], b: [u8; 3], tolerance: i32) -> bool {
    a.iter().zip(b).any(|(&x, y)| (x as i32 - y as i32).abs() > tolerance)
}

fn srgb_to_linear(c: f32) -> f32 {
    if c <= 0.04045 {
        c / 12.92
    } else {
        ((c + 0.055) / 1.055).powf(2.4)
    }
}

fn linear_to_srgb(c: f32) -> f32 {
    if c <= 0.003_130_8 {
        c * 12.92
    } else {
        1.055 * c.powf(1.0 / 2.4) - 0.055
    }
}

/// Whether a pixel is the background darkened by shadow. The renderer darkens the ground
/// by scaling the background colour in linear light, so a shadow pixel is, up to 8-bit
/// rounding, the sRGB encoding of a scalar multiple (≤ 1) of the linear background.
fn is_shadow(p: [u8; 3], bg: [u8; 3]) -> bool {
    let lin = |c: [u8; 3]| c.map(|v| srgb_to_linear(v as f32 / 255.0));
    let (pl, bl) = (lin(p), lin(bg));
    let norm: f32 = bl.iter().map(|c| c * c).sum();
    if norm == 0.0 {
        return false;
    }
    let scale = pl.iter().zip(&bl).map(|(a, b)| a * b).sum::<f32>() / norm;
    if !(0.0..=1.01).contains(&scale) {
        return false;
    }
    p.iter()
        .zip(&bl)
        .all(|(&v, b)| (v as f32 - 255.0 * linear_to_srgb((scale * b).min(1.0))).abs() <= 2.5)
}

#[test]
fn same_seed_is_byte_identical_and_other_seed_differs() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let a = run(&tmp.path().join("a"), 30, 11, 32).expect("first run");
    let b = run(&tmp.path().join("b"), 30, 11, 32).expect("second run");
    let c = run(&tmp.path().join("c"), 30, 12, 32).expect("other seed");
    assert_eq!(a.records.len(), 30);
    let (ta, tb, tc) = (read_tree(&a.root), read_tree(&b.root), read_tree(&c.root));
    assert_eq!(ta.len(), 61, "30 images, 30 masks and the manifest");
    assert!(ta.contains_key("manifest.csv"));
    assert_eq!(ta.keys().filter(|k| k.starts_with("masks/")).count(), 30);
    assert_eq!(ta, tb, "the same seed must give byte-identical files, masks included");
    assert_ne!(
        ta["manifest.csv"], tc["manifest.csv"],
        "another seed must give another manifest"
    );
    let same_images = ta
        .iter()
        .filter(|(k, v)| k.starts_with("images/") && tc.get(*k) == Some(*v))
        .count();
    assert_eq!(same_images, 0, "another seed must render other images");
    // A mask depends only on shape, rotation and camera height, so single masks may
    // coincide across seeds; the set of them must not.
    let masks = |t: &BTreeMap<String, Vec<u8>>| {
        t.iter()
            .filter(|(k, _)| k.starts_with("masks/"))
            .map(|(_, v)| v.clone())
            .collect::<Vec<_>>()
    };
    assert_ne!(masks(&ta), masks(&tc), "another seed must give other masks");
}

#[test]
fn manifest_has_every_property_in_range_and_the_class_split() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let n = 400;
    let written = run(&tmp.path().join("out"), n, 5, 16).expect("run");
    // Reading it back checks that the file on disk is a valid manifest on its own.
    let manifest = Manifest::read(written.root.join("manifest.csv")).expect("valid manifest");
    assert_eq!(manifest.records.len(), n);
    let names: Vec<&str> = EXPECTED_PROPERTIES.iter().map(|(name, _)| *name).collect();
    assert_eq!(manifest.property_names, names);

    let mut seen = vec![vec![0usize; 8]; EXPECTED_PROPERTIES.len()];
    let mut per_class = [0usize; 10];
    for (i, record) in manifest.records.iter().enumerate() {
        assert_eq!(record.path, format!("images/{i:06}.png"));
        let class = record.class_id as usize;
        assert!(class < 10, "class id {class}");
        per_class[class] += 1;
        assert_eq!(record.class_name, CLASS_NAMES[class]);
        let expected_split = if class < 5 { Split::Train } else { Split::Test };
        assert_eq!(record.split, expected_split, "class {class}");
        for (k, (value, (name, levels))) in record.properties.iter().zip(EXPECTED_PROPERTIES).enumerate() {
            let level: u32 = value
                .parse()
                .unwrap_or_else(|_| panic!("{name} = {value:?} is not a level index"));
            assert!(level < levels, "{name} = {level} is out of range 0..{levels}");
            seen[k][level as usize] += 1;
        }
    }
    for ((name, levels), counts) in EXPECTED_PROPERTIES.iter().zip(&seen) {
        let expected = n as f64 / *levels as f64;
        for (level, &count) in counts.iter().enumerate().take(*levels as usize) {
            assert!(count > 0, "{name} level {level} never occurs in {n} images");
            // A uniform draw stays well within ±60 % of its expectation at these counts.
            assert!(
                (count as f64 - expected).abs() < 0.6 * expected,
                "{name} level {level} occurs {count} times, expected about {expected}"
            );
        }
    }
    // Classes are balanced exactly, which guarantees two images per class for any n ≥ 20.
    assert!(per_class.iter().all(|&c| c == n / 10), "{per_class:?}");
}

#[test]
fn images_are_rgb_of_the_requested_size_and_show_an_object() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let size = 48;
    let manifest = run(&tmp.path().join("out"), 40, 3, size).expect("run");
    for i in 0..manifest.records.len() {
        let image = load_rgb(&manifest, i);
        assert_eq!(image.dimensions(), (size, size));
        let bg = background_colour(&image);
        let total = (size * size) as f64;
        let fraction = |keep: &dyn Fn([u8; 3]) -> bool| image.pixels().filter(|p| keep(p.0)).count() as f64 / total;
        let background = fraction(&|p| p == bg);
        let changed = fraction(&|p| differs(p, bg, 3));
        assert!(
            background > 0.25,
            "image {i}: only {background:.2} of the pixels are plain background"
        );
        assert!(
            (0.04..0.75).contains(&changed),
            "image {i}: object and shadow cover an implausible {changed:.3} of the image"
        );
        // When object and background share hue and saturation, the object's colour is a
        // multiple of the background's and cannot be told from a shadow by colour alone.
        let props = &manifest.records[i].properties;
        if props[1..3] != props[4..6] {
            let object = fraction(&|p| differs(p, bg, 3) && !is_shadow(p, bg));
            assert!(
                (0.04..0.6).contains(&object),
                "image {i}: the object covers an implausible {object:.3} of the image"
            );
        }
    }
}

/// Loads the mask of record `index` through the public path mapping and reader.
fn load_mask(manifest: &Manifest, index: usize) -> image::GrayImage {
    let path = mask_path(&manifest.root, &manifest.records[index].path);
    read_mask(&path).unwrap_or_else(|e| panic!("record {index}: {e}"))
}

/// Whether pixel (`x`, `y`) and its 4-neighbours inside the image all have mask value
/// `value`: such a pixel is not on the silhouette, so the renderer did not blend
/// sub-samples into it and its colour is that of what its centre sees.
fn interior(mask: &image::GrayImage, x: u32, y: u32, value: u8) -> bool {
    let (w, h) = mask.dimensions();
    let at = |x: u32, y: u32| mask.get_pixel(x, y).0[0] == value;
    at(x, y)
        && (x == 0 || at(x - 1, y))
        && (x + 1 == w || at(x + 1, y))
        && (y == 0 || at(x, y - 1))
        && (y + 1 == h || at(x, y + 1))
}

#[test]
fn every_image_has_a_binary_mask_of_its_size_covering_part_of_it() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let (n, size) = (40, 32);
    let manifest = run(&tmp.path().join("out"), n, 6, size).expect("run");
    let mask_dir = manifest.root.join("masks");
    assert_eq!(
        std::fs::read_dir(&mask_dir).expect("masks/ exists").count(),
        n,
        "one mask per image in {}",
        mask_dir.display()
    );
    let mut fractions = Vec::with_capacity(n);
    for i in 0..n {
        let image = load_rgb(&manifest, i);
        let mask = load_mask(&manifest, i);
        assert_eq!(mask.dimensions(), image.dimensions(), "record {i}");
        // `read_mask` refuses other values; the count below relies on it.
        let object = mask.pixels().filter(|p| p.0[0] == 255).count();
        let fraction = object as f64 / (size * size) as f64;
        fractions.push(fraction);
        // Every shape in every pose covers a sizeable part of the frame without filling
        // it (10 % to 26 % in this set): an empty or a full mask, or one that also marked
        // the shadow or the ground, would fall outside.
        assert!(
            (0.05..0.4).contains(&fraction),
            "record {i} ({}): the object covers an implausible {fraction:.3} of the mask",
            manifest.records[i].class_name
        );
    }
    let (min, max) = fractions
        .iter()
        .fold((1f64, 0f64), |(lo, hi), &f| (lo.min(f), hi.max(f)));
    println!("object fraction of the masks: {min:.3} to {max:.3}");
}

#[test]
fn mask_marks_exactly_the_pixels_that_show_the_object() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let (n, seed, size) = (20, 8, 32);
    let manifest = run(&tmp.path().join("out"), n, seed, size).expect("run");
    let params = plan(seed, n);
    let (mut object_pixels, mut background_pixels) = (0, 0);
    for (i, p) in params.iter().enumerate() {
        let image = load_rgb(&manifest, i);
        let mask = load_mask(&manifest, i);
        assert_eq!(
            image,
            render(p, size),
            "record {i} is not the image of its planned scene"
        );
        // The same scene with the object in the complementary hue: the object's colour
        // enters only the pixels whose samples hit the object, since shadows and
        // contact darkening depend on the geometry alone.
        let mut recoloured = *p;
        recoloured.object.hue = (p.object.hue + 4) % 8;
        recoloured.object.saturation = 2;
        let (other, other_mask) = render_with_mask(&recoloured, size);
        assert_eq!(
            other_mask, mask,
            "record {i}: the mask must not depend on the object's colour"
        );
        let bg = background_colour(&image);
        // Silhouette pixels (mask value differs from a 4-neighbour) blend sub-samples of
        // object and background, so they may or may not change and are not checked; the
        // two branches below then say that the object's colour shows exactly on the mask
        // and its one-pixel rim, and nowhere else.
        for (x, y, _) in mask.enumerate_pixels() {
            let (a, b) = (image.get_pixel(x, y).0, other.get_pixel(x, y).0);
            if interior(&mask, x, y, 255) {
                object_pixels += 1;
                assert_ne!(a, b, "record {i}: object pixel ({x}, {y}) ignores the object's colour");
            } else if interior(&mask, x, y, 0) {
                background_pixels += 1;
                assert_eq!(
                    a, b,
                    "record {i}: background pixel ({x}, {y}) depends on the object's colour"
                );
                assert!(
                    a == bg || is_shadow(a, bg),
                    "record {i}: background pixel ({x}, {y}) = {a:?} is neither the background {bg:?} nor its shadow"
                );
            }
        }
    }
    assert!(
        object_pixels > 20 * n && background_pixels > 200 * n,
        "{object_pixels} {background_pixels}"
    );
}

#[test]
fn a_set_without_masks_asks_for_regeneration() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let manifest = run(&tmp.path().join("out"), 20, 0, 16).expect("run");
    // A set generated before masks existed: the same tree without `masks/`.
    std::fs::remove_dir_all(manifest.root.join("masks")).expect("remove masks");
    let path = mask_path(&manifest.root, &manifest.records[0].path);
    let error = read_mask(&path).expect_err("the mask is gone");
    assert!(matches!(error, DatasetError::MissingMask { .. }), "{error:?}");
    let message = error.to_string();
    assert!(
        message.contains(&path.display().to_string()) && message.contains("cargo xtask synth"),
        "the error must name the file and say how to regenerate the set: {message}"
    );
}

#[test]
fn read_mask_refuses_files_that_are_not_binary_grayscale_pngs() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let manifest = run(&tmp.path().join("out"), 20, 0, 16).expect("run");
    let refused = |path: &Path, why: &str| {
        let error = read_mask(path).expect_err(why);
        assert!(matches!(error, DatasetError::Malformed { .. }), "{why}: {error:?}");
        let message = error.to_string();
        assert!(message.contains(&path.display().to_string()), "{why}: {message}");
        message
    };
    let garbage = tmp.path().join("garbage.png");
    std::fs::write(&garbage, b"not a png").expect("write");
    assert!(refused(&garbage, "garbage").contains("PNG"));
    // An image of the set is a valid PNG, but RGB.
    let rgb = manifest.image_path(&manifest.records[0]);
    assert!(refused(&rgb, "an RGB image").contains("grayscale"));
    let grey = tmp.path().join("grey.png");
    image::GrayImage::from_pixel(4, 4, image::Luma([128]))
        .save(&grey)
        .expect("write");
    assert!(refused(&grey, "a non-binary mask").contains("value 128"));
    // A generated mask passes.
    let mask = read_mask(mask_path(&manifest.root, &manifest.records[0].path)).expect("a valid mask");
    assert_eq!(mask.dimensions(), (16, 16));
}

/// Nearest-class-mean accuracy: fits class means on `train`, classifies `test`.
fn nearest_mean_accuracy(train: &[(usize, Vec<f32>)], test: &[(usize, Vec<f32>)]) -> f64 {
    let dim = train[0].1.len();
    let mut sums = vec![vec![0f64; dim]; 10];
    let mut counts = [0usize; 10];
    for (class, feature) in train {
        counts[*class] += 1;
        for (s, f) in sums[*class].iter_mut().zip(feature) {
            *s += *f as f64;
        }
    }
    let means: Vec<Vec<f64>> = sums
        .iter()
        .zip(counts)
        .map(|(s, c)| s.iter().map(|v| v / c.max(1) as f64).collect())
        .collect();
    let correct = test
        .iter()
        .filter(|(class, feature)| {
            let distance = |m: &Vec<f64>| m.iter().zip(feature).map(|(a, b)| (a - *b as f64).powi(2)).sum::<f64>();
            let best = (0..10).min_by(|&a, &b| distance(&means[a]).total_cmp(&distance(&means[b])));
            best == Some(*class)
        })
        .count();
    correct as f64 / test.len() as f64
}

#[test]
fn class_is_carried_by_shape_not_by_colour() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let size = 32;
    let n = 1000;
    let manifest = run(&tmp.path().join("out"), n, 9, size).expect("run");
    let cells = 8;
    let cell = size / cells;
    let mut colour = Vec::with_capacity(n);
    let mut shape = Vec::with_capacity(n);
    for (i, record) in manifest.records.iter().enumerate() {
        let image = load_rgb(&manifest, i);
        let class = record.class_id as usize;
        let mut mean = vec![0f32; 3];
        for p in image.pixels() {
            for (m, c) in mean.iter_mut().zip(p.0) {
                *m += c as f32 / (size * size) as f32;
            }
        }
        colour.push((class, mean));
        // A crude shape descriptor: the foreground mask (neither background nor its
        // shadow), pooled into a coarse grid of occupancy fractions.
        let bg = background_colour(&image);
        let mut mask = vec![0f32; (cells * cells) as usize];
        for (x, y, p) in image.enumerate_pixels() {
            if differs(p.0, bg, 3) && !is_shadow(p.0, bg) {
                mask[((y / cell) * cells + x / cell) as usize] += 1.0 / (cell * cell) as f32;
            }
        }
        shape.push((class, mask));
    }
    let half = n / 2;
    let colour_accuracy = nearest_mean_accuracy(&colour[..half], &colour[half..]);
    let shape_accuracy = nearest_mean_accuracy(&shape[..half], &shape[half..]);
    let chance = 0.1;
    println!("nearest class mean: colour {colour_accuracy:.3}, shape mask {shape_accuracy:.3}, chance {chance}");
    assert!(
        colour_accuracy <= 1.5 * chance,
        "mean colour predicts the class ({colour_accuracy:.3}): colour must be independent of class"
    );
    assert!(
        shape_accuracy >= 3.5 * chance,
        "the silhouette predicts the class only at {shape_accuracy:.3}"
    );
    assert!(shape_accuracy >= colour_accuracy + 0.15);
}

#[test]
fn existing_output_needs_force_and_stays_untouched() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let out = tmp.path().join("out");
    run(&out, 20, 1, 16).expect("first run");
    std::fs::write(out.join("marker.txt"), b"keep me").expect("marker");
    let before = read_tree(&out);

    let error = run(&out, 20, 2, 16).expect_err("an existing output must not be overwritten");
    assert!(format!("{error}").contains("--force"), "unhelpful error: {error}");
    assert_eq!(read_tree(&out), before, "a refused run must not change the output");
    assert!(partial_dirs(tmp.path()).is_empty());

    let forced = SynthConfig {
        n: 20,
        seed: 2,
        size: 16,
    };
    generate(&forced, &out, true).expect("force replaces the output");
    let after = read_tree(&out);
    assert!(
        !after.contains_key("marker.txt"),
        "forcing must replace the directory, not merge into it"
    );
    assert_ne!(after["manifest.csv"], before["manifest.csv"]);
    assert!(
        partial_dirs(tmp.path()).is_empty(),
        "leftovers: {:?}",
        partial_dirs(tmp.path())
    );
}

#[test]
fn invalid_arguments_fail_cleanly_without_leftovers() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let out = tmp.path().join("out");
    let error = run(&out, 3, 0, 32).expect_err("3 images cannot cover 10 classes twice");
    assert!(
        format!("{error}").contains("need at least 20 images"),
        "unhelpful error: {error}"
    );
    let error = run(&out, 100, 0, 4).expect_err("4 pixels is too small");
    assert!(format!("{error}").contains("size = 4"), "unhelpful error: {error}");
    assert!(!out.exists());
    assert!(partial_dirs(tmp.path()).is_empty());

    // The parent of the output is a file: the staging directory cannot be created.
    let blocker = tmp.path().join("file");
    std::fs::write(&blocker, b"").expect("blocker");
    let error = run(&blocker.join("out"), 20, 0, 16).expect_err("cannot write under a file");
    assert!(
        error.to_string().contains(&blocker.display().to_string()),
        "the error must name the directory it cannot create: {error}"
    );
    assert!(partial_dirs(tmp.path()).is_empty());
}

/// The manifest at `path` as it was written before the `control` column existed: the
/// same writer, with that last column dropped from the header and from every record.
fn manifest_bytes_without_control(path: &Path, scratch: &Path) -> Vec<u8> {
    let mut manifest = Manifest::read(path).expect("valid manifest");
    assert_eq!(
        manifest.property_names.pop().as_deref(),
        Some("control"),
        "the control must be the last column, after every column the pin below covers"
    );
    for record in &mut manifest.records {
        record.properties.pop();
    }
    manifest.write(scratch).expect("write the reduced manifest");
    std::fs::read(scratch).expect("read the reduced manifest")
}

/// The output is part of the format: runs name their data directory by the image count
/// and size only, and expect the same images there whichever version generated them. The
/// first fingerprint was taken from the renderer as it was before it moved out of
/// `xtask`; it covers the manifest and the decoded pixels (not the PNG bytes, which an
/// encoder update may legitimately change). It predates the `control` column, so it
/// hashes the manifest without that column: it still proves that the images and every
/// earlier column are unchanged, and the full manifest has a pin of its own below.
#[test]
fn a_small_set_renders_exactly_as_pinned() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let manifest = run(&tmp.path().join("out"), 20, 0, 32).expect("run");
    let manifest_path = manifest.root.join("manifest.csv");
    let mut hash = fnv1a(
        0xcbf2_9ce4_8422_2325,
        &manifest_bytes_without_control(&manifest_path, &tmp.path().join("without-control.csv")),
    );
    for i in 0..manifest.records.len() {
        hash = fnv1a(hash, load_rgb(&manifest, i).as_raw());
    }
    assert_eq!(
        hash, 0x586b_360e_93eb_6d88,
        "the synthetic set of seed 0 changed (fingerprint {hash:#018x}); datasets generated before no longer match"
    );
    // The masks are pinned separately (taken when masks were added), so that the image
    // fingerprint above still proves that adding them left the images unchanged.
    let mut mask_hash = 0xcbf2_9ce4_8422_2325;
    for i in 0..manifest.records.len() {
        mask_hash = fnv1a(mask_hash, load_mask(&manifest, i).as_raw());
    }
    assert_eq!(
        mask_hash, 0xf66a_0897_57d5_a197,
        "the masks of the synthetic set of seed 0 changed (fingerprint {mask_hash:#018x})"
    );
    // The whole manifest, `control` column included, pinned when the column was added:
    // the control levels are part of the format as much as the visible ones.
    let manifest_hash = fnv1a(0xcbf2_9ce4_8422_2325, &std::fs::read(&manifest_path).expect("manifest"));
    assert_eq!(
        manifest_hash, 0x0caf_8e40_6378_5ce8,
        "the manifest of the synthetic set of seed 0 changed (fingerprint {manifest_hash:#018x})"
    );
}

/// Pearson's chi-square statistic of the contingency table `counts` (rows × columns)
/// against independence of its two factors, with its degrees of freedom.
fn chi_square_independence(counts: &[Vec<usize>]) -> (f64, usize) {
    let total: usize = counts.iter().flatten().sum();
    let rows: Vec<usize> = counts.iter().map(|r| r.iter().sum()).collect();
    let columns: Vec<usize> = (0..counts[0].len())
        .map(|j| counts.iter().map(|r| r[j]).sum())
        .collect();
    let mut statistic = 0.0;
    for (row, &row_total) in counts.iter().zip(&rows) {
        for (&count, &column_total) in row.iter().zip(&columns) {
            let expected = row_total as f64 * column_total as f64 / total as f64;
            statistic += (count as f64 - expected).powi(2) / expected;
        }
    }
    (statistic, (rows.len() - 1) * (columns.len() - 1))
}

/// Pearson's chi-square statistic of `counts` against equal expectations, with its
/// degrees of freedom.
fn chi_square_uniform(counts: &[usize]) -> (f64, usize) {
    let expected = counts.iter().sum::<usize>() as f64 / counts.len() as f64;
    let statistic = counts.iter().map(|&c| (c as f64 - expected).powi(2) / expected).sum();
    (statistic, counts.len() - 1)
}

/// A generous upper bound for a chi-square statistic with `df` degrees of freedom under
/// the null hypothesis: its mean plus six standard deviations (`df + 6·√(2·df)`), far
/// beyond the 99.9 % quantile for every `df` used here, while a dependent column
/// exceeds it by orders of magnitude.
fn chi_square_bound(df: usize) -> f64 {
    df as f64 + 6.0 * (2.0 * df as f64).sqrt()
}

/// The control must be what the paper's analysis needs from a negative control: uniform
/// over its levels, and independent of the class and of every visible property, so that
/// grouping images by it groups them at random. Keyed from the image's own stream, it
/// would repeat the rotation (its first draw); keyed by the class, it would be a function
/// of the class: both fail the contingency tests below.
#[test]
fn control_is_uniform_and_independent_of_class_and_properties() {
    let (seed, n) = (21, 4000);
    let scenes = plan(seed, n);
    let levels = CONTROL_LEVELS as usize;
    let control = PROPERTIES.len() - 1;
    assert_eq!(PROPERTIES[control].name, "control");
    assert_eq!(PROPERTIES[control].levels, CONTROL_LEVELS);

    let mut counts = vec![0usize; levels];
    for p in &scenes {
        counts[p.control as usize] += 1;
    }
    let (statistic, df) = chi_square_uniform(&counts);
    println!("control levels {counts:?}: chi-square {statistic:.1} on {df} df");
    assert!(
        statistic < chi_square_bound(df),
        "control levels are not uniform: {counts:?} (chi-square {statistic:.1} on {df} df)"
    );
    let expected = n as f64 / levels as f64;
    assert!(
        counts.iter().all(|&c| (c as f64 - expected).abs() < 0.2 * expected),
        "a control level is off by more than 20 % of {expected}: {counts:?}"
    );

    // Against the class: a 10 × 8 table of (class, control) counts.
    let table = |factor: &dyn Fn(&dml_datasets::synth::SceneParams) -> usize, factor_levels: usize| {
        let mut table = vec![vec![0usize; levels]; factor_levels];
        for p in &scenes {
            table[factor(p)][p.control as usize] += 1;
        }
        chi_square_independence(&table)
    };
    let (statistic, df) = table(&|p| p.shape.class_id() as usize, 10);
    println!("control vs class: chi-square {statistic:.1} on {df} df");
    assert!(
        statistic < chi_square_bound(df),
        "the control depends on the class (chi-square {statistic:.1} on {df} df)"
    );
    // Against every visible property, level by level.
    for (k, property) in PROPERTIES[..control].iter().enumerate() {
        let (statistic, df) = table(&|p| p.levels()[k] as usize, property.levels as usize);
        assert!(
            statistic < chi_square_bound(df),
            "the control depends on {} (chi-square {statistic:.1} on {df} df)",
            property.name
        );
    }
    // The test has power: a column that is a function of the class, or a copy of another
    // column (here the control against itself), is rejected by far.
    let (statistic, df) = {
        let mut table = vec![vec![0usize; levels]; 10];
        for p in &scenes {
            let class = p.shape.class_id() as usize;
            table[class][class % levels] += 1;
        }
        chi_square_independence(&table)
    };
    assert!(statistic > 10.0 * chi_square_bound(df), "{statistic:.1} on {df} df");
    let (statistic, df) = table(&|p| p.control as usize, levels);
    assert!(statistic > 10.0 * chi_square_bound(df), "{statistic:.1} on {df} df");
}

/// The renderer must ignore the control: scenes that differ only in it give the same
/// image and the same mask, byte for byte, at every level.
#[test]
fn scenes_differing_only_in_the_control_render_identically() {
    let size = 24;
    for (i, p) in plan(13, 12).iter().enumerate() {
        let (image, mask) = render_with_mask(p, size);
        for level in 0..CONTROL_LEVELS {
            let mut other = *p;
            other.control = level;
            assert_eq!(
                other.levels()[..PROPERTIES.len() - 1],
                p.levels()[..PROPERTIES.len() - 1]
            );
            let (other_image, other_mask) = render_with_mask(&other, size);
            assert_eq!(
                other_image.as_raw(),
                image.as_raw(),
                "scene {i}: control {level} instead of {} changed the image",
                p.control
            );
            assert_eq!(
                other_mask.as_raw(),
                mask.as_raw(),
                "scene {i}: control {level} instead of {} changed the mask",
                p.control
            );
            assert_eq!(
                render(&other, size),
                image,
                "scene {i}: `render` and `render_with_mask` disagree"
            );
        }
    }
}

#[test]
fn concurrent_generation_of_one_target_leaves_one_complete_set() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let out = tmp.path().join("out");
    // Two threads of one process share the process id; each must still stage privately,
    // and the one that finishes second must leave the first one's set alone.
    let results: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..2).map(|_| scope.spawn(|| run(&out, 40, 3, 16))).collect();
        handles.into_iter().map(|h| h.join().expect("no panic")).collect()
    });
    assert!(results.iter().any(Result::is_ok), "neither thread succeeded");
    for result in &results {
        if let Err(error) = result {
            assert!(
                matches!(error, dml_datasets::DatasetError::OutputExists { .. }),
                "{error}"
            );
        }
    }
    let manifest = Manifest::read(out.join("manifest.csv")).expect("one complete set");
    assert_eq!(manifest.records.len(), 40);
    assert!(partial_dirs(tmp.path()).is_empty(), "{:?}", partial_dirs(tmp.path()));
}
