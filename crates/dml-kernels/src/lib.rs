//! Host compute kernels for the CPU backends.
//!
//! Burn's flex backend multiplies through the `gemm` crate, whose AVX-512 micro-kernels, as
//! built here, reach about a quarter of a core's peak. [`sgemm`] keeps its tile in registers and
//! reaches about 65 GMAC/s per core on the development machine (2.5× as much); the
//! host-evaluated losses and [`conv`] (the convolutions of the CNN backbones on flex) use it;
//! [`norm`] is their batch normalisation, [`conv_bn`] the two fused with ReLU (the
//! conv-BN-ReLU block of the backbones) and [`pool`] their max pooling.
#![warn(missing_docs)]

pub mod conv;
pub mod conv_bn;
pub mod norm;
pub mod pool;
pub mod sgemm;
mod shared;

pub use shared::Buffer;

/// Native-endian `f32` values viewed in raw bytes (tensor data of dtype `f32`): borrowed when the
/// bytes are 4-byte aligned (as the CPU backends allocate them), else copied.
///
/// Burn's typed readers check every element's bit pattern on the way and copy (a pass over the
/// data that cost about 5% of a small-CNN training step); every bit pattern is a valid `f32`.
///
/// # Panics
/// When the length is not a multiple of 4.
pub fn f32s_in_ne_bytes(bytes: &[u8]) -> std::borrow::Cow<'_, [f32]> {
    assert!(
        bytes.len().is_multiple_of(4),
        "{} bytes are not a whole number of f32s",
        bytes.len()
    );
    let len = bytes.len() / 4;
    if bytes.as_ptr().cast::<f32>().is_aligned() {
        // SAFETY: the pointer is aligned for f32, the `len · 4` bytes are initialised and borrowed
        // for the returned lifetime, and every bit pattern is a valid f32.
        return std::borrow::Cow::Borrowed(unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<f32>(), len) });
    }
    let mut out: Vec<f32> = Vec::with_capacity(len);
    // SAFETY: the destination has capacity for `len` f32s (`bytes.len()` bytes), the regions
    // cannot overlap (fresh allocation), and every byte pattern is a valid f32, so after the copy
    // all `len` elements are initialised.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), out.as_mut_ptr().cast::<u8>(), bytes.len());
        out.set_len(len);
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    #[test]
    fn f32s_are_viewed_when_aligned_and_copied_otherwise() {
        let values = [1.5f32, -0.0, f32::INFINITY, f32::MIN_POSITIVE, 3.25e-30];
        // Bytes inside an f32 allocation are aligned: a view, no copy.
        let aligned: Vec<f32> = values.to_vec();
        // SAFETY: viewing initialised f32s as bytes.
        let bytes = unsafe { std::slice::from_raw_parts(aligned.as_ptr().cast::<u8>(), aligned.len() * 4) };
        assert!(matches!(super::f32s_in_ne_bytes(bytes), Cow::Borrowed(v) if v == values));
        // One byte in, they are not: a copy with the same values.
        let mut shifted = vec![0u8];
        shifted.extend(values.iter().flat_map(|v| v.to_ne_bytes()));
        assert!(matches!(super::f32s_in_ne_bytes(&shifted[1..]), Cow::Owned(v) if v == values));
    }
}
