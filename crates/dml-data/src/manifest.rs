//! The manifest: one CSV file that describes a dataset.
//!
//! ```text
//! path,class_id,class_name,split[,property...]
//! images/001.Black_footed_Albatross/Black_Footed_Albatross_0001_796111.jpg,0,Black_footed_Albatross,train
//! ```
//!
//! Paths are relative to the directory holding the manifest and use `/` separators.
//! `split` is one of `train`, `val`, `test`, `query`, `gallery` (the last two for
//! In-shop-style query/gallery evaluation). Extra columns are free-form properties
//! (for instance the rendering parameters of the synthetic set), kept as strings.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Component, Path, PathBuf};
use std::str::FromStr;

use crate::error::DataError;

/// The fixed leading columns of every manifest.
pub const REQUIRED_COLUMNS: [&str; 4] = ["path", "class_id", "class_name", "split"];

/// Which part of a dataset an image belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Split {
    /// Training classes.
    Train,
    /// Training classes held out for model selection (never the test classes).
    Val,
    /// Unseen test classes; evaluated with query set = reference set.
    Test,
    /// Query images of a query/gallery evaluation (In-shop).
    Query,
    /// Gallery images of a query/gallery evaluation (In-shop).
    Gallery,
}

impl Split {
    /// Every split, in manifest order.
    pub const ALL: [Split; 5] = [Split::Train, Split::Val, Split::Test, Split::Query, Split::Gallery];

    /// The name used in manifests and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Split::Train => "train",
            Split::Val => "val",
            Split::Test => "test",
            Split::Query => "query",
            Split::Gallery => "gallery",
        }
    }
}

impl fmt::Display for Split {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Split {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Split::ALL
            .into_iter()
            .find(|split| split.as_str() == s)
            .ok_or_else(|| format!("unknown split {s:?} (expected one of train, val, test, query, gallery)"))
    }
}

/// One image of a dataset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Path relative to the manifest's directory, `/`-separated.
    pub path: String,
    /// Class id; ids are global across splits, so test classes have ids distinct from
    /// training classes.
    pub class_id: u32,
    /// Human-readable class name.
    pub class_name: String,
    /// The split this image belongs to.
    pub split: Split,
    /// Values of the manifest's property columns, aligned with
    /// [`Manifest::property_names`].
    pub properties: Vec<String>,
}

/// What [`Manifest::read_with`] checks beyond the syntax of each line.
#[derive(Debug, Clone)]
pub struct ValidationOptions {
    /// Check that every image file exists.
    pub check_files: bool,
    /// Minimum number of images of a class within a `train`, `val` or `test` split: a
    /// class with a single image has no positive pair, so it can neither be trained on
    /// nor evaluated with query = reference.
    pub min_images_per_class: usize,
}

impl Default for ValidationOptions {
    fn default() -> Self {
        Self {
            check_files: true,
            min_images_per_class: 2,
        }
    }
}

/// A dataset description: the manifest's directory, its property columns and its
/// records in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// Directory against which record paths are resolved.
    pub root: PathBuf,
    /// Names of the optional property columns, in column order.
    pub property_names: Vec<String>,
    /// The images, in file order.
    pub records: Vec<Record>,
}

impl Manifest {
    /// An empty manifest rooted at `root` with the given property columns.
    pub fn new(root: impl Into<PathBuf>, property_names: Vec<String>) -> Self {
        Self {
            root: root.into(),
            property_names,
            records: Vec::new(),
        }
    }

    /// Reads and fully validates `path` with the default [`ValidationOptions`].
    pub fn read(path: impl AsRef<Path>) -> Result<Self, DataError> {
        Self::read_with(path, &ValidationOptions::default())
    }

    /// Reads `path`, checks every line (column count, class id, split, path syntax,
    /// duplicates, class-name consistency) and then the dataset-level invariants of
    /// [`Manifest::validate`]. Errors name the file and the 1-based line.
    pub fn read_with(path: impl AsRef<Path>, options: &ValidationOptions) -> Result<Self, DataError> {
        let path = path.as_ref();
        let file = std::fs::File::open(path).map_err(|e| DataError::io(path, e))?;
        let root = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let line_error = |line: u64, message: String| DataError::Manifest {
            path: path.to_path_buf(),
            line,
            message,
        };

        let mut reader = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .from_reader(std::io::BufReader::new(file));
        let mut rows = reader.records();
        let header = match rows.next() {
            None => return Err(line_error(1, "empty manifest: missing header line".into())),
            Some(row) => row.map_err(|e| csv_error(path, e))?,
        };
        let header: Vec<String> = header.iter().map(|s| s.trim().to_string()).collect();
        if header.len() < REQUIRED_COLUMNS.len() || header[..REQUIRED_COLUMNS.len()] != REQUIRED_COLUMNS {
            return Err(line_error(
                1,
                format!(
                    "header must start with {}, found {}",
                    REQUIRED_COLUMNS.join(","),
                    header.join(",")
                ),
            ));
        }
        let property_names = header[REQUIRED_COLUMNS.len()..].to_vec();
        let mut manifest = Manifest::new(root, property_names);

        let mut first_line_of_path: HashMap<String, u64> = HashMap::new();
        let mut class_names: HashMap<u32, (String, u64)> = HashMap::new();
        for row in rows {
            let row = row.map_err(|e| csv_error(path, e))?;
            let line = row.position().map_or(0, |p| p.line());
            if row.len() == 1 && row[0].trim().is_empty() {
                continue;
            }
            if row.len() != header.len() {
                return Err(line_error(
                    line,
                    format!(
                        "expected {} columns ({}), found {}",
                        header.len(),
                        header.join(","),
                        row.len()
                    ),
                ));
            }
            let rel = row[0].trim();
            check_relative_path(rel).map_err(|m| line_error(line, m))?;
            let class_id: u32 = row[1]
                .trim()
                .parse()
                .map_err(|_| line_error(line, format!("class_id {:?} is not a non-negative integer", &row[1])))?;
            let class_name = row[2].trim().to_string();
            let split: Split = row[3].trim().parse().map_err(|m| line_error(line, m))?;
            if let Some(first) = first_line_of_path.insert(rel.to_string(), line) {
                return Err(line_error(
                    line,
                    format!("duplicate path {rel:?} (first listed on line {first})"),
                ));
            }
            match class_names.get(&class_id) {
                Some((name, first)) if *name != class_name => {
                    return Err(line_error(
                        line,
                        format!("class {class_id} is named {class_name:?} here but {name:?} on line {first}"),
                    ));
                }
                Some(_) => {}
                None => {
                    class_names.insert(class_id, (class_name.clone(), line));
                }
            }
            if options.check_files {
                let full = manifest.root.join(rel);
                if !full.is_file() {
                    return Err(line_error(
                        line,
                        format!("image file {} does not exist", full.display()),
                    ));
                }
            }
            manifest.records.push(Record {
                path: rel.to_string(),
                class_id,
                class_name,
                split,
                properties: row
                    .iter()
                    .skip(REQUIRED_COLUMNS.len())
                    .map(|s| s.trim().to_string())
                    .collect(),
            });
        }
        manifest
            .validate_invariants(options)
            .map_err(|message| DataError::Invalid {
                path: path.to_path_buf(),
                message,
            })?;
        Ok(manifest)
    }

    /// Checks the dataset-level invariants: every `train`/`val`/`test` class has at
    /// least `min_images_per_class` images in its split, a class appears in only one of
    /// the disjoint splits train / val / test, and every query class has gallery images.
    fn validate_invariants(&self, options: &ValidationOptions) -> Result<(), String> {
        let mut counts: BTreeMap<(Split, u32), usize> = BTreeMap::new();
        for record in &self.records {
            *counts.entry((record.split, record.class_id)).or_default() += 1;
        }
        for (&(split, class), &count) in &counts {
            if matches!(split, Split::Train | Split::Val | Split::Test) && count < options.min_images_per_class {
                return Err(format!(
                    "class {class} has {count} image(s) in split {split}; at least {} are needed for a positive pair",
                    options.min_images_per_class
                ));
            }
            if split == Split::Query && !counts.contains_key(&(Split::Gallery, class)) {
                return Err(format!("class {class} has query images but no gallery image"));
            }
        }
        let mut split_of_class: HashMap<u32, Split> = HashMap::new();
        for &(split, class) in counts.keys() {
            if !matches!(split, Split::Train | Split::Val | Split::Test) {
                continue;
            }
            if let Some(other) = split_of_class.insert(class, split) {
                return Err(format!(
                    "class {class} appears in both split {other} and split {split}; DML splits are disjoint by class"
                ));
            }
        }
        Ok(())
    }

    /// Checks the invariants of [`Manifest::read_with`] on an in-memory manifest (used
    /// by writers before anything reaches the disk).
    pub fn validate(&self, options: &ValidationOptions) -> Result<(), DataError> {
        let invalid = |message: String| DataError::Invalid {
            path: self.root.join("manifest.csv"),
            message,
        };
        let mut seen = HashMap::new();
        for (i, record) in self.records.iter().enumerate() {
            check_relative_path(&record.path).map_err(|m| invalid(format!("record {i}: {m}")))?;
            if record.properties.len() != self.property_names.len() {
                return Err(invalid(format!(
                    "record {i} ({}) has {} properties, expected {}",
                    record.path,
                    record.properties.len(),
                    self.property_names.len()
                )));
            }
            if let Some(first) = seen.insert(record.path.as_str(), i) {
                return Err(invalid(format!(
                    "duplicate path {:?} (records {first} and {i})",
                    record.path
                )));
            }
            if options.check_files && !self.root.join(&record.path).is_file() {
                return Err(invalid(format!(
                    "image file {} does not exist",
                    self.root.join(&record.path).display()
                )));
            }
        }
        self.validate_invariants(options).map_err(invalid)
    }

    /// Writes the manifest to `path` atomically: the CSV goes to a temporary file in the
    /// same directory, which is renamed over `path` only once it is complete.
    pub fn write(&self, path: impl AsRef<Path>) -> Result<(), DataError> {
        let path = path.as_ref();
        let mut header: Vec<&str> = REQUIRED_COLUMNS.to_vec();
        header.extend(self.property_names.iter().map(String::as_str));
        let mut buffer = Vec::new();
        {
            let mut writer = csv::Writer::from_writer(&mut buffer);
            let write_err = |e: csv::Error| DataError::io(path, std::io::Error::other(e));
            writer.write_record(&header).map_err(write_err)?;
            for record in &self.records {
                let class_id = record.class_id.to_string();
                let mut row: Vec<&str> = vec![&record.path, &class_id, &record.class_name, record.split.as_str()];
                row.extend(record.properties.iter().map(String::as_str));
                writer.write_record(&row).map_err(write_err)?;
            }
            writer.flush().map_err(|e| DataError::io(path, e))?;
        }
        write_atomic(path, &buffer)
    }

    /// Indices of the records in `split`, in file order.
    pub fn indices_of(&self, split: Split) -> Vec<usize> {
        (0..self.records.len())
            .filter(|&i| self.records[i].split == split)
            .collect()
    }

    /// Number of records per split, for reports.
    pub fn split_counts(&self) -> BTreeMap<Split, usize> {
        let mut counts = BTreeMap::new();
        for record in &self.records {
            *counts.entry(record.split).or_default() += 1;
        }
        counts
    }

    /// The absolute (root-joined) path of a record.
    pub fn image_path(&self, record: &Record) -> PathBuf {
        self.root.join(&record.path)
    }

    /// Moves the last `n` training classes (by class id) into the `val` split, so that
    /// models can be selected on classes that are neither trained on nor tested on.
    pub fn hold_out_val_classes(&mut self, n: usize) -> Result<(), DataError> {
        if n == 0 {
            return Ok(());
        }
        let mut train_classes: Vec<u32> = self
            .records
            .iter()
            .filter(|r| r.split == Split::Train)
            .map(|r| r.class_id)
            .collect();
        train_classes.sort_unstable();
        train_classes.dedup();
        if n >= train_classes.len() {
            return Err(DataError::Config(format!(
                "--val-classes {n} would leave no training class (the training split has {} classes)",
                train_classes.len()
            )));
        }
        let first_val = train_classes[train_classes.len() - n];
        for record in &mut self.records {
            if record.split == Split::Train && record.class_id >= first_val {
                record.split = Split::Val;
            }
        }
        Ok(())
    }
}

/// Writes `bytes` to `path` through a temporary sibling file and a rename, so that a
/// reader never observes a partially written file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), DataError> {
    let file_name = path
        .file_name()
        .ok_or_else(|| DataError::Config(format!("{} is not a file path", path.display())))?;
    let mut tmp_name = file_name.to_os_string();
    tmp_name.push(format!(".{}.tmp", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    std::fs::write(&tmp, bytes).map_err(|e| DataError::io(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        DataError::io(path, e)
    })
}

fn csv_error(path: &Path, error: csv::Error) -> DataError {
    let line = error.position().map_or(0, |p| p.line());
    DataError::Manifest {
        path: path.to_path_buf(),
        line,
        message: error.to_string(),
    }
}

/// A manifest path must stay inside the dataset directory.
fn check_relative_path(rel: &str) -> Result<(), String> {
    if rel.is_empty() {
        return Err("empty image path".into());
    }
    let p = Path::new(rel);
    if p.is_absolute() || rel.starts_with('/') || rel.contains('\\') {
        return Err(format!("image path {rel:?} must be relative and '/'-separated"));
    }
    if p.components().any(|c| !matches!(c, Component::Normal(_))) {
        return Err(format!("image path {rel:?} must not contain '.' or '..' components"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dataset(dir: &Path, rows: &str) -> PathBuf {
        std::fs::create_dir_all(dir.join("images")).unwrap();
        for name in ["a.png", "b.png", "c.png", "d.png"] {
            std::fs::write(dir.join("images").join(name), b"x").unwrap();
        }
        let path = dir.join("manifest.csv");
        std::fs::write(&path, rows).unwrap();
        path
    }

    fn tempdir(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("dml-data-manifest-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn reads_valid_manifest_with_properties() {
        let dir = tempdir("valid");
        let path = dataset(
            &dir,
            "path,class_id,class_name,split,hue\nimages/a.png,0,cat,train,1\nimages/b.png,0,cat,train,2\n\
             images/c.png,1,dog,test,3\nimages/d.png,1,dog,test,4\n",
        );
        let m = Manifest::read(&path).unwrap();
        assert_eq!(m.records.len(), 4);
        assert_eq!(m.property_names, vec!["hue"]);
        assert_eq!(m.records[2].split, Split::Test);
        assert_eq!(m.records[3].properties, vec!["4"]);
        assert_eq!(m.indices_of(Split::Train), vec![0, 1]);
        // A round trip through the writer gives the same manifest.
        let out = dir.join("copy.csv");
        m.write(&out).unwrap();
        assert_eq!(Manifest::read(&out).unwrap(), m);
    }

    fn error_of(tag: &str, rows: &str) -> String {
        let dir = tempdir(tag);
        Manifest::read(dataset(&dir, rows)).unwrap_err().to_string()
    }

    #[test]
    fn errors_name_the_line() {
        let head = "path,class_id,class_name,split\n";
        let e = error_of(
            "missing",
            &format!("{head}images/a.png,0,c,train\nimages/zz.png,0,c,train\n"),
        );
        assert!(
            e.contains("manifest.csv:3") && e.contains("zz.png") && e.contains("does not exist"),
            "{e}"
        );
        let e = error_of(
            "dup",
            &format!("{head}images/a.png,0,c,train\nimages/a.png,0,c,train\n"),
        );
        assert!(
            e.contains(":3") && e.contains("duplicate") && e.contains("line 2"),
            "{e}"
        );
        let e = error_of(
            "split",
            &format!("{head}images/a.png,0,c,train\nimages/b.png,0,c,tarin\n"),
        );
        assert!(e.contains(":3") && e.contains("unknown split \"tarin\""), "{e}");
        let e = error_of("cols", &format!("{head}images/a.png,0,c,train\nimages/b.png,0,train\n"));
        assert!(
            e.contains(":3") && e.contains("expected 4 columns") && e.contains("found 3"),
            "{e}"
        );
        let e = error_of("id", &format!("{head}images/a.png,x,c,train\n"));
        assert!(e.contains(":2") && e.contains("class_id"), "{e}");
        let e = error_of("header", "file,class\nimages/a.png,0\n");
        assert!(e.contains(":1") && e.contains("header"), "{e}");
        let e = error_of("dotdot", &format!("{head}../a.png,0,c,train\n"));
        assert!(e.contains(":2") && e.contains(".."), "{e}");
    }

    #[test]
    fn rejects_single_image_class_and_overlapping_splits() {
        let head = "path,class_id,class_name,split\n";
        let e = error_of(
            "one",
            &format!("{head}images/a.png,0,c,train\nimages/b.png,0,c,train\nimages/c.png,1,d,test\n"),
        );
        assert!(e.contains("class 1 has 1 image(s) in split test"), "{e}");
        let e = error_of(
            "overlap",
            &format!(
                "{head}images/a.png,0,c,train\nimages/b.png,0,c,train\nimages/c.png,0,c,test\nimages/d.png,0,c,test\n"
            ),
        );
        assert!(e.contains("both split train and split test"), "{e}");
        let e = error_of(
            "gallery",
            &format!("{head}images/a.png,0,c,query\nimages/b.png,1,d,gallery\n"),
        );
        assert!(e.contains("class 0 has query images but no gallery image"), "{e}");
    }

    #[test]
    fn holds_out_last_training_classes() {
        let mut m = Manifest::new("/x", vec![]);
        for (i, class) in [0u32, 0, 1, 1, 2, 2, 7, 7].into_iter().enumerate() {
            m.records.push(Record {
                path: format!("{i}.png"),
                class_id: class,
                class_name: class.to_string(),
                split: if class == 7 { Split::Test } else { Split::Train },
                properties: vec![],
            });
        }
        m.hold_out_val_classes(1).unwrap();
        let splits: Vec<Split> = m.records.iter().map(|r| r.split).collect();
        use Split::*;
        assert_eq!(splits, vec![Train, Train, Train, Train, Val, Val, Test, Test]);
        assert!(m.hold_out_val_classes(2).is_err());
    }
}
