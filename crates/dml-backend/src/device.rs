//! Device classification.

use burn::backend::DispatchDevice;
use burn::tensor::Device;

/// Whether `device` computes on this machine's CPU (flex or ndarray, with or without
/// autodiff): there the host kernels of `dml_kernels` replace the backend's products, and
/// reading a tensor back costs a copy at most, never a device synchronisation.
pub fn is_cpu_device(device: &Device) -> bool {
    fn cpu(device: &DispatchDevice) -> bool {
        match device {
            DispatchDevice::Flex(_) | DispatchDevice::NdArray(_) => true,
            DispatchDevice::Autodiff(inner) => cpu(&inner.clone().inner()),
            _ => false,
        }
    }
    cpu(device.as_dispatch())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(deprecated)]
    fn cpu_devices_are_recognised() {
        assert!(is_cpu_device(&Device::flex()));
        assert!(is_cpu_device(&Device::flex().autodiff()));
        assert!(is_cpu_device(&Device::ndarray()));
        assert!(is_cpu_device(&Device::ndarray().autodiff()));
    }
}
