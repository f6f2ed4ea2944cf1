//! Tests of the parts set: determinism (a pinned fingerprint), the manifest (columns, the
//! zero-shot split by class, slot columns that agree with the class), part masks that agree
//! with the class and with the object-mask readers, counterfactual renders that change exactly
//! one slot and nothing else, nuisances independent of the class, and bad input refused with no
//! output left behind.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use dml_data::{Manifest, Split};
use dml_datasets::synth::parts::labels::{
    LABEL_BACKGROUND, LABEL_BODY, LABEL_DISTRACTOR, LABELS, SLOT_LABELS, object_view, read_part_mask,
};
use dml_datasets::synth::parts::{
    CLASSES, Edit, PartType, PartsConfig, Slot, TRAIN_CLASSES, class_name, class_table, generate, plan, property_names,
    render, render_counterfactual,
};
use dml_datasets::synth::{mask_path, read_mask};
use dml_testkit::{FNV_OFFSET, fnv1a, read_tree};

fn config(n: usize, seed: u64, size: u32) -> PartsConfig {
    PartsConfig { n, seed, size }
}

fn decode_rgb(manifest: &Manifest, index: usize) -> image::RgbImage {
    image::open(manifest.image_path(&manifest.records[index]))
        .expect("decodable image")
        .to_rgb8()
}

/// The set is part of the format: runs name its directory by count and size only. The
/// fingerprint covers the manifest and the decoded pixels and masks (not the PNG bytes).
#[test]
fn a_small_set_is_deterministic_and_renders_as_pinned() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let a = generate(&config(256, 0, 48), &tmp.path().join("a"), false).expect("generate");
    let b = generate(&config(256, 0, 48), &tmp.path().join("b"), false).expect("generate");
    assert_eq!(read_tree(&a.root), read_tree(&b.root), "same settings, other bytes");
    let c = generate(&config(256, 1, 48), &tmp.path().join("c"), false).expect("generate");
    assert_ne!(read_tree(&a.root), read_tree(&c.root), "another seed, same bytes");

    let mut hash = fnv1a(
        FNV_OFFSET,
        &std::fs::read(a.root.join("manifest.csv")).expect("manifest"),
    );
    for i in 0..a.records.len() {
        hash = fnv1a(hash, decode_rgb(&a, i).as_raw());
        let mask = read_part_mask(mask_path(&a.root, &a.records[i].path)).expect("part mask");
        hash = fnv1a(hash, mask.as_raw());
    }
    assert_eq!(
        hash, 0xd805_e74a_1a79_6fe2,
        "the parts set of seed 0 changed (fingerprint {hash:#018x}); sets generated before no longer match"
    );
}

#[test]
fn manifest_has_the_columns_the_class_split_and_agreeing_slot_columns() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let m = generate(&config(300, 3, 48), &tmp.path().join("set"), false).expect("generate");
    assert_eq!(m.property_names, property_names());
    assert_eq!(m.property_names.len(), 22);
    for name in ["yaw", "position_x", "distractors", "crest", "front", "sides", "tail"] {
        assert!(m.property_names.iter().any(|n| n == name), "no column {name}");
    }
    assert_eq!(m.property_names.last().map(String::as_str), Some("control"));
    let column = |name: &str| m.property_names.iter().position(|n| n == name).expect("column");
    let mut per_class: BTreeMap<u32, usize> = BTreeMap::new();
    for r in &m.records {
        let class = r.class_id as usize;
        *per_class.entry(r.class_id).or_default() += 1;
        assert_eq!(r.class_name, class_name(&class_table()[class]));
        let expected = if class < TRAIN_CLASSES {
            Split::Train
        } else {
            Split::Test
        };
        assert_eq!(r.split, expected, "{}", r.path);
        for slot in Slot::ALL {
            let level: u32 = r.properties[column(slot.name())].parse().expect("level");
            assert_eq!(PartType::ALL[level as usize], class_table()[class][slot.index()]);
            assert_eq!(
                slot_name_part(&r.class_name, slot),
                PartType::ALL[level as usize].name()
            );
        }
    }
    // Balanced: every class has 2 or 3 of the 300 images, so each has a positive pair.
    assert_eq!(per_class.len(), CLASSES);
    assert!(per_class.values().all(|&c| c == 2 || c == 3), "{per_class:?}");
}

/// The type the class name lists for `slot`.
fn slot_name_part(class_name: &str, slot: Slot) -> &str {
    class_name.split('-').nth(slot.index()).expect("four types")
}

/// The part mask holds exactly the labels of the class's filled slots (a slot that is empty has
/// no pixel; a filled one has some in almost every image), and its object view is what the
/// shapes set's reader returns.
#[test]
fn part_masks_agree_with_the_class_and_with_the_object_mask_reader() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let m = generate(&config(256, 5, 48), &tmp.path().join("set"), false).expect("generate");
    let mut filled_and_seen = (0, 0);
    for r in &m.records {
        let path = mask_path(&m.root, &r.path);
        let labels = read_part_mask(&path).expect("part mask");
        let present: BTreeSet<u8> = labels.pixels().map(|p| p.0[0]).collect();
        assert!(present.is_subset(&LABELS.into_iter().collect()));
        assert!(present.contains(&LABEL_BODY) && present.contains(&LABEL_BACKGROUND));
        let combination = class_table()[r.class_id as usize];
        for slot in Slot::ALL {
            let label = SLOT_LABELS[slot.index()];
            if combination[slot.index()] == PartType::None {
                assert!(!present.contains(&label), "{}: empty {slot} has pixels", r.path);
            } else {
                filled_and_seen.0 += 1;
                filled_and_seen.1 += usize::from(present.contains(&label));
            }
        }
        let object = read_mask(&path).expect("object view");
        assert_eq!(object, object_view(&labels));
        assert!(object.pixels().all(|p| p.0[0] == 0 || p.0[0] == 255));
    }
    let (filled, seen) = filled_and_seen;
    assert!(
        seen as f64 > 0.95 * filled as f64,
        "{seen} of {filled} filled slots visible"
    );
}

#[test]
fn read_part_mask_refuses_an_object_mask() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let path = tmp.path().join("mask.png");
    let mut mask = image::GrayImage::new(8, 8);
    mask.put_pixel(3, 4, image::Luma([255]));
    mask.save(&path).expect("save");
    let e = read_part_mask(&path).unwrap_err().to_string();
    assert!(
        e.contains("mask.png") && e.contains("pixel (3, 4) has value 255"),
        "{e}"
    );
    // …and read_mask refuses a mask mixing both kinds, naming a pixel.
    mask.put_pixel(0, 0, image::Luma([LABEL_DISTRACTOR]));
    mask.save(&path).expect("save");
    let e = read_mask(&path).unwrap_err().to_string();
    assert!(
        e.contains("mask.png") && e.contains("pixel (3, 4) has value 255"),
        "{e}"
    );
}

/// A counterfactual changes the slot it names and nothing else: the removed slot's label is
/// gone from the mask, every other pixel keeps its label, every pixel away from the part is at
/// least as bright as before (the part could only cast shadow there), and few pixels far from it
/// change at all. Swapping a slot to its own type is the original image.
#[test]
fn counterfactuals_change_one_slot_and_nothing_else() {
    let cfg = config(256, 7, 64);
    let params = plan(cfg.seed, cfg.n);
    let index = params
        .iter()
        .position(|p| p.parts.iter().all(|&t| t != PartType::None))
        .expect("an image with every slot filled");
    let (image, labels) = render(&params[index], cfg.size);
    for slot in Slot::ALL {
        let label = SLOT_LABELS[slot.index()];
        let (edited, edited_labels) = render_counterfactual(&cfg, index, Edit::Remove(slot)).expect("render");
        assert!(
            labels.pixels().any(|p| p.0[0] == label),
            "{slot} not visible to begin with"
        );
        assert!(
            edited_labels.pixels().all(|p| p.0[0] != label),
            "{slot} still in the mask"
        );
        let (mut changed_far, mut changed_far_on_object) = (0, 0);
        for (x, y, before) in labels.enumerate_pixels() {
            let after = edited_labels.get_pixel(x, y).0[0];
            // A ray that did not hit the removed part hits what it hit before.
            if before.0[0] != label {
                assert_eq!(after, before.0[0], "{slot}: pixel ({x}, {y}) changed label");
            }
            let (old, new) = (image.get_pixel(x, y), edited.get_pixel(x, y));
            // Within two pixels of the part a pixel may lose the anti-aliasing of a boundary it
            // no longer has (its neighbour's label changed); elsewhere the part can only have
            // taken light away (its shadow and occlusion): without it every other pixel is at
            // least as bright.
            if near_label(&labels, x, y, label, 2) || old == new {
                continue;
            }
            let brightness = |p: &image::Rgb<u8>| p.0.iter().map(|&c| i32::from(c)).sum::<i32>();
            assert!(
                brightness(new) >= brightness(old) - 3,
                "{slot}: pixel ({x}, {y}) got darker without the part: {old:?} → {new:?}"
            );
            if !near_label(&labels, x, y, label, 6) {
                changed_far += 1;
                changed_far_on_object += usize::from(before.0[0] != LABEL_BACKGROUND);
            }
        }
        // The part's shadow on the ground may fall far from it; on the object, only its own
        // shadow and occlusion may reach beyond it, and they reach little.
        assert!(
            changed_far < 400,
            "{slot}: {changed_far} pixels changed far from the part"
        );
        assert!(
            changed_far_on_object < 25,
            "{slot}: {changed_far_on_object} object pixels changed far from the part"
        );
        assert_ne!(image, edited, "{slot}: removing it changed nothing");
    }
    // A swap to another type keeps the slot and changes its look.
    let crest = params[index].parts[Slot::Crest.index()];
    let other = PartType::SHAPES
        .into_iter()
        .find(|&t| t != crest)
        .expect("another type");
    let (swapped, swapped_labels) = render_counterfactual(&cfg, index, Edit::Swap(Slot::Crest, other)).expect("render");
    assert_ne!(swapped, image);
    assert!(swapped_labels.pixels().any(|p| p.0[0] == SLOT_LABELS[0]));
    // Swapping to the same type is the original image.
    let (same, _) = render_counterfactual(&cfg, index, Edit::Swap(Slot::Crest, crest)).expect("render");
    assert_eq!(same, image);
    let e = render_counterfactual(&cfg, 256, Edit::Remove(Slot::Tail))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("index = 256") && e.contains("outside the set of 256 images"),
        "{e}"
    );
}

/// Whether a pixel within `radius` of (`x`, `y`) has `label`.
fn near_label(labels: &image::GrayImage, x: u32, y: u32, label: u8, radius: i64) -> bool {
    let (w, h) = (labels.width() as i64, labels.height() as i64);
    (-radius..=radius).any(|dy| {
        (-radius..=radius).any(|dx| {
            let (nx, ny) = (x as i64 + dx, y as i64 + dy);
            nx >= 0 && ny >= 0 && nx < w && ny < h && labels.get_pixel(nx as u32, ny as u32).0[0] == label
        })
    })
}

/// No nuisance carries the class: the chi-square statistic of each nuisance column against the
/// class's slot columns stays at chance level (independent draws), while each slot column is a
/// function of the class.
#[test]
fn nuisances_are_independent_of_the_parts() {
    let params = plan(11, 6000);
    let names = property_names();
    let slot_columns: Vec<usize> = Slot::ALL
        .iter()
        .map(|s| names.iter().position(|n| n == s.name()).expect("slot column"))
        .collect();
    for (column, name) in names.iter().enumerate() {
        if slot_columns.contains(&column) {
            continue;
        }
        for &slot_column in &slot_columns {
            let mut counts: BTreeMap<(u32, u32), usize> = BTreeMap::new();
            for p in &params {
                let levels = p.levels();
                *counts.entry((levels[column], levels[slot_column])).or_default() += 1;
            }
            let (chi2, dof) = chi_square(&counts);
            // The 99.9 % quantile of chi-square is below dof + 3.3·√(2·dof) + 10 for these dofs.
            let bound = dof as f64 + 3.3 * (2.0 * dof as f64).sqrt() + 10.0;
            assert!(
                chi2 < bound,
                "{name} against {}: chi² {chi2:.1} (dof {dof})",
                names[slot_column]
            );
        }
    }
}

fn chi_square(counts: &BTreeMap<(u32, u32), usize>) -> (f64, usize) {
    let total: usize = counts.values().sum();
    let mut rows: BTreeMap<u32, usize> = BTreeMap::new();
    let mut cols: BTreeMap<u32, usize> = BTreeMap::new();
    for (&(r, c), &n) in counts {
        *rows.entry(r).or_default() += n;
        *cols.entry(c).or_default() += n;
    }
    let mut chi2 = 0.0;
    for (&r, &nr) in &rows {
        for (&c, &nc) in &cols {
            let expected = nr as f64 * nc as f64 / total as f64;
            let observed = counts.get(&(r, c)).copied().unwrap_or(0) as f64;
            chi2 += (observed - expected).powi(2) / expected;
        }
    }
    (chi2, (rows.len() - 1) * (cols.len() - 1))
}

/// Bad settings are refused before anything is written; an existing output is kept.
#[test]
fn bad_settings_are_named_and_leave_nothing_behind() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let out = tmp.path().join("set");
    let e = generate(&config(255, 0, 48), &out, false).unwrap_err().to_string();
    assert!(
        e.starts_with("n = 255:") && e.contains("need at least 256 images"),
        "{e}"
    );
    let e = generate(&config(300, 0, 40), &out, false).unwrap_err().to_string();
    assert!(e.starts_with("size = 40:") && e.contains("too small to see"), "{e}");
    assert!(!out.exists());
    assert_eq!(std::fs::read_dir(tmp.path()).expect("dir").count(), 0, "leftovers");
    generate(&config(256, 0, 48), &out, false).expect("generate");
    let before = read_tree(&out);
    let e = generate(&config(300, 0, 48), &out, false).unwrap_err().to_string();
    assert!(e.contains("already exists"), "{e}");
    assert_eq!(read_tree(&out), before);
    assert!(Path::new(&out).join("manifest.csv").is_file());
}
