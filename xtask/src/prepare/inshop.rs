//! In-shop Clothes Retrieval (DeepFashion, Liu et al., 2016).
//!
//! The source is the benchmark directory. `list_eval_partition.txt` (at its top level or
//! in `Eval/`) starts with the number of images and the header
//! `image_name item_id evaluation_status`, then lists every image as
//! `img/WOMEN/Dresses/id_00000002/02_1_front.jpg id_00000002 train` with the status
//! `train`, `query` or `gallery`. The images are in `img/`, `Img/img/`, or the zip archive
//! `img.zip` / `Img/img.zip` whose members start with `img/`.
//!
//! The status is the split. A class is one item: the class id is the item's number
//! (`id_00000002` → 2) and the class name the item id. Images go to `images/` with their
//! path below `img/` (`images/WOMEN/Dresses/id_00000002/02_1_front.jpg`).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use dml_data::{Manifest, Record, Split};

use super::archive::{self, Source};
use super::verify::verify_images;

/// The list's name, and the directories of the benchmark it may be in.
const LIST: &str = "list_eval_partition.txt";
const LIST_DIRS: [&str; 2] = ["", "Eval"];
/// The header line of the list.
const HEADER: [&str; 3] = ["image_name", "item_id", "evaluation_status"];

/// Reads In-shop Clothes Retrieval from the benchmark directory `src`, copies its images
/// to `dir/images/` and returns the manifest (rooted at `dir`) with the official
/// `train`, `query` and `gallery` splits. Every image is checked to decode.
pub fn build(src: &Path, dir: &Path) -> anyhow::Result<Manifest> {
    if !src.is_dir() {
        bail!(
            "In-shop: --src {} must be the benchmark directory holding {LIST} (or Eval/{LIST}) and img/ or img.zip",
            src.display()
        );
    }
    let list_path = LIST_DIRS
        .iter()
        .map(|d| src.join(d).join(LIST))
        .find(|p| p.is_file())
        .with_context(|| format!("In-shop: neither {LIST} nor Eval/{LIST} exists in {}", src.display()))?;
    let label = list_path.display().to_string();
    let bytes = std::fs::read(&list_path).with_context(|| format!("cannot read {label}"))?;
    let rows = parse_list(&archive::utf8(&label, bytes)?, &label)?;
    check_items(&rows, &label)?;
    let images = image_source(src)?;

    let mut manifest = Manifest::new(dir, vec![]);
    let mut files: Vec<(String, PathBuf)> = Vec::with_capacity(rows.len());
    for row in rows {
        let below_img = row.path.strip_prefix("img/").unwrap_or(&row.path);
        let rel = format!("images/{below_img}");
        files.push((row.path, dir.join(&rel)));
        manifest.records.push(Record {
            path: rel,
            class_id: row.class_id,
            class_name: row.item,
            split: row.split,
            properties: vec![],
        });
    }
    images.extract(&files).context("In-shop: cannot copy the images")?;
    verify_images(&manifest).context("In-shop: corrupt images")?;
    Ok(manifest)
}

/// Finds the images: a directory holding `img/` (the benchmark directory or its `Img/`)
/// or an `img.zip` archive; members are named as in the list (`img/...`).
fn image_source(src: &Path) -> anyhow::Result<Source> {
    for root in [src.to_path_buf(), src.join("Img")] {
        if root.join("img").is_dir() {
            return Source::open(&root);
        }
    }
    for zip in [src.join("img.zip"), src.join("Img").join("img.zip")] {
        if zip.is_file() {
            return Source::open(&zip).context("In-shop: cannot open the image archive");
        }
    }
    bail!(
        "In-shop: no images in {}: expected img/, Img/img/, img.zip or Img/img.zip",
        src.display()
    )
}

/// One image of the list.
struct Row {
    line: usize,
    path: String,
    item: String,
    class_id: u32,
    split: Split,
}

/// Parses the list: the image count, the header, then `<image_name> <item_id>
/// <evaluation_status>` rows; checks that the count matches and no image is listed twice.
fn parse_list(text: &str, label: &str) -> anyhow::Result<Vec<Row>> {
    let mut lines = text.lines().enumerate().map(|(i, line)| (i + 1, line.trim()));
    let first = lines.next().map_or("", |(_, line)| line);
    let count: usize = first
        .parse()
        .with_context(|| format!("{label}:1: expected the number of images on the first line, found {first:?}"))?;
    match lines.next() {
        Some((_, header)) if header.split_whitespace().eq(HEADER) => {}
        header => bail!(
            "{label}:2: expected the header '{}', found {:?}",
            HEADER.join(" "),
            header.map_or("", |(_, line)| line)
        ),
    }
    let mut rows = Vec::with_capacity(count);
    let mut line_of_path: HashMap<String, usize> = HashMap::new();
    for (line_no, line) in lines.filter(|(_, line)| !line.is_empty()) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [path, item, status] = fields[..] else {
            bail!("{label}:{line_no}: expected '<image_name> <item_id> <evaluation_status>', found {line:?}");
        };
        let split = match status {
            "train" => Split::Train,
            "query" => Split::Query,
            "gallery" => Split::Gallery,
            _ => bail!("{label}:{line_no}: evaluation status {status:?} is not train, query or gallery"),
        };
        let class_id = item
            .strip_prefix("id_")
            .filter(|digits| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|digits| digits.parse::<u32>().ok())
            .with_context(|| format!("{label}:{line_no}: item id {item:?} is not of the form id_<number>"))?;
        let path = archive::normalize(path)
            .with_context(|| format!("{label}:{line_no}: image path {path:?} must be a relative path without '..'"))?;
        if let Some(first) = line_of_path.insert(path.clone(), line_no) {
            bail!("{label}:{line_no}: duplicate image {path:?} (first on line {first})");
        }
        rows.push(Row {
            line: line_no,
            path,
            item: item.to_string(),
            class_id,
            split,
        });
    }
    if rows.len() != count {
        bail!(
            "{label}:1: the first line announces {count} images but {} are listed",
            rows.len()
        );
    }
    Ok(rows)
}

/// Checks what the manifest validator would reject, but with the item and line named:
/// an item is either a training item or a query/gallery item, two items do not share a
/// number, a training item has at least two images (one image has no positive pair),
/// and a query item has gallery images.
fn check_items(rows: &[Row], label: &str) -> anyhow::Result<()> {
    struct Item<'a> {
        name: &'a str,
        first_line: usize,
        counts: BTreeMap<Split, usize>,
    }
    let mut items: BTreeMap<u32, Item> = BTreeMap::new();
    for row in rows {
        let item = items.entry(row.class_id).or_insert_with(|| Item {
            name: &row.item,
            first_line: row.line,
            counts: BTreeMap::new(),
        });
        if item.name != row.item {
            bail!(
                "{label}:{}: item {} has the same number as item {} (line {})",
                row.line,
                row.item,
                item.name,
                item.first_line
            );
        }
        let is_train = row.split == Split::Train;
        if let Some((&other, _)) = item.counts.iter().find(|&(&s, _)| (s == Split::Train) != is_train) {
            bail!(
                "{label}:{}: item {} is listed as {} here but as {other} on line {}; \
                 training items and query/gallery items must be disjoint",
                row.line,
                row.item,
                row.split,
                item.first_line
            );
        }
        *item.counts.entry(row.split).or_default() += 1;
    }
    for item in items.values() {
        if item.counts.get(&Split::Train) == Some(&1) {
            bail!(
                "{label}:{}: training item {} has a single image; at least two are needed for a positive pair",
                item.first_line,
                item.name
            );
        }
        if item.counts.contains_key(&Split::Query) && !item.counts.contains_key(&Split::Gallery) {
            bail!(
                "{label}:{}: item {} has query images but no gallery image",
                item.first_line,
                item.name
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = "image_name item_id evaluation_status";

    #[test]
    fn checks_the_count_and_the_rows() {
        let e = parse_list(&format!("3\n{HEAD}\nimg/a/1.jpg id_00000001 train\n"), "list")
            .err()
            .unwrap();
        assert!(
            e.to_string()
                .contains("list:1: the first line announces 3 images but 1 are listed"),
            "{e}"
        );
        let e = parse_list(&format!("1\n{HEAD}\nimg/a/1.jpg id_00000001 tarin\n"), "list")
            .err()
            .unwrap();
        assert!(e.to_string().starts_with("list:3: evaluation status \"tarin\""), "{e}");
        let e = parse_list(&format!("1\n{HEAD}\nimg/a/1.jpg item1 train\n"), "list")
            .err()
            .unwrap();
        assert!(e.to_string().starts_with("list:3: item id \"item1\""), "{e}");
        let e = parse_list("x\n", "list").err().unwrap();
        assert!(
            e.to_string().starts_with("list:1: expected the number of images"),
            "{e}"
        );
    }

    #[test]
    fn names_the_bad_item() {
        let text = format!(
            "4\n{HEAD}\nimg/a/1.jpg id_00000001 train\nimg/a/2.jpg id_00000001 train\n\
             img/b/1.jpg id_00000002 query\nimg/b/2.jpg id_00000002 train\n"
        );
        let e = check_items(&parse_list(&text, "list").unwrap(), "list").err().unwrap();
        assert!(
            e.to_string()
                .contains("list:6: item id_00000002 is listed as train here"),
            "{e}"
        );
        let text = format!("2\n{HEAD}\nimg/a/1.jpg id_00000001 train\nimg/b/1.jpg id_00000002 query\n");
        let e = check_items(&parse_list(&text, "list").unwrap(), "list").err().unwrap();
        assert!(
            e.to_string()
                .contains("list:3: training item id_00000001 has a single image"),
            "{e}"
        );
    }
}
