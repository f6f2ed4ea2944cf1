//! `cargo xtask fetch-weights resnet18|resnet50`: torchvision's official ImageNet
//! weights, downloaded with `curl`, checked against the pinned size and SHA-256, and
//! installed atomically. `--from FILE` installs (and checks) a file obtained elsewhere,
//! for machines without network access.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use sha2::{Digest, Sha256};

/// One pinned weight file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pinned {
    /// The model name on the command line.
    pub model: &'static str,
    /// torchvision's file name (its hash prefix is part of the name).
    pub file: &'static str,
    /// Size in bytes.
    pub size: u64,
    /// SHA-256 of the file, lowercase hex.
    pub sha256: &'static str,
}

/// torchvision's `IMAGENET1K_V1` weights of the backbones the workspace implements.
pub const PINNED: [Pinned; 2] = [
    Pinned {
        model: "resnet18",
        file: "resnet18-f37072fd.pth",
        size: 46_830_571,
        sha256: "f37072fd47e89c5e827621c5baffa7500819f7896bbacec160b1a16c560e07ec",
    },
    Pinned {
        model: "resnet50",
        file: "resnet50-0676ba61.pth",
        size: 102_530_333,
        sha256: "0676ba61b6795bbe1773cffd859882e5e297624d384b6993f7c9e683e722fb8a",
    },
];

/// Where torchvision publishes its weights; `DML_WEIGHTS_BASE_URL` overrides it (a
/// mirror, or a local server in tests).
pub const BASE_URL: &str = "https://download.pytorch.org/models/";

/// Arguments of `cargo xtask fetch-weights`.
#[derive(Debug, Clone, clap::Args)]
pub struct FetchArgs {
    /// resnet18 | resnet50.
    pub model: String,
    /// Directory the file is installed into.
    #[arg(long, default_value = "weights")]
    pub out: PathBuf,
    /// Install this already downloaded file instead of downloading (it is checked
    /// against the pinned size and SHA-256 all the same).
    #[arg(long)]
    pub from: Option<PathBuf>,
}

/// The pinned entry of `model`.
pub fn pinned(model: &str) -> anyhow::Result<Pinned> {
    PINNED.iter().copied().find(|p| p.model == model).with_context(|| {
        let names: Vec<&str> = PINNED.iter().map(|p| p.model).collect();
        format!("unknown model {model:?}; weights are pinned for {names:?}")
    })
}

/// SHA-256 of a file, lowercase hex, and its size.
pub fn sha256_file(path: &Path) -> anyhow::Result<(String, u64)> {
    let mut file = std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut size = 0u64;
    loop {
        let n = file
            .read(&mut buf)
            .with_context(|| format!("cannot read {}", path.display()))?;
        if n == 0 {
            break;
        }
        size += n as u64;
        hasher.update(&buf[..n]);
    }
    Ok((hex::encode(hasher.finalize()), size))
}

/// Checks `path` against `pin`: an error names the file, the expected and the actual
/// size or digest.
pub fn verify(path: &Path, pin: &Pinned) -> anyhow::Result<()> {
    let (digest, size) = sha256_file(path)?;
    if size != pin.size {
        bail!(
            "{}: {size} bytes, but {} has {} bytes",
            path.display(),
            pin.file,
            pin.size
        );
    }
    if digest != pin.sha256 {
        bail!(
            "{}: SHA-256 {digest}, but {} has {}",
            path.display(),
            pin.file,
            pin.sha256
        );
    }
    Ok(())
}

/// Downloads (or copies `--from`), verifies and installs the weights; returns the
/// installed path. Nothing is left in `out` unless the file verified.
pub fn run(args: &FetchArgs) -> anyhow::Result<PathBuf> {
    let pin = pinned(&args.model)?;
    std::fs::create_dir_all(&args.out).with_context(|| format!("cannot create {}", args.out.display()))?;
    let target = args.out.join(pin.file);
    if target.is_file() && verify(&target, &pin).is_ok() {
        return Ok(target);
    }
    let tmp = args.out.join(format!(".{}.{}.part", pin.file, std::process::id()));
    let result = (|| {
        match &args.from {
            Some(src) => {
                std::fs::copy(src, &tmp).with_context(|| format!("cannot copy {}", src.display()))?;
            }
            None => download(&pin, &tmp)?,
        }
        verify(&tmp, &pin)
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    std::fs::rename(&tmp, &target).with_context(|| format!("cannot install {}", target.display()))?;
    Ok(target)
}

fn download(pin: &Pinned, dest: &Path) -> anyhow::Result<()> {
    let base = std::env::var("DML_WEIGHTS_BASE_URL").unwrap_or_else(|_| BASE_URL.to_string());
    let url = format!("{}/{}", base.trim_end_matches('/'), pin.file);
    let output = Command::new("curl")
        .args([
            "--fail",
            "--location",
            "--silent",
            "--show-error",
            "--connect-timeout",
            "20",
            "--output",
        ])
        .arg(dest)
        .arg(&url)
        .output();
    let output = match output {
        Ok(o) => o,
        Err(e) => bail!(
            "cannot run curl to download {url} ({e}); download the file by other means and install it with \
             `cargo xtask fetch-weights {} --from FILE`",
            pin.model
        ),
    };
    if !output.status.success() {
        bail!(
            "downloading {url} failed ({}): {}; without network access, download {} elsewhere and install it \
             with `cargo xtask fetch-weights {} --from FILE`",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim(),
            pin.file,
            pin.model
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_of_a_known_string() {
        let dir = std::env::temp_dir().join(format!("xtask-sha-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("abc");
        std::fs::write(&f, b"abc").unwrap();
        let (d, n) = sha256_file(&f).unwrap();
        assert_eq!(n, 3);
        // FIPS 180-2 test vector for "abc".
        assert_eq!(d, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }

    #[test]
    fn unknown_models_list_the_known_ones() {
        let e = pinned("vgg16").unwrap_err().to_string();
        assert!(e.contains("vgg16") && e.contains("resnet50"), "{e}");
    }

    #[test]
    fn a_wrong_file_is_rejected_and_nothing_is_installed() {
        let dir = std::env::temp_dir().join(format!("xtask-fetch-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fake = dir.join("fake.pth");
        std::fs::write(&fake, b"not weights").unwrap();
        let out = dir.join("weights");
        let e = run(&FetchArgs {
            model: "resnet18".into(),
            out: out.clone(),
            from: Some(fake),
        })
        .unwrap_err()
        .to_string();
        assert!(e.contains("11 bytes") && e.contains("46830571"), "{e}");
        assert_eq!(
            std::fs::read_dir(&out).unwrap().count(),
            0,
            "a rejected file was left behind"
        );
    }
}
