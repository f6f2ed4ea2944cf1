//! The Python environment the peer scripts run in: a virtual environment under the target
//! directory, created with `python3 -m venv` and filled with pip from
//! `xtask/peers/requirements.txt` (pinned versions). It is reused while the requirements file is
//! unchanged (its SHA-256 is stored in the environment), and never used by the tests.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use sha2::{Digest, Sha256};

/// The stamp file inside the environment that holds the requirements' hash.
const STAMP: &str = "dml-requirements.sha256";

/// The Python interpreter of the peer environment at `venv`, created or updated from
/// `requirements` with `python` (e.g. `python3`) when needed.
pub fn environment(venv: &Path, requirements: &Path, python: &str) -> anyhow::Result<PathBuf> {
    let wanted = requirements_hash(requirements)?;
    let interpreter = venv.join("bin").join("python");
    let stamp = venv.join(STAMP);
    if interpreter.is_file() && std::fs::read_to_string(&stamp).is_ok_and(|s| s.trim() == wanted) {
        return Ok(interpreter);
    }
    eprintln!(
        "creating the peer environment {} from {} (PyTorch and its CUDA libraries: a few GB, once)",
        venv.display(),
        requirements.display()
    );
    // The stamp goes first, so an interrupted install is never mistaken for a finished one.
    let _ = std::fs::remove_file(&stamp);
    run(
        Command::new(python).args(["-m", "venv", "--clear"]).arg(venv),
        &format!("{python} -m venv {}", venv.display()),
    )?;
    run(
        Command::new(&interpreter)
            .args(["-m", "pip", "install", "--disable-pip-version-check", "--quiet", "-r"])
            .arg(requirements),
        &format!("pip install -r {}", requirements.display()),
    )?;
    std::fs::write(&stamp, &wanted).with_context(|| format!("cannot write {}", stamp.display()))?;
    Ok(interpreter)
}

fn requirements_hash(requirements: &Path) -> anyhow::Result<String> {
    let text = std::fs::read(requirements).with_context(|| format!("cannot read {}", requirements.display()))?;
    Ok(hex::encode(Sha256::digest(&text)))
}

fn run(command: &mut Command, what: &str) -> anyhow::Result<()> {
    let status = command
        .status()
        .with_context(|| format!("cannot start `{what}` (is Python 3 with venv installed?)"))?;
    if !status.success() {
        bail!("`{what}` failed ({status})");
    }
    Ok(())
}
