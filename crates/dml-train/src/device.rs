//! The one place where a device name becomes a Burn [`Device`].

use burn::tensor::Device;

use crate::error::TrainError;

/// The device names accepted by `--device` (with `cuda` only in builds with the `cuda`
/// feature).
pub const DEVICE_NAMES: &str = "flex, ndarray, wgpu, wgpu:cpu, wgpu:discrete[:N], wgpu:integrated[:N], cuda[:N]";

/// Parses a device name into an (inference) device; training uses `.autodiff()` of it.
///
/// - `flex`: the CPU backend (default; multi-threaded, fastest on the CPU).
/// - `ndarray`: the older CPU backend (deprecated by Burn, much slower on convolutions).
/// - `wgpu`: the best GPU found by wgpu (Vulkan, Metal, DX12; on a GPU-less Linux machine
///   Mesa's lavapipe CPU driver); `wgpu:cpu`, `wgpu:discrete[:N]`, `wgpu:integrated[:N]`
///   pick an adapter kind.
/// - `cuda[:N]`: NVIDIA GPU N (builds with the `cuda` feature only).
pub fn parse_device(name: &str) -> Result<Device, TrainError> {
    let lower = name.trim().to_ascii_lowercase();
    let mut parts = lower.split(':');
    let head = parts.next().unwrap_or("");
    let rest: Vec<&str> = parts.collect();
    let index = |s: Option<&&str>| -> Result<usize, TrainError> {
        match s {
            None => Ok(0),
            Some(s) => s.parse().map_err(|_| unknown(name)),
        }
    };
    #[allow(deprecated)]
    let device = match (head, rest.as_slice()) {
        ("flex", []) => Device::flex(),
        ("ndarray", []) => Device::ndarray(),
        ("wgpu", []) => Device::wgpu(burn::tensor::DeviceKind::DefaultDevice),
        ("wgpu", ["cpu"]) => Device::wgpu(burn::tensor::DeviceKind::Cpu),
        ("wgpu", ["discrete", tail @ ..]) if tail.len() <= 1 => {
            Device::wgpu(burn::tensor::DeviceKind::DiscreteGpu(index(tail.first())?))
        }
        ("wgpu", ["integrated", tail @ ..]) if tail.len() <= 1 => {
            Device::wgpu(burn::tensor::DeviceKind::IntegratedGpu(index(tail.first())?))
        }
        ("cuda", tail) if tail.len() <= 1 => cuda(name, index(tail.first())?)?,
        _ => return Err(unknown(name)),
    };
    Ok(device)
}

fn unknown(name: &str) -> TrainError {
    TrainError::Config(format!(
        "device: unknown device {name:?}; expected one of {DEVICE_NAMES}"
    ))
}

#[cfg(feature = "cuda")]
fn cuda(_name: &str, index: usize) -> Result<Device, TrainError> {
    Ok(Device::cuda(index))
}

#[cfg(not(feature = "cuda"))]
fn cuda(name: &str, _index: usize) -> Result<Device, TrainError> {
    Err(TrainError::Config(format!(
        "device: {name:?} needs a build with CUDA support: cargo run --release -p train --features cuda"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_unknown_ones_are_listed() {
        assert!(parse_device("flex").is_ok());
        assert!(parse_device("FLEX").is_ok());
        assert!(parse_device("ndarray").is_ok());
        assert!(parse_device("wgpu:discrete:1").is_ok());
        for bad in ["tpu", "flex:1", "wgpu:discrete:x", "wgpu:moon", ""] {
            let e = parse_device(bad).unwrap_err().to_string();
            assert!(
                e.contains(&format!("{bad:?}")) && e.contains("flex, ndarray"),
                "{bad}: {e}"
            );
        }
        #[cfg(not(feature = "cuda"))]
        assert!(
            parse_device("cuda")
                .unwrap_err()
                .to_string()
                .contains("--features cuda")
        );
    }
}
