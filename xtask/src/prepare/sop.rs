//! Stanford Online Products (Oh Song et al., 2016).
//!
//! The source is the `Stanford_Online_Products` directory, a directory containing it,
//! or `Stanford_Online_Products.zip` (whose members live below
//! `Stanford_Online_Products/`). `Ebay_train.txt` and `Ebay_test.txt` list the images,
//! after the header `image_id class_id super_class_id path`, as rows like
//! `1 1 1 bicycle_final/111085122871_0.JPG`; the paths are relative to the dataset root.
//!
//! The train list gives the `train` split (classes 1–11,318) and the test list the `test`
//! split (classes 11,319–22,634); class ids are the official ones. A class is one
//! product, whose images are named `<product id>_<n>.JPG` in the directory of its
//! super-class, so the class name is `<super-class directory>/<product id>`, e.g.
//! `bicycle_final/111085122871`, taken from the first image of the class in the list.
//! Images keep their official relative paths below `images/`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use dml_data::{Manifest, Record, Split};

use super::archive::{self, Source};
use super::verify::verify_images;

/// The directory every member of the official zip archive lives in.
const ROOT: &str = "Stanford_Online_Products";
/// The lists and the split each one gives, in manifest order.
const LISTS: [(&str, Split); 2] = [("Ebay_train.txt", Split::Train), ("Ebay_test.txt", Split::Test)];
/// The header line of both lists.
const HEADER: [&str; 4] = ["image_id", "class_id", "super_class_id", "path"];

/// Reads Stanford Online Products from `src` (directory or zip), copies its images to
/// `dir/images/` and returns the manifest (rooted at `dir`). Every image is checked to
/// decode.
pub fn build(src: &Path, dir: &Path) -> anyhow::Result<Manifest> {
    let source = Source::open(src).context("Stanford Online Products: cannot open --src")?;
    let (prefix, mut lists) = read_lists(&source)?;

    let mut manifest = Manifest::new(dir, vec![]);
    let mut files: Vec<(String, PathBuf)> = Vec::new();
    // Where each class and path was first seen, to reject a class in both lists and an
    // image listed twice with the line of the first occurrence.
    let mut classes: HashMap<u32, Seen> = HashMap::new();
    let mut paths: HashMap<String, (String, usize)> = HashMap::new();
    for (name, split) in LISTS {
        let member = format!("{prefix}{name}");
        let label = source.display_name(&member);
        let bytes = lists
            .remove(&member)
            .with_context(|| format!("Stanford Online Products: {label} is missing"))?;
        let text = archive::utf8(&label, bytes)?;
        for row in parse_list(&text, &label)? {
            if let Some((first_label, first_line)) = paths.get(&row.path) {
                bail!(
                    "{label}:{}: image {:?} is already listed at {first_label}:{first_line}",
                    row.line,
                    row.path
                );
            }
            paths.insert(row.path.clone(), (label.clone(), row.line));
            let seen = classes.entry(row.class_id).or_insert_with(|| Seen {
                name: class_name(&row.path),
                split,
                label: label.clone(),
                line: row.line,
            });
            if seen.split != split {
                bail!(
                    "{label}:{}: class {} is also listed at {}:{}; train and test classes must be disjoint",
                    row.line,
                    row.class_id,
                    seen.label,
                    seen.line
                );
            }
            let rel = format!("images/{}", row.path);
            files.push((format!("{prefix}{}", row.path), dir.join(&rel)));
            manifest.records.push(Record {
                path: rel,
                class_id: row.class_id,
                class_name: seen.name.clone(),
                split,
                properties: vec![],
            });
        }
    }
    source
        .extract(&files)
        .context("Stanford Online Products: cannot copy the images")?;
    verify_images(&manifest).context("Stanford Online Products: corrupt images")?;
    Ok(manifest)
}

/// The first occurrence of a class.
struct Seen {
    name: String,
    split: Split,
    label: String,
    line: usize,
}

/// Finds both lists at the source's top level or below `Stanford_Online_Products/`.
/// Returns the member prefix and the files read.
fn read_lists(source: &Source) -> anyhow::Result<(String, HashMap<String, Vec<u8>>)> {
    for prefix in [format!("{ROOT}/"), String::new()] {
        let names: Vec<String> = LISTS.iter().map(|(n, _)| format!("{prefix}{n}")).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let found = source
            .read_files(&refs)
            .context("Stanford Online Products: cannot read the image lists")?;
        if !found.is_empty() {
            return Ok((prefix, found));
        }
    }
    bail!(
        "Stanford Online Products: {} holds neither {ROOT}/Ebay_train.txt nor Ebay_train.txt; \
         expected the Stanford_Online_Products directory or its zip archive",
        source.path().display()
    )
}

/// One row of `Ebay_train.txt` / `Ebay_test.txt`.
struct Row {
    line: usize,
    class_id: u32,
    path: String,
}

/// Parses a list: the header, then `<image_id> <class_id> <super_class_id> <path>` rows.
fn parse_list(text: &str, label: &str) -> anyhow::Result<Vec<Row>> {
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(i, line)| (i + 1, line.trim()))
        .filter(|(_, line)| !line.is_empty());
    match lines.next() {
        Some((_, header)) if header.split_whitespace().eq(HEADER) => {}
        Some((line_no, header)) => {
            bail!(
                "{label}:{line_no}: expected the header '{}', found {header:?}",
                HEADER.join(" ")
            )
        }
        None => bail!("{label}: the list is empty"),
    }
    let mut rows = Vec::new();
    let mut line_of_id: HashMap<u64, usize> = HashMap::new();
    for (line_no, line) in lines {
        let (image_id, class_id, path) = parse_row(line).with_context(|| {
            format!(
                "{label}:{line_no}: expected '<image_id> <class_id> <super_class_id> <path>' with integer ids, \
                 found {line:?}"
            )
        })?;
        let path = archive::normalize(path)
            .with_context(|| format!("{label}:{line_no}: image path {path:?} must be a relative path without '..'"))?;
        if let Some(first) = line_of_id.insert(image_id, line_no) {
            bail!("{label}:{line_no}: duplicate image id {image_id} (first on line {first})");
        }
        rows.push(Row {
            line: line_no,
            class_id,
            path,
        });
    }
    Ok(rows)
}

/// Splits a row into image id, class id and path; the super-class id is checked to be
/// an integer but not kept, because the path's directory names the super-class.
fn parse_row(line: &str) -> Option<(u64, u32, &str)> {
    let mut fields = line.split_whitespace();
    let image_id = fields.next()?.parse().ok()?;
    let class_id = fields.next()?.parse().ok()?;
    fields.next()?.parse::<u32>().ok()?;
    let path = fields.next()?;
    fields.next().is_none().then_some((image_id, class_id, path))
}

/// The class name given by an image path: `bicycle_final/111085122871_0.JPG` →
/// `bicycle_final/111085122871` (the super-class directory and the product id, which is
/// the file name without its extension and its `_<n>` image number).
fn class_name(path: &str) -> String {
    let (dir, file) = path.rsplit_once('/').unwrap_or(("", path));
    let stem = file.rsplit_once('.').map_or(file, |(stem, _)| stem);
    let product = match stem.rsplit_once('_') {
        Some((product, n)) if !product.is_empty() && !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => product,
        _ => stem,
    };
    if dir.is_empty() {
        product.to_string()
    } else {
        format!("{dir}/{product}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_names_are_super_class_and_product() {
        assert_eq!(
            class_name("bicycle_final/111085122871_0.JPG"),
            "bicycle_final/111085122871"
        );
        assert_eq!(class_name("chair_final/2221_x.JPG"), "chair_final/2221_x");
        assert_eq!(class_name("plain.jpg"), "plain");
    }

    #[test]
    fn rows_name_the_file_and_line() {
        let head = "image_id class_id super_class_id path\n";
        let e = parse_list(&format!("{head}1 1 1 a/b_0.JPG\n1 x 1 a/b_1.JPG\n"), "Ebay_train.txt")
            .err()
            .unwrap();
        assert!(e.to_string().starts_with("Ebay_train.txt:3: expected"), "{e}");
        let e = parse_list(&format!("{head}1 1 1 a/b_0.JPG\n1 1 1 a/b_1.JPG\n"), "Ebay_train.txt")
            .err()
            .unwrap();
        assert!(
            e.to_string()
                .contains("Ebay_train.txt:3: duplicate image id 1 (first on line 2)"),
            "{e}"
        );
        let e = parse_list("id class path\n", "Ebay_test.txt").err().unwrap();
        assert!(e.to_string().starts_with("Ebay_test.txt:1: expected the header"), "{e}");
    }
}
