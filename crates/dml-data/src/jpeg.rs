//! Structural validation of JPEG files.
//!
//! The JPEG decoder behind the `image` crate is lenient: it accepts a truncated file or
//! garbage entropy-coded data and fills the missing pixels silently. A dataset with such
//! a file would train on grey blocks without anyone noticing, so every JPEG is checked
//! for a complete marker structure before it is decoded.

/// Walks the marker segments of a JPEG file: every segment must fit in the file, the
/// entropy-coded data after each start-of-scan may contain only stuffed bytes
/// (`FF 00`), restart markers (`FF D0`–`FF D7`) or fill bytes before the next marker,
/// and the file must reach its end-of-image marker. Bytes after that marker are allowed
/// (some cameras append data). This catches truncated files and most garbage scan data,
/// which the lenient decoder would turn into grey or noisy pixels without complaint.
pub fn check_jpeg_structure(bytes: &[u8]) -> Result<(), String> {
    const SOI: u8 = 0xD8;
    const EOI: u8 = 0xD9;
    const SOS: u8 = 0xDA;
    let truncated = |at: usize| format!("truncated JPEG: the data ends at byte {at} before the end-of-image marker");
    // `pos` is the offset of the next marker's 0xFF byte; the SOI marker is at 0.
    let mut pos = 2;
    loop {
        if pos >= bytes.len() {
            return Err(truncated(bytes.len()));
        }
        if bytes[pos] != 0xFF {
            return Err(format!(
                "corrupt JPEG: expected a marker at byte {pos}, found {:#04x}",
                bytes[pos]
            ));
        }
        // Any number of 0xFF fill bytes may precede a marker code.
        while pos < bytes.len() && bytes[pos] == 0xFF {
            pos += 1;
        }
        let Some(&marker) = bytes.get(pos) else {
            return Err(truncated(bytes.len()));
        };
        pos += 1;
        match marker {
            EOI => return Ok(()),
            SOI | 0x00 => {
                return Err(format!(
                    "corrupt JPEG: unexpected marker FF {marker:02X} at byte {}",
                    pos - 2
                ));
            }
            // Restart markers and TEM stand alone, without a length field.
            0xD0..=0xD7 | 0x01 => continue,
            0x02..=0xBF => {
                return Err(format!(
                    "corrupt JPEG: reserved marker FF {marker:02X} at byte {}",
                    pos - 2
                ));
            }
            _ => {}
        }
        let Some(length) = bytes
            .get(pos..pos + 2)
            .map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])))
        else {
            return Err(truncated(bytes.len()));
        };
        if length < 2 {
            return Err(format!(
                "corrupt JPEG: segment FF {marker:02X} at byte {} has length {length}",
                pos - 2
            ));
        }
        pos += length;
        if pos > bytes.len() {
            return Err(truncated(bytes.len()));
        }
        if marker == SOS {
            pos = skip_scan_data(bytes, pos)?;
        }
    }
}

/// Skips the entropy-coded data of one scan starting at `pos` and returns the offset of
/// the marker that ends it.
fn skip_scan_data(bytes: &[u8], mut pos: usize) -> Result<usize, String> {
    loop {
        let Some(offset) = bytes[pos..].iter().position(|&b| b == 0xFF) else {
            return Err(format!(
                "truncated JPEG: the data ends at byte {} inside the scan data, before the end-of-image marker",
                bytes.len()
            ));
        };
        let ff = pos + offset;
        let mut next = ff + 1;
        while next < bytes.len() && bytes[next] == 0xFF {
            next += 1;
        }
        match bytes.get(next) {
            None => {
                return Err(format!(
                    "truncated JPEG: the data ends at byte {} inside the scan data, before the end-of-image marker",
                    bytes.len()
                ));
            }
            // A stuffed zero or a restart marker belongs to the scan.
            Some(0x00 | 0xD0..=0xD7) => pos = next + 1,
            // Any defined marker ends the scan: frame headers and tables (C0–CF), the end
            // of the image, the next scan, DQT, DNL, DRI, DHP, EXP (D9–DF), application
            // data (E0–EF) and comments (FE). Reserved codes cannot appear in a valid
            // file, and in practice mean that the scan data is garbage.
            Some(0xC0..=0xCF | 0xD9..=0xDF | 0xE0..=0xEF | 0xFE) => return Ok(ff),
            Some(&other) => {
                return Err(format!(
                    "corrupt JPEG: invalid marker FF {other:02X} at byte {ff} inside the scan data"
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn jpeg() -> Vec<u8> {
        let img = image::RgbImage::from_fn(32, 24, |x, y| {
            image::Rgb([(x * 8) as u8, (y * 10) as u8, (x + y) as u8])
        });
        let mut out = Cursor::new(Vec::new());
        img.write_to(&mut out, image::ImageFormat::Jpeg).unwrap();
        out.into_inner()
    }

    #[test]
    fn accepts_a_valid_jpeg_with_trailing_bytes() {
        let mut bytes = jpeg();
        check_jpeg_structure(&bytes).unwrap();
        bytes.extend_from_slice(b"trailer");
        check_jpeg_structure(&bytes).unwrap();
    }

    #[test]
    fn rejects_truncated_and_garbage_jpegs() {
        let bytes = jpeg();
        for cut in [3, 20, bytes.len() / 2, bytes.len() - 2, bytes.len() - 1] {
            let e = check_jpeg_structure(&bytes[..cut]).unwrap_err();
            assert!(e.contains("truncated"), "cut {cut}: {e}");
        }
        let sos = bytes.windows(2).position(|w| w == [0xFF, 0xDA]).unwrap();
        let mut garbage = bytes.clone();
        let body = sos + 14..bytes.len() - 2;
        for (i, b) in garbage[body].iter_mut().enumerate() {
            *b = if i % 7 == 3 { 0xFF } else { (i * 37 % 251) as u8 };
        }
        let e = check_jpeg_structure(&garbage).unwrap_err();
        assert!(e.contains("corrupt JPEG"), "{e}");
    }
}
