//! Host compute kernels for the CPU backends.
//!
//! Burn's flex backend multiplies through the `gemm` crate, whose AVX-512 micro-kernels, as
//! built here, reach about a quarter of a core's peak. [`sgemm`] keeps its tile in registers and
//! reaches about 65 GMAC/s per core on the development machine (2.5× as much); the
//! host-evaluated losses and [`conv`] (the convolutions of the CNN backbones on flex) use it.
#![warn(missing_docs)]

pub mod conv;
pub mod sgemm;

/// Native-endian `f32` values from raw bytes (tensor data of dtype `f32`), by one copy.
///
/// Burn's typed readers check every element's bit pattern on the way (a pass over the data that
/// cost about 5% of a small-CNN training step); every bit pattern is a valid `f32`, so this copies
/// the bytes as they are.
///
/// # Panics
/// When the length is not a multiple of 4.
pub fn f32s_from_ne_bytes(bytes: &[u8]) -> Vec<f32> {
    assert!(
        bytes.len().is_multiple_of(4),
        "{} bytes are not a whole number of f32s",
        bytes.len()
    );
    let len = bytes.len() / 4;
    let mut out: Vec<f32> = Vec::with_capacity(len);
    // SAFETY: the destination has capacity for `len` f32s (`bytes.len()` bytes), the regions
    // cannot overlap (fresh allocation), and every byte pattern is a valid f32, so after the copy
    // all `len` elements are initialised.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), out.as_mut_ptr().cast::<u8>(), bytes.len());
        out.set_len(len);
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn f32s_round_trip_through_bytes() {
        let values = [1.5f32, -0.0, f32::INFINITY, f32::MIN_POSITIVE, 3.25e-30];
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_ne_bytes()).collect();
        // An odd offset checks that no alignment is assumed.
        let mut shifted = vec![0u8];
        shifted.extend_from_slice(&bytes);
        assert_eq!(super::f32s_from_ne_bytes(&shifted[1..]), values);
    }
}
