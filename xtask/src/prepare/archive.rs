//! Reading dataset files from a directory or an archive.
//!
//! Official datasets ship as `.tgz`/`.tar.gz`, `.tar` or `.zip` archives, or as the
//! directories those archives extract to. [`Source`] hides the difference: its files
//! ("members") are named by `/`-separated paths relative to the source's root (the
//! directory itself, or the archive's top level), small metadata files are read into
//! memory with [`Source::read_files`], and images are copied out with
//! [`Source::extract`].
//!
//! Archives are streamed, never loaded whole, because the real ones are gigabytes. Only
//! members that the caller asks for are written, to destinations the caller chose, so an
//! archive member named `../../etc/passwd` can never be written anywhere; members whose
//! names are absolute or contain `..` are skipped outright. Every error names the
//! directory or archive it concerns, so a truncated download is reported as such rather
//! than as a cryptic I/O error.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Component, Path, PathBuf};

use anyhow::{Context, bail};
use rayon::prelude::*;

/// How many missing members an error lists by name before it only counts the rest.
const MISSING_NAMES_SHOWN: usize = 10;

/// The largest member [`Source::read_files`] reads into memory: metadata lists are a few
/// megabytes at most, so anything larger means the caller asked for the wrong file.
const MAX_SMALL_FILE: u64 = 256 << 20;

/// An open zip archive.
type ZipReader = zip::ZipArchive<BufReader<File>>;

/// The container formats a [`Source`] can read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    /// An extracted directory.
    Dir,
    /// A gzip-compressed tar archive (`.tgz`, `.tar.gz`).
    TarGz,
    /// An uncompressed tar archive.
    Tar,
    /// A zip archive (stored or deflated members).
    Zip,
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Format::Dir => "directory",
            Format::TarGz => "gzip-compressed tar archive",
            Format::Tar => "tar archive",
            Format::Zip => "zip archive",
        })
    }
}

/// A directory or archive holding dataset files.
#[derive(Debug, Clone)]
pub(crate) struct Source {
    path: PathBuf,
    format: Format,
}

impl Source {
    /// Opens `path`: a directory, or an archive recognised by its first bytes (gzip, zip
    /// or ustar magic) or, for old tar files without magic, by a `.tar` extension.
    pub(crate) fn open(path: &Path) -> anyhow::Result<Self> {
        let meta = std::fs::metadata(path).with_context(|| format!("cannot read {}", path.display()))?;
        let format = if meta.is_dir() { Format::Dir } else { sniff(path)? };
        Ok(Self {
            path: path.to_path_buf(),
            format,
        })
    }

    /// The directory or archive file this source reads.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// A human-readable location of member `name`, for error messages: the file's path
    /// for a directory, and `<archive>/<name>` for an archive (as if the archive were a
    /// directory), so that `…/images.txt:17: …` reads naturally either way.
    pub(crate) fn display_name(&self, name: &str) -> String {
        format!("{}/{name}", self.path.display())
    }

    /// Reads the members `names` (small metadata files such as image lists) into memory.
    ///
    /// Returns the members found, keyed by the name as given; members that do not exist
    /// are simply absent, so that callers can probe alternative layouts. A tar archive is
    /// read only until every requested member has been seen.
    pub(crate) fn read_files(&self, names: &[&str]) -> anyhow::Result<HashMap<String, Vec<u8>>> {
        // Requests are matched by their normalised form (`./a/b` and `a/b` are the same
        // member); a name that cannot be normalised cannot exist in any source.
        let wanted: HashMap<String, &str> = names.iter().filter_map(|&n| normalize(n).map(|k| (k, n))).collect();
        let mut found = HashMap::new();
        match self.format {
            Format::Dir => {
                for (key, &name) in &wanted {
                    let path = self.path.join(key);
                    if path.is_file() {
                        let bytes = std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
                        found.insert(name.to_string(), bytes);
                    }
                }
            }
            Format::Zip => {
                let (mut archive, names) = self.open_zip()?;
                for (key, &name) in &wanted {
                    let Some(&index) = names.get(key) else { continue };
                    let mut member = archive.by_index(index).with_context(|| self.corrupt(key))?;
                    if member.is_dir() {
                        continue;
                    }
                    if member.size() > MAX_SMALL_FILE {
                        bail!(
                            "{} is too large ({} bytes) for a metadata file",
                            self.display_name(key),
                            member.size()
                        );
                    }
                    let mut bytes = Vec::with_capacity(member.size() as usize);
                    member.read_to_end(&mut bytes).with_context(|| self.corrupt(key))?;
                    found.insert(name.to_string(), bytes);
                }
            }
            Format::Tar | Format::TarGz => {
                let mut archive = tar::Archive::new(self.open_tar_stream()?);
                let entries = archive.entries().with_context(|| self.unreadable())?;
                for entry in entries {
                    if found.len() == wanted.len() {
                        break;
                    }
                    let mut entry = entry.with_context(|| self.unreadable())?;
                    let Some(key) = self.tar_member_name(&entry)? else {
                        continue;
                    };
                    let Some(&name) = wanted.get(&key) else { continue };
                    if entry.size() > MAX_SMALL_FILE {
                        bail!(
                            "{} is too large ({} bytes) for a metadata file",
                            self.display_name(&key),
                            entry.size()
                        );
                    }
                    let mut bytes = Vec::with_capacity(entry.size() as usize);
                    entry.read_to_end(&mut bytes).with_context(|| self.corrupt(&key))?;
                    found.insert(name.to_string(), bytes);
                }
            }
        }
        Ok(found)
    }

    /// Copies each member `name` of `files` to its destination path, creating parent
    /// directories as needed.
    ///
    /// Directories are hard-linked where possible (instantaneous and free of disk space)
    /// and copied otherwise; archives are streamed once from start to end, which also
    /// verifies their integrity (a truncated `.tgz` fails here with the archive's name).
    /// Members of the archive that are not requested are skipped. If requested members
    /// are missing, the error counts them and names the first few.
    pub(crate) fn extract(&self, files: &[(String, PathBuf)]) -> anyhow::Result<()> {
        // Every request is checked and normalised first, so that an unsafe name fails
        // before anything is written.
        let mut requests: Vec<(String, &Path)> = Vec::with_capacity(files.len());
        let mut wanted: HashMap<String, &Path> = HashMap::with_capacity(files.len());
        for (name, dest) in files {
            let key = normalize(name).with_context(|| {
                format!("refusing to extract {name:?}: member names must be relative paths without '..'")
            })?;
            if wanted.insert(key.clone(), dest).is_some() {
                bail!("{} is requested twice", self.display_name(name));
            }
            requests.push((key, dest));
        }
        let mut done: HashSet<String> = HashSet::with_capacity(files.len());
        match self.format {
            Format::Dir => {
                // Hard links and copies are independent, so they run in parallel.
                let results: Vec<anyhow::Result<Option<&str>>> = requests
                    .par_iter()
                    .map(|(key, dest)| {
                        let src = self.path.join(key);
                        if !src.is_file() {
                            return Ok(None);
                        }
                        link_or_copy(&src, dest)?;
                        Ok(Some(key.as_str()))
                    })
                    .collect();
                for result in results {
                    if let Some(key) = result? {
                        done.insert(key.to_string());
                    }
                }
            }
            Format::Zip => {
                let (mut archive, names) = self.open_zip()?;
                // Members are read in archive order so that the file is read sequentially.
                let mut indices: Vec<(usize, &str, &Path)> = wanted
                    .iter()
                    .filter_map(|(key, dest)| names.get(key).map(|&i| (i, key.as_str(), *dest)))
                    .collect();
                indices.sort_unstable_by_key(|&(i, _, _)| i);
                for (index, key, dest) in indices {
                    let mut member = archive.by_index(index).with_context(|| self.corrupt(key))?;
                    if member.is_dir() {
                        continue;
                    }
                    // The zip reader checks each member's CRC when it reaches its end, so a
                    // corrupted member fails here rather than yielding a bad image.
                    write_stream(&mut member, dest).with_context(|| self.corrupt(key))?;
                    done.insert(key.to_string());
                }
            }
            Format::Tar | Format::TarGz => {
                let mut archive = tar::Archive::new(self.open_tar_stream()?);
                {
                    let entries = archive.entries().with_context(|| self.unreadable())?;
                    for entry in entries {
                        let mut entry = entry.with_context(|| self.unreadable())?;
                        let Some(key) = self.tar_member_name(&entry)? else {
                            continue;
                        };
                        let Some(dest) = wanted.get(&key) else { continue };
                        write_stream(&mut entry, dest).with_context(|| self.corrupt(&key))?;
                        done.insert(key);
                    }
                }
                // The tar reader stops at the end-of-archive blocks; reading the rest of
                // the stream makes the gzip decoder check its trailer (length and CRC), so
                // a truncated or corrupted download cannot pass unnoticed.
                io::copy(&mut archive.into_inner(), &mut io::sink()).with_context(|| self.unreadable())?;
            }
        }
        let missing: Vec<&str> = files
            .iter()
            .zip(&requests)
            .filter(|(_, (key, _))| !done.contains(key))
            .map(|((name, _), _)| name.as_str())
            .collect();
        if !missing.is_empty() {
            bail!("{}", missing_report(&self.path, &missing));
        }
        Ok(())
    }

    /// Opens a zip archive and indexes its members by normalised name, so that `./a/b`
    /// matches a request for `a/b` as it does in a tar archive, and members with unsafe
    /// names are never matched.
    fn open_zip(&self) -> anyhow::Result<(ZipReader, HashMap<String, usize>)> {
        let file = File::open(&self.path).with_context(|| format!("cannot open {}", self.path.display()))?;
        let archive = zip::ZipArchive::new(BufReader::new(file)).with_context(|| self.unreadable())?;
        let names = (0..archive.len())
            .filter_map(|i| Some((normalize(archive.name_for_index(i)?)?, i)))
            .collect();
        Ok((archive, names))
    }

    fn open_tar_stream(&self) -> anyhow::Result<Box<dyn Read>> {
        let file = File::open(&self.path).with_context(|| format!("cannot open {}", self.path.display()))?;
        let reader = BufReader::with_capacity(1 << 20, file);
        Ok(match self.format {
            Format::TarGz => Box::new(flate2::read::MultiGzDecoder::new(reader)),
            _ => Box::new(reader),
        })
    }

    /// The normalised name of a regular-file tar entry, or `None` for directories, links
    /// and unsafe names (absolute or with `..`), which are never extracted.
    fn tar_member_name<R: Read>(&self, entry: &tar::Entry<'_, R>) -> anyhow::Result<Option<String>> {
        if !entry.header().entry_type().is_file() {
            return Ok(None);
        }
        let path = entry.path().with_context(|| self.unreadable())?;
        Ok(path.to_str().and_then(normalize))
    }

    fn unreadable(&self) -> String {
        format!(
            "cannot read the {} {} (truncated or corrupt?)",
            self.format,
            self.path.display()
        )
    }

    fn corrupt(&self, name: &str) -> String {
        format!(
            "cannot read {name} from the {} {} (truncated or corrupt?)",
            self.format,
            self.path.display()
        )
    }
}

/// Normalises a member name: `/`-separated, relative, without `.` components. Returns
/// `None` for names that are empty, absolute, contain `..` or a backslash, so that such
/// names are never matched nor written.
pub(crate) fn normalize(name: &str) -> Option<String> {
    if name.contains('\\') || name.starts_with('/') {
        return None;
    }
    let mut parts = Vec::new();
    for component in Path::new(name).components() {
        match component {
            Component::Normal(part) => parts.push(part.to_str()?),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}

/// Decodes a metadata file as UTF-8; the error names the file and the first bad line.
pub(crate) fn utf8(label: &str, bytes: Vec<u8>) -> anyhow::Result<String> {
    String::from_utf8(bytes).map_err(|e| {
        let bad = e.utf8_error().valid_up_to();
        let line = e.as_bytes()[..bad].iter().filter(|&&b| b == b'\n').count() + 1;
        anyhow::anyhow!("{label}:{line}: not valid UTF-8 text")
    })
}

/// The error text for members listed but not found: their count and the first names.
fn missing_report(source: &Path, missing: &[&str]) -> String {
    let shown: Vec<&str> = missing.iter().take(MISSING_NAMES_SHOWN).copied().collect();
    let more = missing.len() - shown.len();
    let tail = if more > 0 {
        format!(" … and {more} more")
    } else {
        String::new()
    };
    format!(
        "{}: {} listed file(s) are missing: {}{tail}",
        source.display(),
        missing.len(),
        shown.join(", ")
    )
}

/// Recognises an archive by its magic bytes, falling back to the `.tar` extension for
/// pre-POSIX tar files, which have none.
fn sniff(path: &Path) -> anyhow::Result<Format> {
    let mut head = Vec::with_capacity(512);
    File::open(path)
        .and_then(|f| f.take(512).read_to_end(&mut head))
        .with_context(|| format!("cannot read {}", path.display()))?;
    if head.starts_with(&[0x1f, 0x8b]) {
        return Ok(Format::TarGz);
    }
    if head.starts_with(b"PK\x03\x04") || head.starts_with(b"PK\x05\x06") {
        return Ok(Format::Zip);
    }
    if head.get(257..262) == Some(b"ustar".as_slice()) {
        return Ok(Format::Tar);
    }
    if path.extension().is_some_and(|e| e.eq_ignore_ascii_case("tar")) && head.len() == 512 {
        return Ok(Format::Tar);
    }
    bail!(
        "{} is neither a directory nor a recognised archive (.tgz/.tar.gz, .tar or .zip); \
         it may be truncated or corrupt",
        path.display()
    )
}

/// Hard-links `src` to `dest`, or copies it where linking is impossible (another file
/// system, or a file system without hard links).
fn link_or_copy(src: &Path, dest: &Path) -> anyhow::Result<()> {
    create_parent(dest)?;
    if std::fs::hard_link(src, dest).is_ok() {
        return Ok(());
    }
    std::fs::copy(src, dest).with_context(|| format!("cannot copy {} to {}", src.display(), dest.display()))?;
    Ok(())
}

/// Writes a stream to a new file at `dest`.
fn write_stream(reader: &mut impl Read, dest: &Path) -> anyhow::Result<()> {
    create_parent(dest)?;
    let file = File::create(dest).with_context(|| format!("cannot create {}", dest.display()))?;
    let mut writer = BufWriter::new(file);
    io::copy(reader, &mut writer)?;
    writer
        .flush()
        .with_context(|| format!("cannot write {}", dest.display()))?;
    Ok(())
}

fn create_parent(dest: &Path) -> anyhow::Result<()> {
    if let Some(parent) = dest.parent() {
        std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_rejects_escapes() {
        assert_eq!(normalize("a/b.jpg").as_deref(), Some("a/b.jpg"));
        assert_eq!(normalize("./a//b.jpg").as_deref(), Some("a/b.jpg"));
        assert_eq!(normalize("../a.jpg"), None);
        assert_eq!(normalize("a/../../b.jpg"), None);
        assert_eq!(normalize("/etc/passwd"), None);
        assert_eq!(normalize("a\\b.jpg"), None);
        assert_eq!(normalize(""), None);
        assert_eq!(normalize("."), None);
    }

    /// A tar whose members are named `./data/a.txt` (as `tar czf x.tgz ./data` writes
    /// them) and `../evil.txt` (written by hand, since the tar builder refuses it).
    fn tricky_tar(path: &Path) {
        let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(
            File::create(path).unwrap(),
            flate2::Compression::fast(),
        ));
        for (name, data) in [
            ("./data/a.txt", b"alpha".as_slice()),
            ("../evil.txt", b"evil".as_slice()),
        ] {
            let mut header = tar::Header::new_old();
            header.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
            header.set_size(data.len() as u64);
            header.set_mode(0o644);
            header.set_cksum();
            builder.append(&header, data).unwrap();
        }
        builder.into_inner().unwrap().finish().unwrap();
    }

    #[test]
    fn tar_members_match_normalised_names_and_escapes_are_refused() {
        let dir = std::env::temp_dir().join(format!("xtask-archive-unit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("x.tgz");
        tricky_tar(&path);
        let source = Source::open(&path).unwrap();
        assert_eq!(source.format, Format::TarGz);

        let found = source.read_files(&["data/a.txt", "../evil.txt", "evil.txt"]).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found["data/a.txt"], b"alpha");

        let out = dir.join("out");
        source.extract(&[("data/a.txt".into(), out.join("a.txt"))]).unwrap();
        assert_eq!(std::fs::read(out.join("a.txt")).unwrap(), b"alpha");
        let e = source
            .extract(&[("../evil.txt".into(), out.join("evil.txt"))])
            .unwrap_err();
        assert!(e.to_string().contains("refusing to extract"), "{e}");
        let e = source
            .extract(&[("evil.txt".into(), out.join("evil.txt"))])
            .unwrap_err();
        assert!(e.to_string().contains("1 listed file(s) are missing: evil.txt"), "{e}");
        assert!(!dir.join("evil.txt").exists() && !out.join("evil.txt").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn missing_report_counts_and_truncates() {
        let names: Vec<String> = (0..13).map(|i| format!("f{i}.jpg")).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let text = missing_report(Path::new("/d"), &refs);
        assert!(text.contains("13 listed file(s) are missing"), "{text}");
        assert!(
            text.contains("f9.jpg") && !text.contains("f10.jpg") && text.contains("3 more"),
            "{text}"
        );
    }
}
