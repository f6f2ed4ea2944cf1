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
    /// back (one copy, converted when the tensor is not `f32`).
    fn with_f32s<R>(t: FloatTensor<Self>, f: impl FnOnce(&[f32]) -> R) -> R {
        let data = try_read_sync(Self::float_into_data(t))
            .expect("a CPU tensor reads synchronously")
            .expect("a float tensor can be read");
        let data: TensorData = if data.dtype() == DType::F32 {
            data
        } else {
            data.convert::<f32>()
        };
        f(&dml_kernels::f32s_in_ne_bytes(data.as_bytes()))
    }
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
        let data = t.into_data();
        let data = if data.dtype() == DType::F32 {
            data
        } else {
            data.convert::<f32>()
        };
        f(&dml_kernels::f32s_in_ne_bytes(data.as_bytes()))
    }
}

impl HostRead for NdArray {}
impl HostRead for Cube {}
