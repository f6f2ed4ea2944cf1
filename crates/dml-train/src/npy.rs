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
    let mut out = header::<T>(shape);
    out.reserve(data.len() * 8);
    for &x in data {
        x.put(&mut out);
    }
    out
}

/// The magic, version, length and header of a C-order `.npy` file of `T` with `shape`.
fn header<T: NpyElement>(shape: &[usize]) -> Vec<u8> {
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
    let mut out = Vec::with_capacity(10 + header.len());
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out
}

/// An `f32 [rows, dim]` `.npy` file written a batch of rows at a time, so that a large split's
/// embeddings never sit in memory whole: staged beside `path`, renamed into place by
/// [`NpyRows::finish`] once every row is there (dropped before, the staged file is removed).
pub struct NpyRows {
    path: std::path::PathBuf,
    staged: std::path::PathBuf,
    file: Option<std::io::BufWriter<std::fs::File>>,
    rows: usize,
    dim: Option<usize>,
    written: usize,
}

impl NpyRows {
    /// A file of `rows` rows at `path`; the width is the first batch's.
    pub fn create(path: &Path, rows: usize) -> Result<Self, TrainError> {
        let staged = path.with_extension("npy.partial");
        let file = std::fs::File::create(&staged).map_err(|e| TrainError::io(&staged, e))?;
        Ok(Self {
            path: path.to_path_buf(),
            staged,
            file: Some(std::io::BufWriter::new(file)),
            rows,
            dim: None,
            written: 0,
        })
    }

    /// Appends `values`, whole rows of `dim` values; a width other than the first batch's, or more
    /// rows than announced, is an error.
    pub fn push(&mut self, values: &[f32], dim: usize) -> Result<(), TrainError> {
        use std::io::Write;
        let bad = |m: String| TrainError::io(&self.path, m);
        if dim == 0 || !values.len().is_multiple_of(dim) {
            return Err(bad(format!("{} values are not rows of {dim}", values.len())));
        }
        let file = self.file.as_mut().ok_or_else(|| bad("already finished".into()))?;
        match self.dim {
            None => {
                file.write_all(&header::<f32>(&[self.rows, dim]))
                    .map_err(|e| TrainError::io(&self.staged, e))?;
                self.dim = Some(dim);
            }
            Some(d) if d != dim => return Err(bad(format!("rows of {dim} after rows of {d}"))),
            Some(_) => {}
        }
        self.written += values.len() / dim;
        if self.written > self.rows {
            return Err(bad(format!("more than the {} rows announced", self.rows)));
        }
        let mut bytes = Vec::with_capacity(values.len() * 4);
        for &v in values {
            v.put(&mut bytes);
        }
        file.write_all(&bytes).map_err(|e| TrainError::io(&self.staged, e))
    }

    /// Checks that every row was written and moves the file into place.
    pub fn finish(mut self) -> Result<(), TrainError> {
        use std::io::Write;
        if self.written != self.rows || self.dim.is_none() {
            return Err(TrainError::io(
                &self.path,
                format!("{} of {} rows written", self.written, self.rows),
            ));
        }
        let mut file = self
            .file
            .take()
            .ok_or_else(|| TrainError::io(&self.path, "already finished"))?;
        file.flush().map_err(|e| TrainError::io(&self.staged, e))?;
        std::fs::rename(&self.staged, &self.path).map_err(|e| TrainError::io(&self.path, e))
    }
}

impl Drop for NpyRows {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            let _ = std::fs::remove_file(&self.staged);
        }
    }
}

/// Writes an `.npy` file atomically (temporary file, then rename).
pub fn write<T: NpyElement>(path: &Path, data: &[T], shape: &[usize]) -> Result<(), TrainError> {
    dml_data::write_atomic(path, &encode(data, shape)).map_err(|e| TrainError::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_written_in_batches_are_the_whole_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("e.npy");
        let mut rows = NpyRows::create(&path, 3).unwrap();
        rows.push(&[1.0, 2.0], 2).unwrap();
        rows.push(&[3.0, 4.0, 5.0, 6.0], 2).unwrap();
        assert!(!path.exists(), "visible before it is complete");
        rows.finish().unwrap();
        assert_eq!(
            std::fs::read(&path).unwrap(),
            encode(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[3, 2])
        );
        // A short file is an error and leaves nothing behind.
        let short = dir.path().join("short.npy");
        let mut rows = NpyRows::create(&short, 2).unwrap();
        rows.push(&[1.0, 2.0], 2).unwrap();
        assert!(rows.finish().unwrap_err().to_string().contains("1 of 2 rows"));
        assert!(!short.exists() && !dir.path().join("short.npy.partial").exists());
    }

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
