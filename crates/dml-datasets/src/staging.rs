//! Atomic output directories.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use dml_data::{Manifest, ValidationOptions};

use crate::error::{DatasetError, Result};

/// Staging directories created by this process so far (part of their names).
static STAGING_COUNT: AtomicUsize = AtomicUsize::new(0);

/// A directory being filled next to its final location.
///
/// Files are written under [`Staging::dir`]; [`Staging::commit`] validates the
/// manifest (every listed image must exist), writes `manifest.csv` and renames the
/// directory into place. Dropping an uncommitted staging directory deletes it, so a
/// failure at any point leaves neither a partial dataset nor a stray temporary folder.
pub struct Staging {
    target: PathBuf,
    dir: PathBuf,
    force: bool,
    committed: bool,
}

impl Staging {
    /// Prepares to write `target`. Fails if `target` exists and `force` is false.
    pub fn new(target: &Path, force: bool) -> Result<Self> {
        if target.exists() && !force {
            return Err(DatasetError::OutputExists {
                path: target.to_path_buf(),
            });
        }
        let name = target.file_name().ok_or_else(|| DatasetError::NoDirectoryName {
            path: target.to_path_buf(),
        })?;
        let parent = match target.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        std::fs::create_dir_all(&parent).map_err(|e| DatasetError::io("create", &parent, e))?;
        // The process id and a per-process count keep concurrent preparations of the same
        // target apart, whether they run in two processes or in two threads of one.
        let mut staging_name = name.to_os_string();
        let n = STAGING_COUNT.fetch_add(1, Ordering::Relaxed);
        staging_name.push(format!(".partial-{}-{n}", std::process::id()));
        let dir = parent.join(staging_name);
        if dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(|e| DatasetError::io("clear", &dir, e))?;
        }
        std::fs::create_dir_all(&dir).map_err(|e| DatasetError::io("create", &dir, e))?;
        Ok(Self {
            target: target.to_path_buf(),
            dir,
            force,
            committed: false,
        })
    }

    /// The directory to write into; the manifest's record paths are relative to it.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Validates `manifest` against the staged files, writes `manifest.csv` and moves the
    /// directory to its final place. Returns the manifest re-rooted at the target.
    pub fn commit(mut self, mut manifest: Manifest) -> Result<Manifest> {
        manifest.root = self.dir.clone();
        manifest
            .validate(&ValidationOptions::default())
            .map_err(|error| DatasetError::Inconsistent {
                dir: self.dir.clone(),
                error,
            })?;
        manifest.write(self.dir.join("manifest.csv"))?;
        let rename = |from: &Path, to: &Path| {
            std::fs::rename(from, to).map_err(|error| DatasetError::Rename {
                from: from.to_path_buf(),
                to: to.to_path_buf(),
                error,
            })
        };
        if self.target.exists() {
            // Someone else (another process, or another thread) may have finished the same
            // target meanwhile; without `force` their output is left alone.
            if !self.force {
                return Err(DatasetError::OutputExists {
                    path: self.target.clone(),
                });
            }
            // The old output is moved aside first and deleted only after the new one is in
            // place, so that the target always holds one complete dataset.
            let mut old_name = self.target.file_name().unwrap_or_default().to_os_string();
            old_name.push(format!(".old-{}", std::process::id()));
            let old = self.target.with_file_name(old_name);
            rename(&self.target, &old)?;
            rename(&self.dir, &self.target)?;
            std::fs::remove_dir_all(&old).map_err(|e| DatasetError::io("delete", &old, e))?;
        } else {
            // Renaming onto a directory that someone else finished since the check above
            // fails (it is not empty), which leaves their output intact: report that as the
            // output existing, as the check would have.
            rename(&self.dir, &self.target).map_err(|e| {
                if self.target.exists() {
                    DatasetError::OutputExists {
                        path: self.target.clone(),
                    }
                } else {
                    e
                }
            })?;
        }
        self.committed = true;
        manifest.root = self.target.clone();
        Ok(manifest)
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        // A failure has already been reported by then; a directory that cannot be removed
        // is only a leftover, not a second error worth masking the first with.
        if !self.committed {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
