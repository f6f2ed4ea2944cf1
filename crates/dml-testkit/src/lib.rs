//! Test support shared by every crate's reference harness.
//!
//! The external oracles (copied into `tests/fixtures/reference`) are
//! JSON files with `kind`, `name`, `config`, `inputs`, `expected` and `tolerance`. Every
//! harness reads *all* cases of its kinds from `$DML_REFERENCE_DIR` (falling back to the
//! workspace fixture folder), compares with one tolerance rule, and reports every failing
//! case by file name before failing. This crate is that shared logic, so that the rule
//! `|got - want| <= abs + rel * |want|` lives in exactly one place.

#![warn(missing_docs)]

pub mod bench;
pub mod readme;
pub mod rng;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// The workspace root: the nearest ancestor holding `Cargo.lock` of the package directory that
/// `cargo test` gives the running test (`CARGO_MANIFEST_DIR` at run time), else derived from this
/// crate's compile-time location (`crates/dml-testkit`).
///
/// The run-time lookup matters when two checkouts share a target directory: a test binary that
/// cargo did not rebuild still carries the other checkout's compile-time path.
pub fn workspace_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("CARGO_MANIFEST_DIR") {
        let mut dir = PathBuf::from(dir);
        loop {
            if dir.join("Cargo.lock").is_file() {
                return dir;
            }
            if !dir.pop() {
                break;
            }
        }
    }
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// The folder to read cases from: `$DML_REFERENCE_DIR` when set, else
/// `<workspace>/tests/fixtures/<default_subdir>`. A relative `$DML_REFERENCE_DIR` is taken from
/// the workspace root, where `cargo test` is typed: cargo runs each test binary in its own
/// package's directory, from which `../shared/reference/cases` would name nothing.
pub fn reference_dir(default_subdir: &str) -> PathBuf {
    resolve_reference_dir(std::env::var_os("DML_REFERENCE_DIR").map(PathBuf::from), default_subdir)
}

/// [`reference_dir`] for a given value of the variable.
fn resolve_reference_dir(given: Option<PathBuf>, default_subdir: &str) -> PathBuf {
    match given {
        Some(d) if d.is_absolute() => d,
        Some(d) => workspace_root().join(d),
        None => workspace_root().join("tests/fixtures").join(default_subdir),
    }
}

/// One reference case: its file and parsed JSON.
#[derive(Debug, Clone)]
pub struct Case {
    /// The case file.
    pub path: PathBuf,
    /// The whole JSON document.
    pub json: Value,
}

impl Case {
    /// The file name, used to name the case in failure reports.
    pub fn file_name(&self) -> String {
        self.path
            .file_name()
            .map_or_else(|| self.path.display().to_string(), |n| n.to_string_lossy().into_owned())
    }

    /// The `kind` field (`""` when absent).
    pub fn kind(&self) -> &str {
        self.json.get("kind").and_then(Value::as_str).unwrap_or("")
    }

    /// The `name` field (`""` when absent).
    pub fn name(&self) -> &str {
        self.json.get("name").and_then(Value::as_str).unwrap_or("")
    }

    /// A top-level field, or an error naming it.
    pub fn field(&self, key: &str) -> Result<&Value, String> {
        self.json.get(key).ok_or_else(|| format!("missing top-level \"{key}\""))
    }

    /// The case's tolerance.
    pub fn tolerance(&self) -> Result<Tolerance, String> {
        Tolerance::from_json(self.field("tolerance")?)
    }
}

/// Reads every `*.json` in `dir` whose `kind` is one of `kinds`, sorted by file name.
///
/// Files that are not valid JSON are an error (a broken case must not be skipped
/// silently); files of other kinds are ignored, so one folder can hold every kind.
pub fn load_cases(dir: &Path, kinds: &[&str]) -> Result<Vec<Case>, String> {
    let rd = std::fs::read_dir(dir).map_err(|e| format!("cannot read reference directory {}: {e}", dir.display()))?;
    let mut paths: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    let mut cases = Vec::new();
    for path in paths {
        let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let json: Value = serde_json::from_str(&text).map_err(|e| format!("{}: invalid JSON: {e}", path.display()))?;
        let case = Case { path, json };
        if kinds.contains(&case.kind()) {
            cases.push(case);
        }
    }
    Ok(cases)
}

/// Loads the cases of `kinds` from [`reference_dir`], panicking with a clear message when
/// the folder is unreadable or holds none of them (a wrong folder must not pass).
pub fn cases_or_panic(default_subdir: &str, kinds: &[&str]) -> Vec<Case> {
    let dir = reference_dir(default_subdir);
    let cases = load_cases(&dir, kinds).unwrap_or_else(|e| panic!("{e}"));
    assert!(!cases.is_empty(), "no case of kind {kinds:?} in {}", dir.display());
    cases
}

/// The elementwise closeness rule of the reference cases.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tolerance {
    /// Relative part.
    pub rel: f64,
    /// Absolute part.
    pub abs: f64,
}

impl Tolerance {
    /// Reads `{"rel": r, "abs": a}`.
    pub fn from_json(v: &Value) -> Result<Self, String> {
        match (
            v.get("rel").and_then(Value::as_f64),
            v.get("abs").and_then(Value::as_f64),
        ) {
            (Some(rel), Some(abs)) => Ok(Self { rel, abs }),
            _ => Err(format!("tolerance must have numeric \"rel\" and \"abs\", got {v}")),
        }
    }

    /// `|got - want| <= abs + rel * |want|`; NaN never passes.
    pub fn close(&self, got: f64, want: f64) -> bool {
        (got - want).abs() <= self.abs + self.rel * want.abs()
    }

    /// Compares two equally long arrays; on failure describes the count of bad elements
    /// and the worst one, prefixed by `what`.
    pub fn compare(&self, what: &str, got: &[f64], want: &[f64]) -> Result<(), String> {
        if got.len() != want.len() {
            return Err(format!("{what}: got {} values, want {}", got.len(), want.len()));
        }
        let mut bad = 0usize;
        let mut worst: Option<(usize, f64)> = None;
        for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
            if !self.close(g, w) {
                bad += 1;
                let excess = if g.is_nan() {
                    f64::INFINITY
                } else {
                    (g - w).abs() - self.abs - self.rel * w.abs()
                };
                if worst.is_none_or(|(_, e)| excess > e) {
                    worst = Some((i, excess));
                }
            }
        }
        match worst {
            None => Ok(()),
            Some((i, _)) => Err(format!(
                "{what}: {bad} of {} values outside abs {} + rel {}; worst at flat index {i}: got {} want {}",
                got.len(),
                self.abs,
                self.rel,
                got[i],
                want[i]
            )),
        }
    }
}

/// A nested JSON number array flattened row-major, with its shape.
#[derive(Debug, Clone, PartialEq)]
pub struct Array {
    /// Row-major values.
    pub data: Vec<f64>,
    /// Extent of each dimension (empty for a scalar).
    pub shape: Vec<usize>,
}

impl Array {
    /// Parses a number or a rectangular nested array; `what` names it in errors.
    pub fn from_json(v: &Value, what: &str) -> Result<Self, String> {
        let mut shape = Vec::new();
        let mut cur = v;
        while let Value::Array(items) = cur {
            shape.push(items.len());
            match items.first() {
                Some(first) => cur = first,
                None => break,
            }
        }
        let mut data = Vec::new();
        flatten(v, &shape, 0, what, &mut data)?;
        Ok(Self { data, shape })
    }

    /// The values as `f32`.
    pub fn to_f32(&self) -> Vec<f32> {
        self.data.iter().map(|&x| x as f32).collect()
    }
}

fn flatten(v: &Value, shape: &[usize], depth: usize, what: &str, out: &mut Vec<f64>) -> Result<(), String> {
    match v {
        Value::Array(items) => {
            if depth >= shape.len() || items.len() != shape[depth] {
                return Err(format!("{what} is not rectangular (shape {shape:?}) at depth {depth}"));
            }
            for (i, item) in items.iter().enumerate() {
                flatten(item, shape, depth + 1, &format!("{what}[{i}]"), out)?;
            }
            Ok(())
        }
        Value::Number(n) if depth == shape.len() => {
            out.push(n.as_f64().ok_or_else(|| format!("{what} is not a finite number"))?);
            Ok(())
        }
        // JSON has no NaN; the generators write null for it.
        Value::Null if depth == shape.len() => {
            out.push(f64::NAN);
            Ok(())
        }
        other => Err(format!(
            "{what}: unexpected {other} at depth {depth} of shape {shape:?}"
        )),
    }
}

/// A JSON path lookup `a.b.c`, with an error naming the missing key.
pub fn get<'a>(v: &'a Value, path: &str) -> Result<&'a Value, String> {
    let mut cur = v;
    for key in path.split('.') {
        cur = cur
            .get(key)
            .ok_or_else(|| format!("missing \"{path}\" (no \"{key}\")"))?;
    }
    Ok(cur)
}

/// Collects per-case failures and panics once at the end with all of them.
#[derive(Debug, Default)]
pub struct Report {
    passed: usize,
    failed: Vec<(String, String)>,
}

impl Report {
    /// An empty report.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records the outcome of one case.
    pub fn record(&mut self, case: &Case, outcome: Result<(), String>) {
        match outcome {
            Ok(()) => self.passed += 1,
            Err(e) => self.failed.push((case.file_name(), e)),
        }
    }

    /// Number of passing cases.
    pub fn passed(&self) -> usize {
        self.passed
    }

    /// Panics listing every failing case (file name and reason) when any failed.
    pub fn finish(self, what: &str) {
        eprintln!("{what}: {} passed, {} failed", self.passed, self.failed.len());
        if !self.failed.is_empty() {
            let mut msg = format!(
                "{} of {} {what} cases failed:\n",
                self.failed.len(),
                self.passed + self.failed.len()
            );
            for (file, e) in &self.failed {
                let _ = writeln!(msg, "  {file}: {e}");
            }
            panic!("{msg}");
        }
    }
}

/// Every file under `dir` (path relative to `dir` → bytes), in sorted order: two generated
/// trees compare equal exactly when they hold the same files with the same bytes.
///
/// # Panics
/// When the directory or a file in it cannot be read (a test's own output).
pub fn read_tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("readable dir") {
            let path = entry.expect("dir entry").path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let rel = path
                    .strip_prefix(dir)
                    .expect("inside dir")
                    .to_string_lossy()
                    .into_owned();
                files.insert(rel, std::fs::read(&path).expect("readable file"));
            }
        }
    }
    files
}

/// Writes a gzipped IDX file (the format of MNIST and Fashion-MNIST): the big-endian `magic`
/// and dimensions, then `data`.
///
/// # Panics
/// When the file cannot be written (a test's own output).
pub fn write_idx_gz(path: &Path, magic: u32, dims: &[u32], data: &[u8]) {
    use std::io::Write as _;
    let mut raw = magic.to_be_bytes().to_vec();
    for d in dims {
        raw.extend(d.to_be_bytes());
    }
    raw.extend(data);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&raw).unwrap();
    std::fs::write(path, gz.finish().unwrap()).unwrap();
}

/// A miniature Fashion-MNIST in `src` in the official layout: `n` 28 × 28 images per part
/// (`train`, `t10k`), labels cycling through 0–9.
///
/// # Panics
/// When the files cannot be written (a test's own output).
pub fn mini_fashion_mnist(src: &Path, n: u32) {
    std::fs::create_dir_all(src).unwrap();
    for part in ["train", "t10k"] {
        let pixels: Vec<u8> = (0..n * 784).map(|i| (i % 251) as u8).collect();
        let labels: Vec<u8> = (0..n).map(|i| (i % 10) as u8).collect();
        write_idx_gz(
            &src.join(format!("{part}-images-idx3-ubyte.gz")),
            0x0803,
            &[n, 28, 28],
            &pixels,
        );
        write_idx_gz(&src.join(format!("{part}-labels-idx1-ubyte.gz")), 0x0801, &[n], &labels);
    }
}

/// FNV-1a (64 bit) of `bytes`, continuing from `hash` (start from [`FNV_OFFSET`]): a
/// fingerprint that any changed byte changes, and one that does not depend on the standard
/// library's hasher, so pinned output stays pinned across Rust versions.
pub fn fnv1a(mut hash: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// The FNV-1a offset basis, where a fingerprint starts.
pub const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relative_reference_dir_is_taken_from_the_workspace_root() {
        let root = workspace_root();
        assert_eq!(
            resolve_reference_dir(Some(PathBuf::from("../shared/cases")), "reference"),
            root.join("../shared/cases")
        );
        assert_eq!(
            resolve_reference_dir(Some(PathBuf::from("/data/cases")), "reference"),
            PathBuf::from("/data/cases")
        );
        assert_eq!(
            resolve_reference_dir(None, "reference"),
            root.join("tests/fixtures/reference")
        );
        // The default is a real folder of this workspace.
        assert!(root.join("tests/fixtures/reference").is_dir());
    }

    #[test]
    fn tolerance_rule_and_worst_element() {
        let t = Tolerance { rel: 0.1, abs: 0.01 };
        assert!(t.close(1.1, 1.0));
        assert!(!t.close(1.2, 1.0));
        assert!(!t.close(f64::NAN, 1.0));
        let e = t.compare("x", &[1.0, 5.0, 2.0], &[1.0, 1.0, 1.0]).unwrap_err();
        assert!(e.contains("2 of 3") && e.contains("flat index 1"), "{e}");
    }

    #[test]
    fn arrays_parse_with_shape_and_reject_ragged() {
        let v: Value = serde_json::from_str("[[1,2,3],[4,5,6]]").unwrap();
        let a = Array::from_json(&v, "m").unwrap();
        assert_eq!(a.shape, vec![2, 3]);
        assert_eq!(a.data, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let ragged: Value = serde_json::from_str("[[1,2],[3]]").unwrap();
        assert!(Array::from_json(&ragged, "m").unwrap_err().contains("m"));
        let scalar = Array::from_json(&serde_json::json!(2.5), "s").unwrap();
        assert!(scalar.shape.is_empty() && scalar.data == vec![2.5]);
    }
}
