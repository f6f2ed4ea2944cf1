//! Atomic output directories.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use dml_data::{Manifest, ValidationOptions};

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
    pub fn new(target: &Path, force: bool) -> anyhow::Result<Self> {
        if target.exists() && !force {
            bail!(
                "output directory {} already exists (pass --force to replace it)",
                target.display()
            );
        }
        let name = target
            .file_name()
            .with_context(|| format!("output path {} has no directory name", target.display()))?;
        let parent = match target.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        std::fs::create_dir_all(&parent).with_context(|| format!("cannot create {}", parent.display()))?;
        let mut staging_name = name.to_os_string();
        staging_name.push(format!(".partial-{}", std::process::id()));
        let dir = parent.join(staging_name);
        if dir.exists() {
            std::fs::remove_dir_all(&dir).with_context(|| format!("cannot clear {}", dir.display()))?;
        }
        std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
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
    pub fn commit(mut self, mut manifest: Manifest) -> anyhow::Result<Manifest> {
        manifest.root = self.dir.clone();
        manifest
            .validate(&ValidationOptions::default())
            .context("the prepared dataset is inconsistent")?;
        manifest.write(self.dir.join("manifest.csv"))?;
        if self.target.exists() {
            debug_assert!(self.force);
            // The old output is moved aside first and deleted only after the new one is in
            // place, so that the target always holds one complete dataset.
            let mut old_name = self.target.file_name().unwrap_or_default().to_os_string();
            old_name.push(format!(".old-{}", std::process::id()));
            let old = self.target.with_file_name(old_name);
            std::fs::rename(&self.target, &old)
                .with_context(|| format!("cannot move the old {} aside", self.target.display()))?;
            std::fs::rename(&self.dir, &self.target)
                .with_context(|| format!("cannot move {} into place", self.dir.display()))?;
            std::fs::remove_dir_all(&old).with_context(|| format!("cannot delete {}", old.display()))?;
        } else {
            std::fs::rename(&self.dir, &self.target)
                .with_context(|| format!("cannot move {} into place", self.dir.display()))?;
        }
        self.committed = true;
        manifest.root = self.target.clone();
        Ok(manifest)
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
