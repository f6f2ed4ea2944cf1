//! NumPy `.npy` (format 1.0) writing, so exported embeddings load with `numpy.load`.

use std::path::Path;

use crate::error::TrainError;

/// Element types that can be written.
pub trait NpyElement: Copy {
    /// The `descr` of the header (`<f4`, `<i8`).
    const DESCR: &'static str;
    /// Appends the little-endian bytes.
    fn put(self, out: &mut Vec<u8>);
}

impl NpyElement for f32 {
    const DESCR: &'static str = "<f4";
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
}

impl NpyElement for i64 {
    const DESCR: &'static str = "<i8";
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
}

/// The bytes of a C-order `.npy` file holding `data` with `shape`.
///
/// Panics when `data.len()` is not the product of `shape` (a programming error).
pub fn encode<T: NpyElement>(data: &[T], shape: &[usize]) -> Vec<u8> {
    assert_eq!(
        data.len(),
        shape.iter().product::<usize>(),
        "npy data of {} values does not fill shape {shape:?}",
        data.len()
    );
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let shape_text = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let mut header = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {shape_text}, }}",
        T::DESCR
    );
    // The magic (6), version (2) and length (2) bytes plus the header and its newline
    // are padded with spaces to a multiple of 64 bytes, as NumPy writes it.
    let unpadded = 10 + header.len() + 1;
    header.push_str(&" ".repeat(unpadded.next_multiple_of(64) - unpadded));
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len() + data.len() * 8);
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for &x in data {
        x.put(&mut out);
    }
    out
}

/// Writes an `.npy` file atomically (temporary file, then rename).
pub fn write<T: NpyElement>(path: &Path, data: &[T], shape: &[usize]) -> Result<(), TrainError> {
    dml_data::write_atomic(path, &encode(data, shape)).map_err(|e| TrainError::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_is_aligned_and_data_follows() {
        let bytes = encode(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
        assert_eq!(&bytes[..8], b"\x93NUMPY\x01\x00");
        let hlen = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
        assert_eq!((10 + hlen) % 64, 0);
        let header = std::str::from_utf8(&bytes[10..10 + hlen]).unwrap();
        assert!(
            header.contains("'descr': '<f4'") && header.contains("'shape': (2, 3)"),
            "{header}"
        );
        assert!(header.ends_with('\n'));
        assert_eq!(bytes.len(), 10 + hlen + 24);
        assert_eq!(f32::from_le_bytes(bytes[10 + hlen + 20..].try_into().unwrap()), 6.0);
        let labels = encode(&[3i64, 4], &[2]);
        assert!(std::str::from_utf8(&labels[10..74]).unwrap().contains("(2,)"));
    }
}
