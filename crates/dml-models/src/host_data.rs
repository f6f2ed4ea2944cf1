//! Float tensors read on the host as `f32`, without a copy where the backend allows it.

// NdArray is deprecated upstream but stays a selectable backend of this workspace.
#![allow(deprecated)]

use burn::backend::NdArray;
use burn::backend::tensor::FloatTensor;
use burn::backend::{Backend, Cube, Flex};
use burn::tensor::{DType, TensorData, try_read_sync};

/// Host access to a float tensor's values.
pub(crate) trait HostRead: Backend {
    /// Runs `f` on the values of `t` as `f32` (row-major). The default reads the tensor's data
    /// back (see [`with_copied_f32s`]).
    fn with_f32s<R>(t: FloatTensor<Self>, f: impl FnOnce(&[f32]) -> R) -> R {
        with_copied_f32s::<Self, R>(t, f)
    }
}

/// Runs `f` on the values of `t` read back as tensor data: one copy, converted when the tensor
/// is not `f32`.
fn with_copied_f32s<B: Backend, R>(t: FloatTensor<B>, f: impl FnOnce(&[f32]) -> R) -> R {
    let data = try_read_sync(B::float_into_data(t))
        .expect("a CPU tensor reads synchronously")
        .expect("a float tensor can be read");
    let data: TensorData = if data.dtype() == DType::F32 {
        data
    } else {
        data.convert::<f32>()
    };
    f(&dml_kernels::f32s_in_ne_bytes(data.as_bytes()))
}

impl HostRead for Flex {
    /// A contiguous `f32` flex tensor is read in place: the activations of a training step are
    /// not copied once more for every host kernel that reads them.
    fn with_f32s<R>(t: FloatTensor<Self>, f: impl FnOnce(&[f32]) -> R) -> R {
        if t.dtype() == DType::F32
            && t.is_contiguous()
            && let Some(values) = t.as_slice::<f32>()
        {
            return f(values);
        }
        with_copied_f32s::<Self, R>(t, f)
    }
}

impl HostRead for NdArray {}
impl HostRead for Cube {}

/// Test support shared by the host operations' tests.
#[cfg(test)]
pub(crate) mod test_support {
    use burn::tensor::Tensor;

    /// The values of a tensor as `f32`.
    pub(crate) fn values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
        t.into_data().to_vec().unwrap()
    }

    /// Asserts that `got` equals `want` within `tolerance` times the largest magnitude of `want`.
    pub(crate) fn assert_close(got: &[f32], want: &[f32], tolerance: f32, what: &str) {
        assert_eq!(got.len(), want.len(), "{what}: sizes");
        let scale = want.iter().fold(0.0f32, |m, v| m.max(v.abs())).max(1e-6);
        for (i, (p, q)) in got.iter().zip(want).enumerate() {
            assert!((p - q).abs() <= tolerance * scale, "{what}[{i}]: {p} vs {q}");
        }
    }
}
