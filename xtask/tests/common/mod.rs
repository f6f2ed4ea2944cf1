//! Helpers for the `prepare` tests: miniature datasets in the official layouts.
//!
//! The real datasets are gigabytes and not available to the tests, so each test builds
//! a few real (tiny) JPEGs and packs them the way the official release does: as a
//! directory tree, a `.tgz` or a `.zip`.

// Each test binary uses a different subset of these helpers.
#![allow(dead_code)]

use std::io::{Cursor, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use clap::Parser;
use dml_data::{Manifest, Split};

/// A file of a miniature dataset: its path relative to the dataset root and its bytes.
pub type File = (String, Vec<u8>);

/// A fresh, empty directory under the system's temporary directory, unique per process
/// and call, so that tests running in parallel never share files.
pub fn temp_dir(tag: &str) -> PathBuf {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    if n == 0 {
        remove_stale_dirs();
    }
    let dir = std::env::temp_dir().join(format!("xtask-prepare-{tag}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Deletes the directories of earlier test runs whose process has ended, so that the
/// kept directories (useful to inspect a failure) do not pile up. Only Linux can tell
/// whether a process is alive (through `/proc`); elsewhere nothing is deleted.
fn remove_stale_dirs() {
    if !Path::new("/proc/self").exists() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix("xtask-prepare-") else {
            continue;
        };
        // The name is `xtask-prepare-<tag>-<pid>-<n>`.
        let pid = rest.rsplit('-').nth(1).and_then(|p| p.parse::<u32>().ok());
        if pid.is_some_and(|pid| pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists()) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// A small JPEG whose pixels depend on `seed`, so every image of a test is distinct.
pub fn jpeg(seed: u32) -> Vec<u8> {
    let img = image::RgbImage::from_fn(24, 16, |x, y| {
        image::Rgb([
            (x * 10 + seed * 37) as u8,
            (y * 15 + seed * 11) as u8,
            ((x + y) * 5 + seed * 3) as u8,
        ])
    });
    let mut out = Cursor::new(Vec::new());
    img.write_to(&mut out, image::ImageFormat::Jpeg).unwrap();
    out.into_inner()
}

/// A JPEG cut in the middle of its scan data, as a broken download leaves it.
pub fn truncated_jpeg(seed: u32) -> Vec<u8> {
    let bytes = jpeg(seed);
    bytes[..bytes.len() * 3 / 4].to_vec()
}

/// A JPEG with valid headers whose entropy-coded data is replaced by garbage that
/// includes invalid markers.
pub fn garbage_jpeg(seed: u32) -> Vec<u8> {
    let mut bytes = jpeg(seed);
    let sos = bytes.windows(2).position(|w| w == [0xFF, 0xDA]).unwrap();
    let header_len = usize::from(u16::from_be_bytes([bytes[sos + 2], bytes[sos + 3]]));
    let end = bytes.len() - 2;
    for (i, b) in bytes[sos + 2 + header_len..end].iter_mut().enumerate() {
        *b = if i % 5 == 2 { 0xFF } else { (i * 73 % 199) as u8 + 1 };
    }
    bytes
}

/// Writes `files` below `root`.
pub fn write_tree(root: &Path, files: &[File]) {
    for (name, bytes) in files {
        let path = root.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }
}

/// Packs `files` into a gzip-compressed tar archive at `path`, with directory entries
/// as `tar czf` writes them.
pub fn write_tgz(path: &Path, files: &[File]) {
    let gz = flate2::write::GzEncoder::new(std::fs::File::create(path).unwrap(), flate2::Compression::fast());
    let mut tar = tar::Builder::new(gz);
    let mut dirs = std::collections::BTreeSet::new();
    for (name, bytes) in files {
        let mut parent = Path::new(name).parent();
        let mut new_dirs = Vec::new();
        while let Some(dir) = parent.filter(|d| !d.as_os_str().is_empty()) {
            if dirs.insert(dir.to_path_buf()) {
                new_dirs.push(dir.to_path_buf());
            }
            parent = dir.parent();
        }
        for dir in new_dirs.into_iter().rev() {
            let mut header = tar::Header::new_gnu();
            header.set_entry_type(tar::EntryType::Directory);
            header.set_mode(0o755);
            header.set_size(0);
            tar.append_data(&mut header, &dir, std::io::empty()).unwrap();
        }
        let mut header = tar::Header::new_gnu();
        header.set_mode(0o644);
        header.set_size(bytes.len() as u64);
        tar.append_data(&mut header, name, bytes.as_slice()).unwrap();
    }
    tar.into_inner().unwrap().finish().unwrap().flush().unwrap();
}

/// Packs `files` into a zip archive at `path` (deflated, as the official archives are).
pub fn write_zip(path: &Path, files: &[File]) {
    let mut zip = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    let options = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    for (name, bytes) in files {
        zip.start_file(name.as_str(), options).unwrap();
        zip.write_all(bytes).unwrap();
    }
    zip.finish().unwrap().flush().unwrap();
}

/// Cuts the file at `path` to `fraction` of its length.
pub fn truncate(path: &Path, fraction: f64) {
    let bytes = std::fs::read(path).unwrap();
    let len = (bytes.len() as f64 * fraction) as usize;
    std::fs::write(path, &bytes[..len]).unwrap();
}

/// Runs `xtask prepare <args>` through the library's command line, as `cargo xtask`
/// would, and returns the error chain as one string (`{:#}`) on failure.
pub fn prepare(args: &[&str]) -> Result<(), String> {
    let argv = ["xtask", "prepare"].into_iter().chain(args.iter().copied());
    let cli = xtask::Cli::try_parse_from(argv).map_err(|e| e.to_string())?;
    xtask::run(cli).map_err(|e| format!("{e:#}"))
}

/// A path as a `&str` for command lines.
pub fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// Reads `<out>/manifest.csv` and returns `(path, class_id, class_name, split)` rows.
pub fn read_rows(out: &Path) -> Vec<(String, u32, String, Split)> {
    let manifest = Manifest::read(out.join("manifest.csv")).unwrap();
    manifest
        .records
        .into_iter()
        .map(|r| (r.path, r.class_id, r.class_name, r.split))
        .collect()
}

/// Asserts that every `(source name, output path)` pair has identical bytes.
pub fn assert_same_bytes(files: &[File], out: &Path, pairs: &[(&str, &str)]) {
    for (source, output) in pairs {
        let want = &files.iter().find(|(n, _)| n == source).unwrap().1;
        let got = std::fs::read(out.join(output)).unwrap();
        assert!(&got == want, "{output} differs from {source}");
    }
}

/// Asserts that neither `out` nor a staging directory next to it (`<out>.partial-*`)
/// exists after a failed run.
pub fn assert_nothing_written(out: &Path) {
    assert!(!out.exists(), "{} was created", out.display());
    let name = out.file_name().unwrap().to_str().unwrap();
    let stray: Vec<String> = std::fs::read_dir(out.parent().unwrap())
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with(&format!("{name}.partial-")))
        .collect();
    assert!(stray.is_empty(), "staging directories left behind: {stray:?}");
}

/// Asserts that `result` failed with a message containing every one of `needles`.
pub fn assert_err(result: Result<(), String>, needles: &[&str]) {
    let error = result.expect_err("preparation should have failed");
    for needle in needles {
        assert!(error.contains(needle), "error lacks {needle:?}:\n{error}");
    }
}
