//! The report's folder written as a whole or not at all: every file goes into a hidden staging
//! folder beside the destination (same parent, so the final rename stays on one file system), which
//! replaces the destination only once everything is written.

use std::path::{Path, PathBuf};

use crate::error::InspectError;

/// A staging folder for the report that will live at [`Staging::destination`]. Dropped without
/// [`Staging::commit`] (an error on the way), it removes itself, so no half-written report is left.
pub struct Staging {
    /// Where the files are written now.
    dir: PathBuf,
    /// Where they end up.
    destination: PathBuf,
    committed: bool,
}

impl Staging {
    /// Creates `.<name>.staging-<pid>` next to `destination` (and the parent folders if needed).
    pub fn new(destination: &Path) -> Result<Self, InspectError> {
        let name = destination
            .file_name()
            .ok_or_else(|| InspectError::Argument(format!("--out {}: names no folder", destination.display())))?;
        let parent = match destination.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        std::fs::create_dir_all(&parent).map_err(|e| InspectError::io(&parent, e))?;
        let mut staging = std::ffi::OsString::from(".");
        staging.push(name);
        staging.push(format!(".staging-{}", std::process::id()));
        let dir = parent.join(staging);
        // A staging folder of an earlier, killed run of this process id is stale.
        if dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(|e| InspectError::io(&dir, e))?;
        }
        std::fs::create_dir(&dir).map_err(|e| InspectError::io(&dir, e))?;
        Ok(Self {
            dir,
            destination: destination.to_path_buf(),
            committed: false,
        })
    }

    /// The folder to write into.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The final folder.
    pub fn destination(&self) -> &Path {
        &self.destination
    }

    /// Moves the staged folder to the destination. An existing destination (an earlier report) is
    /// first renamed aside and removed after the new folder is in place, so at every instant the
    /// destination is either the old report or the new one.
    pub fn commit(mut self) -> Result<PathBuf, InspectError> {
        let old = if self.destination.exists() {
            let mut name = self.dir.as_os_str().to_owned();
            name.push(".old");
            let old = PathBuf::from(name);
            std::fs::rename(&self.destination, &old).map_err(|e| InspectError::io(&self.destination, e))?;
            Some(old)
        } else {
            None
        };
        std::fs::rename(&self.dir, &self.destination).map_err(|e| InspectError::io(&self.destination, e))?;
        self.committed = true;
        if let Some(old) = old {
            std::fs::remove_dir_all(&old).map_err(|e| InspectError::io(&old, e))?;
        }
        Ok(self.destination.clone())
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.committed {
            // Best effort: the report failed already and that error is the one to show.
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_staging_folder_leaves_nothing_and_a_commit_replaces_the_old_report() {
        let root = tempfile::tempdir().unwrap();
        let out = root.path().join("report");
        {
            let staging = Staging::new(&out).unwrap();
            std::fs::write(staging.dir().join("half.png"), b"x").unwrap();
        }
        assert_eq!(
            std::fs::read_dir(root.path()).unwrap().count(),
            0,
            "nothing left behind"
        );
        std::fs::create_dir(&out).unwrap();
        std::fs::write(out.join("old.html"), b"old").unwrap();
        let staging = Staging::new(&out).unwrap();
        std::fs::write(staging.dir().join("report.html"), b"new").unwrap();
        assert_eq!(staging.commit().unwrap(), out);
        assert!(!out.join("old.html").exists());
        assert_eq!(std::fs::read(out.join("report.html")).unwrap(), b"new");
        assert_eq!(
            std::fs::read_dir(root.path()).unwrap().count(),
            1,
            "no staging folder left"
        );
    }
}
