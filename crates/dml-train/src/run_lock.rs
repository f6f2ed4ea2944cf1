//! One writer per run: a training run holds an advisory lock on `<run>/train.lock` from start to
//! end, so that a second `train` on the same run directory (a second terminal, a re-submitted job)
//! is refused, naming the process that holds it, instead of interleaving checkpoints and metrics.
//! The kernel releases the lock when the holder exits however it exits (`kill -9` included), so a
//! killed run never leaves a stale lock; read-only commands (`eval`, `explain`, `analyze`) do not
//! take it and work on a run that is training.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

use crate::error::TrainError;

/// The lock file's name inside a run directory.
pub const LOCK_FILE: &str = "train.lock";

/// A held run lock; released when dropped (or when the process ends).
#[derive(Debug)]
pub struct RunLock {
    /// Kept open: closing the file releases the lock.
    _file: File,
    path: PathBuf,
}

impl RunLock {
    /// Takes the lock of the run directory `dir` (created if missing) and writes this process's
    /// id into it; a lock another process holds is an error naming that process.
    pub fn acquire(dir: &Path) -> Result<Self, TrainError> {
        std::fs::create_dir_all(dir).map_err(|e| TrainError::io(dir, e))?;
        let path = dir.join(LOCK_FILE);
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| TrainError::io(&path, e))?;
        if !try_lock(&file).map_err(|e| TrainError::io(&path, e))? {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let holder = holder.trim();
            return Err(TrainError::Argument(format!(
                "run directory {} is being trained by process {} (it holds {}); wait for it to finish, stop it, or \
                 choose another --name",
                dir.display(),
                if holder.is_empty() { "?" } else { holder },
                path.display()
            )));
        }
        file.set_len(0).map_err(|e| TrainError::io(&path, e))?;
        file.rewind().map_err(|e| TrainError::io(&path, e))?;
        writeln!(file, "{}", std::process::id()).map_err(|e| TrainError::io(&path, e))?;
        file.flush().map_err(|e| TrainError::io(&path, e))?;
        Ok(Self { _file: file, path })
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// `flock(LOCK_EX | LOCK_NB)`: whether the lock was taken (false: another process holds it).
#[cfg(unix)]
fn try_lock(file: &File) -> std::io::Result<bool> {
    use std::os::unix::io::AsRawFd;
    // SAFETY: flock on a file descriptor this process owns; no memory is shared.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc == 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(e)
    }
}

/// Without `flock` the run is not locked.
#[cfg(not(unix))]
fn try_lock(_file: &File) -> std::io::Result<bool> {
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A second lock of the same directory fails naming this process (flock locks belong to open
    /// files, so a second open in the same process conflicts too); dropping the first frees it.
    #[test]
    fn a_held_lock_refuses_a_second_writer_until_released() {
        let dir = tempfile::tempdir().unwrap();
        let first = RunLock::acquire(dir.path()).unwrap();
        let e = RunLock::acquire(dir.path()).unwrap_err().to_string();
        assert!(e.contains(&format!("process {}", std::process::id())), "{e}");
        assert!(e.contains("train.lock"), "{e}");
        drop(first);
        let again = RunLock::acquire(dir.path()).unwrap();
        assert!(again.path().ends_with(LOCK_FILE));
    }
}
