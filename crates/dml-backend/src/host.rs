//! Tensors read to and written from host memory.
//!
//! Burn's typed readers check every element's bit pattern and convert one element at a time;
//! on the hot paths of the host kernels and losses that was a measurable share of a training
//! step, so reads here take typed fast paths, and `f32` tensors of the flex backend are read
//! in place.

use std::borrow::Cow;

use burn::backend::{BackendTensor, DispatchTensor, DispatchTensorKind};
use burn::tensor::{DType, Device, Tensor, TensorData};

/// Native-endian `f32` values viewed in raw bytes (tensor data of dtype `f32`): borrowed when the
/// bytes are 4-byte aligned (as the CPU backends allocate them), else copied.
///
/// Burn's typed readers check every element's bit pattern on the way and copy (a pass over the
/// data that cost about 5% of a small-CNN training step); every bit pattern is a valid `f32`.
///
/// # Panics
/// When the length is not a multiple of 4.
pub fn f32s_in_ne_bytes(bytes: &[u8]) -> Cow<'_, [f32]> {
    assert!(
        bytes.len().is_multiple_of(4),
        "{} bytes are not a whole number of f32s",
        bytes.len()
    );
    let len = bytes.len() / 4;
    if bytes.as_ptr().cast::<f32>().is_aligned() {
        // SAFETY: the pointer is aligned for f32, the `len · 4` bytes are initialised and borrowed
        // for the returned lifetime, and every bit pattern is a valid f32.
        return Cow::Borrowed(unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<f32>(), len) });
    }
    let mut out: Vec<f32> = Vec::with_capacity(len);
    // SAFETY: the destination has capacity for `len` f32s (`bytes.len()` bytes), the regions
    // cannot overlap (fresh allocation), and every byte pattern is a valid f32, so after the copy
    // all `len` elements are initialised.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), out.as_mut_ptr().cast::<u8>(), bytes.len());
        out.set_len(len);
    }
    Cow::Owned(out)
}

/// Runs `f` on the values of a float tensor as `f32` (row-major, any rank).
///
/// A contiguous `f32` tensor of the flex backend (also under autodiff) is read in place, so the
/// activations of a training step are not copied once more for every host kernel that reads
/// them; any other tensor is read back once (a device synchronisation on a GPU) and converted
/// when it is not `f32`.
pub fn with_f32s<R>(t: &DispatchTensor, f: impl FnOnce(&[f32]) -> R) -> R {
    if let Some(values) = flex_f32s(&t.kind) {
        return f(values);
    }
    let data = Tensor::<1>::from_dispatch(t.clone()).into_data();
    let data = if data.dtype() == DType::F32 {
        data
    } else {
        data.convert::<f32>()
    };
    f(&f32s_in_ne_bytes(data.as_bytes()))
}

/// Runs `f` on the values of every tensor of `tensors` in place when each is a contiguous `f32`
/// tensor of the flex backend (also under autodiff); returns `None` without calling `f` when one
/// is not (another backend, another dtype, a strided view), where the caller takes Burn's path.
pub fn with_flex_f32s<const N: usize, R>(tensors: [&DispatchTensor; N], f: impl FnOnce([&[f32]; N]) -> R) -> Option<R> {
    let mut values: [&[f32]; N] = [&[]; N];
    for (slot, t) in values.iter_mut().zip(tensors) {
        *slot = flex_f32s(&t.kind)?;
    }
    Some(f(values))
}

/// The values of a contiguous `f32` flex tensor, in place.
fn flex_f32s(kind: &DispatchTensorKind) -> Option<&[f32]> {
    match kind {
        DispatchTensorKind::Flex(BackendTensor::Float(t)) if t.dtype() == DType::F32 && t.is_contiguous() => {
            t.as_slice::<f32>()
        }
        DispatchTensorKind::Autodiff(inner) => flex_f32s(inner),
        _ => None,
    }
}

/// The index of the first NaN or infinity in `values` (`f32` or `f64`), if any.
///
/// The first pass ORs the finiteness test over the whole slice without an early exit, so it
/// compiles to vector code (a `position(|v| !v.is_finite())` scan alone cannot be vectorised and
/// cost about 5% of a loss's forward and backward pass on a `[180, 512]` batch); only a slice
/// that holds such a value is scanned again for its position.
pub fn first_non_finite<T: HostReal>(values: &[T]) -> Option<usize> {
    if values.iter().fold(false, |any, v| any | !v.finite()) {
        values.iter().position(|v| !v.finite())
    } else {
        None
    }
}

/// The float types host values come in (`f32`, `f64`).
pub trait HostReal: Copy {
    /// Neither NaN nor infinite.
    fn finite(self) -> bool;
}

impl HostReal for f32 {
    fn finite(self) -> bool {
        self.is_finite()
    }
}

impl HostReal for f64 {
    fn finite(self) -> bool {
        self.is_finite()
    }
}

/// Reads a tensor back to the host as `f64` values (row-major), detached from any graph.
///
/// `f32` and `f64` data take typed fast paths (Burn's generic element iterator is several times
/// slower). On a GPU device this is a synchronisation: keep it off per-step hot paths there.
pub fn read_f64s<const D: usize>(x: Tensor<D>) -> Vec<f64> {
    let data = x.detach().into_data();
    match data.dtype() {
        DType::F32 => f32s_in_ne_bytes(data.as_bytes())
            .iter()
            .map(|&v| f64::from(v))
            .collect(),
        DType::F64 => match data.as_slice::<f64>() {
            Ok(v) => v.to_vec(),
            Err(_) => data.iter::<f64>().collect(),
        },
        _ => data.iter::<f64>().collect(),
    }
}

/// Host values as tensor data of `dtype`, converting `f64 → f32` with a plain loop (the generic
/// element conversion of `TensorData` is several times slower).
pub fn data_as(values: Vec<f64>, shape: Vec<usize>, dtype: DType) -> TensorData {
    match dtype {
        DType::F32 => TensorData::new(values.into_iter().map(|v| v as f32).collect::<Vec<f32>>(), shape),
        _ => TensorData::new(values, shape),
    }
}

/// A float tensor of `shape` on `device` in `dtype` from row-major host values.
///
/// # Panics
/// When `values.len()` is not the product of `shape`.
pub fn float_tensor<const D: usize>(values: Vec<f64>, shape: [usize; D], device: &Device, dtype: DType) -> Tensor<D> {
    Tensor::from_data(data_as(values, shape.to_vec(), dtype), (device, dtype))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f32s_are_viewed_when_aligned_and_copied_otherwise() {
        let values = [1.5f32, -0.0, f32::INFINITY, f32::MIN_POSITIVE, 3.25e-30];
        // Bytes inside an f32 allocation are aligned: a view, no copy.
        let aligned: Vec<f32> = values.to_vec();
        // SAFETY: viewing initialised f32s as bytes.
        let bytes = unsafe { std::slice::from_raw_parts(aligned.as_ptr().cast::<u8>(), aligned.len() * 4) };
        assert!(matches!(f32s_in_ne_bytes(bytes), Cow::Borrowed(v) if v == values));
        // One byte in, they are not: a copy with the same values.
        let mut shifted = vec![0u8];
        shifted.extend(values.iter().flat_map(|v| v.to_ne_bytes()));
        assert!(matches!(f32s_in_ne_bytes(&shifted[1..]), Cow::Owned(v) if v == values));
    }

    #[test]
    #[allow(deprecated)]
    fn reads_agree_on_every_cpu_backend_and_dtype() {
        let values = vec![1.0, -2.5, 3.25, 0.125, 7.0, -0.0];
        for device in [Device::flex(), Device::flex().autodiff(), Device::ndarray()] {
            for dtype in [DType::F32, DType::F64] {
                let t = float_tensor(values.clone(), [2, 3], &device, dtype);
                assert_eq!(t.dims(), [2, 3]);
                assert_eq!(read_f64s(t.clone()), values, "{device:?} {dtype:?}");
                let seen = with_f32s(&t.into_dispatch(), <[f32]>::to_vec);
                let want: Vec<f32> = values.iter().map(|&v| v as f32).collect();
                assert_eq!(seen, want, "{device:?} {dtype:?}");
            }
        }
    }

    #[test]
    fn the_first_non_finite_value_is_found_wherever_it_is() {
        let mut values: Vec<f32> = (0..1000).map(|i| i as f32 * 0.5 - 7.0).collect();
        values.push(f32::MAX);
        values.push(-f32::MAX);
        assert_eq!(first_non_finite(&values), None);
        assert_eq!(first_non_finite::<f32>(&[]), None);
        for (at, bad) in [(0, f32::NAN), (517, f32::INFINITY), (1001, f32::NEG_INFINITY)] {
            let mut v = values.clone();
            v[at] = bad;
            v.push(f32::NAN);
            assert_eq!(first_non_finite(&v), Some(at), "{bad} at {at}");
            let wide: Vec<f64> = v.iter().map(|&x| f64::from(x)).collect();
            assert_eq!(first_non_finite(&wide), Some(at), "{bad} at {at} (f64)");
        }
    }

    #[test]
    fn flex_f32_tensors_are_read_in_place() {
        let t = float_tensor(vec![1.0, 2.0, 3.0], [3], &Device::flex(), DType::F32);
        let d = t.into_dispatch();
        let inner = flex_f32s(&d.kind).expect("a contiguous f32 flex tensor is readable in place");
        let again = with_f32s(&d, |v| v.as_ptr());
        assert_eq!(inner.as_ptr(), again, "the same memory, not a copy");
    }
}
