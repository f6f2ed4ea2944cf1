//! A reader for Level 5 MAT-files, the format of MATLAB's `save -v6`/`-v7` and of
//! `scipy.io.savemat`.
//!
//! A file is a 128-byte header (descriptive text, subsystem-data offset, version
//! `0x0100` and an endian indicator `IM` or `MI`) followed by data elements. Every
//! element starts with a tag: its data type and its byte count, or — in the
//! *small data element* form — both packed into one 32-bit word with up to four data
//! bytes in the second word. Elements other than top-level compressed ones are padded
//! to a multiple of eight bytes. A variable is an `miMATRIX` element, optionally
//! wrapped in an `miCOMPRESSED` element holding a zlib stream; an `miMATRIX` holds its
//! array flags, dimensions, name and then class-specific sub-elements.
//!
//! [`read_mat`] and [`read_mat_bytes`] return every named variable as a [`MatValue`]:
//! numeric and logical arrays (converted to `f64` whatever their storage type, since
//! MATLAB stores doubles compactly as `miUINT8`, `miINT16`, …), character arrays, cell
//! arrays and struct arrays. Sparse arrays, objects and function handles are rejected
//! with an error that says so.
//!
//! The input is untrusted: every size is checked against the bytes that remain before
//! anything is sliced or allocated, nesting depth is bounded, and every problem is
//! reported as a [`MatError`] naming the byte offset at which it was found.

use std::collections::BTreeMap;
use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Length of the file header; the first data element starts here.
const HEADER_LEN: usize = 128;

/// Deepest nesting of cells and structs accepted. Each level costs a few hundred bytes
/// of stack, so a bound keeps a hostile file from overflowing the stack, and real files
/// rarely nest more than a handful of levels.
const MAX_DEPTH: usize = 64;

/// The smallest possible data element (a bare tag), used to bound the number of cell
/// items or struct fields an array may claim before they are allocated.
const MIN_ELEMENT_LEN: usize = 8;

/// Upper bound on how much a zlib stream may expand: deflate cannot exceed a ratio of
/// about 1032:1, so anything larger is corrupt and must not be buffered.
const MAX_INFLATE_RATIO: usize = 1100;

// Data types of element tags.
const MI_INT8: u32 = 1;
const MI_UINT8: u32 = 2;
const MI_INT16: u32 = 3;
const MI_UINT16: u32 = 4;
const MI_INT32: u32 = 5;
const MI_UINT32: u32 = 6;
const MI_SINGLE: u32 = 7;
const MI_DOUBLE: u32 = 9;
const MI_INT64: u32 = 12;
const MI_UINT64: u32 = 13;
const MI_MATRIX: u32 = 14;
const MI_COMPRESSED: u32 = 15;
const MI_UTF8: u32 = 16;
const MI_UTF16: u32 = 17;
const MI_UTF32: u32 = 18;

// Array classes, the low byte of the array flags.
const MX_CELL: u32 = 1;
const MX_STRUCT: u32 = 2;
const MX_OBJECT: u32 = 3;
const MX_CHAR: u32 = 4;
const MX_SPARSE: u32 = 5;
const MX_FUNCTION: u32 = 16;
const MX_OPAQUE: u32 = 17;

// Bits of the array flags word.
const FLAG_COMPLEX: u32 = 0x0800;
const FLAG_LOGICAL: u32 = 0x0200;

/// Why a MAT-file could not be read.
#[derive(Debug)]
pub enum MatError {
    /// The file could not be read from disk.
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The bytes are not a well-formed Level 5 MAT-file, or use a feature this reader
    /// does not support.
    Format {
        /// The file, when the bytes came from one.
        path: Option<PathBuf>,
        /// Byte offset of the problem: in the file, or — when `compressed_at` is set — in
        /// the data decompressed from that element.
        offset: u64,
        /// File offset of the `miCOMPRESSED` element whose decompressed data `offset`
        /// refers to.
        compressed_at: Option<u64>,
        /// What is wrong.
        message: String,
    },
}

impl MatError {
    /// The description of the problem without the file and offset.
    pub fn message(&self) -> String {
        match self {
            MatError::Io { source, .. } => source.to_string(),
            MatError::Format { message, .. } => message.clone(),
        }
    }

    /// Attaches the file name to a format error (I/O errors carry it already).
    fn in_file(self, file: &Path) -> Self {
        match self {
            MatError::Format {
                offset,
                compressed_at,
                message,
                ..
            } => MatError::Format {
                path: Some(file.to_path_buf()),
                offset,
                compressed_at,
                message,
            },
            io => io,
        }
    }
}

impl fmt::Display for MatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MatError::Io { path, source } => write!(f, "cannot read {}: {source}", path.display()),
            MatError::Format {
                path,
                offset,
                compressed_at,
                message,
            } => {
                if let Some(path) = path {
                    write!(f, "{}: ", path.display())?;
                }
                match compressed_at {
                    None => write!(f, "malformed MAT-file at byte {offset}: {message}"),
                    Some(at) => write!(
                        f,
                        "malformed MAT-file at byte {offset} of the data decompressed from the \
                         miCOMPRESSED element at byte {at}: {message}"
                    ),
                }
            }
        }
    }
}

impl std::error::Error for MatError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            MatError::Io { source, .. } => Some(source),
            MatError::Format { .. } => None,
        }
    }
}

/// The MATLAB class of a numeric array, which says how MATLAB would hold the values in
/// memory (the file may store them in a narrower type).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NumericClass {
    /// `double` (`mxDOUBLE_CLASS`, 6).
    Double,
    /// `single` (`mxSINGLE_CLASS`, 7).
    Single,
    /// `int8` (8).
    Int8,
    /// `uint8` (9); also the class of logical arrays.
    UInt8,
    /// `int16` (10).
    Int16,
    /// `uint16` (11).
    UInt16,
    /// `int32` (12).
    Int32,
    /// `uint32` (13).
    UInt32,
    /// `int64` (14).
    Int64,
    /// `uint64` (15).
    UInt64,
}

impl NumericClass {
    /// The class for an `mxCLASS` code, if it is numeric.
    fn from_code(code: u32) -> Option<Self> {
        Some(match code {
            6 => NumericClass::Double,
            7 => NumericClass::Single,
            8 => NumericClass::Int8,
            9 => NumericClass::UInt8,
            10 => NumericClass::Int16,
            11 => NumericClass::UInt16,
            12 => NumericClass::Int32,
            13 => NumericClass::UInt32,
            14 => NumericClass::Int64,
            15 => NumericClass::UInt64,
            _ => return None,
        })
    }

    /// The MATLAB name of the class (`double`, `uint8`, …).
    pub fn name(self) -> &'static str {
        match self {
            NumericClass::Double => "double",
            NumericClass::Single => "single",
            NumericClass::Int8 => "int8",
            NumericClass::UInt8 => "uint8",
            NumericClass::Int16 => "int16",
            NumericClass::UInt16 => "uint16",
            NumericClass::Int32 => "int32",
            NumericClass::UInt32 => "uint32",
            NumericClass::Int64 => "int64",
            NumericClass::UInt64 => "uint64",
        }
    }
}

/// A numeric or logical array. Values are in column-major (MATLAB) order and converted
/// to `f64`, which is exact for every storage type except 64-bit integers beyond 2^53.
#[derive(Debug, Clone, PartialEq)]
pub struct NumericArray {
    /// The MATLAB class.
    pub class: NumericClass,
    /// The dimensions (at least two for arrays written by MATLAB).
    pub dims: Vec<usize>,
    /// The real parts, one per element.
    pub real: Vec<f64>,
    /// The imaginary parts of a complex array.
    pub imag: Option<Vec<f64>>,
    /// Whether the array is a MATLAB `logical` (stored with class `uint8`).
    pub logical: bool,
}

/// A character array. Characters are in column-major order, one per element; row `r`
/// of an `m×n` array is `chars[r], chars[r + m], …`.
///
/// UTF-8 and UTF-32 data give one element per code point (as `scipy.io` writes them);
/// UTF-16 data gives one element per code unit (as MATLAB counts them), with surrogate
/// halves, which MATLAB keeps as separate elements, replaced by U+FFFD.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CharArray {
    /// The dimensions.
    pub dims: Vec<usize>,
    /// The characters, column-major.
    pub chars: Vec<char>,
}

impl CharArray {
    /// The rows of the array as strings (MATLAB pads shorter rows with spaces; they are
    /// returned as stored). Dimensions beyond the second are folded into the columns.
    pub fn rows(&self) -> Vec<String> {
        let m = self.dims.first().copied().unwrap_or(0);
        if m == 0 {
            return Vec::new();
        }
        let columns = self.chars.len() / m;
        (0..m)
            .map(|r| (0..columns).filter_map(|c| self.chars.get(r + m * c)).collect())
            .collect()
    }

    /// The text of a row vector (`1×n`) or an empty array; `None` for a multi-row array.
    pub fn text(&self) -> Option<String> {
        if self.chars.is_empty() {
            return Some(String::new());
        }
        (self.dims.first().copied() == Some(1)).then(|| self.chars.iter().collect())
    }
}

/// A cell array: every element is an array of its own.
#[derive(Debug, Clone, PartialEq)]
pub struct CellArray {
    /// The dimensions.
    pub dims: Vec<usize>,
    /// The elements, column-major.
    pub items: Vec<MatValue>,
}

/// A struct array: every element has a value for each field.
#[derive(Debug, Clone, PartialEq)]
pub struct StructArray {
    /// The dimensions.
    pub dims: Vec<usize>,
    /// The field names, in file order.
    pub field_names: Vec<String>,
    /// The values, element-major: element `e`'s field `f` is
    /// `values[e * field_names.len() + f]`, elements in column-major order.
    pub values: Vec<MatValue>,
}

impl StructArray {
    /// The number of elements.
    pub fn len(&self) -> usize {
        element_count(&self.dims).unwrap_or(0)
    }

    /// Whether the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The position of field `name`.
    pub fn field_index(&self, name: &str) -> Option<usize> {
        self.field_names.iter().position(|f| f == name)
    }

    /// Field `name` of element `element` (column-major index).
    pub fn get(&self, element: usize, name: &str) -> Option<&MatValue> {
        let field = self.field_index(name)?;
        self.values
            .get(element.checked_mul(self.field_names.len())?.checked_add(field)?)
    }

    /// Every element's value of field `name`, in element order; `None` if there is no
    /// such field.
    pub fn field(&self, name: &str) -> Option<impl Iterator<Item = &MatValue>> {
        let field = self.field_index(name)?;
        // `field_index` found the field, so there is at least one and the step is positive.
        Some(self.values.iter().skip(field).step_by(self.field_names.len()))
    }
}

/// One MATLAB array.
#[derive(Debug, Clone, PartialEq)]
pub enum MatValue {
    /// A numeric or logical array.
    Numeric(NumericArray),
    /// A character array.
    Char(CharArray),
    /// A cell array.
    Cell(CellArray),
    /// A struct array.
    Struct(StructArray),
}

impl MatValue {
    /// The empty `0×0 double` array, which is what an `miMATRIX` element without
    /// contents stands for.
    pub fn empty() -> Self {
        MatValue::Numeric(NumericArray {
            class: NumericClass::Double,
            dims: vec![0, 0],
            real: Vec::new(),
            imag: None,
            logical: false,
        })
    }

    /// The dimensions.
    pub fn dims(&self) -> &[usize] {
        match self {
            MatValue::Numeric(a) => &a.dims,
            MatValue::Char(a) => &a.dims,
            MatValue::Cell(a) => &a.dims,
            MatValue::Struct(a) => &a.dims,
        }
    }

    /// The number of elements (the product of the dimensions).
    pub fn len(&self) -> usize {
        element_count(self.dims()).unwrap_or(0)
    }

    /// Whether the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A short description for error messages, such as `1×3 uint8 array`.
    pub fn describe(&self) -> String {
        let kind = match self {
            MatValue::Numeric(a) if a.logical => "logical",
            MatValue::Numeric(a) => a.class.name(),
            MatValue::Char(_) => "char",
            MatValue::Cell(_) => "cell",
            MatValue::Struct(_) => "struct",
        };
        format!("{} {kind} array", dims_text(self.dims()))
    }

    /// The numeric array, if this is one.
    pub fn as_numeric(&self) -> Option<&NumericArray> {
        match self {
            MatValue::Numeric(a) => Some(a),
            _ => None,
        }
    }

    /// The character array, if this is one.
    pub fn as_char(&self) -> Option<&CharArray> {
        match self {
            MatValue::Char(a) => Some(a),
            _ => None,
        }
    }

    /// The cell array, if this is one.
    pub fn as_cell(&self) -> Option<&CellArray> {
        match self {
            MatValue::Cell(a) => Some(a),
            _ => None,
        }
    }

    /// The struct array, if this is one.
    pub fn as_struct(&self) -> Option<&StructArray> {
        match self {
            MatValue::Struct(a) => Some(a),
            _ => None,
        }
    }

    /// The value of a real numeric array with exactly one element.
    pub fn scalar(&self) -> Option<f64> {
        match self {
            MatValue::Numeric(a) if a.imag.is_none() && a.real.len() == 1 => a.real.first().copied(),
            _ => None,
        }
    }

    /// The text of a character row vector (see [`CharArray::text`]).
    pub fn text(&self) -> Option<String> {
        self.as_char()?.text()
    }
}

/// Reads every named variable of the MAT-file at `path`. The file is read into memory
/// whole: MAT-files of annotations are small, and random access keeps the parser simple.
pub fn read_mat(path: impl AsRef<Path>) -> Result<BTreeMap<String, MatValue>, MatError> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|source| MatError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    read_mat_bytes(&bytes).map_err(|e| e.in_file(path))
}

/// Reads every named variable of a MAT-file held in memory. Unnamed top-level arrays
/// (such as the subsystem data MATLAB appends for objects) are skipped.
pub fn read_mat_bytes(bytes: &[u8]) -> Result<BTreeMap<String, MatValue>, MatError> {
    let header = parse_header(bytes)?;
    let file = Buf {
        bytes,
        endian: header.endian,
        compressed_at: None,
    };
    let mut variables = BTreeMap::new();
    let mut pos = HEADER_LEN;
    while pos < bytes.len() {
        // Top-level elements are not padded: MATLAB writes compressed elements
        // back to back, and miMATRIX elements are multiples of eight bytes anyway.
        let element = file.element(pos, bytes.len(), false)?;
        if header.subsystem_offset == Some(pos as u64) {
            pos = element.next;
            continue;
        }
        match element.ty {
            MI_MATRIX => file.add_variable(&element, &mut variables)?,
            MI_COMPRESSED => {
                let inflated = inflate(&file, &element)?;
                let inner = Buf {
                    bytes: &inflated,
                    endian: header.endian,
                    compressed_at: Some(pos as u64),
                };
                let mut inner_pos = 0;
                while inner_pos < inflated.len() {
                    let inner_element = inner.element(inner_pos, inflated.len(), false)?;
                    if inner_element.ty != MI_MATRIX {
                        return Err(inner.error(
                            inner_pos,
                            format!(
                                "a compressed element holds an element of type {}; expected miMATRIX",
                                type_name(inner_element.ty)
                            ),
                        ));
                    }
                    inner.add_variable(&inner_element, &mut variables)?;
                    inner_pos = inner_element.next;
                }
            }
            other => {
                return Err(file.error(
                    pos,
                    format!(
                        "unexpected top-level element of type {}; expected miMATRIX or miCOMPRESSED",
                        type_name(other)
                    ),
                ));
            }
        }
        pos = element.next;
    }
    Ok(variables)
}

/// Byte order of the numbers in a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Endian {
    Little,
    Big,
}

/// What the 128-byte header says.
struct Header {
    endian: Endian,
    /// Where the subsystem data element starts, if the file has one.
    subsystem_offset: Option<u64>,
}

fn format_error(offset: usize, message: impl Into<String>) -> MatError {
    MatError::Format {
        path: None,
        offset: offset as u64,
        compressed_at: None,
        message: message.into(),
    }
}

fn parse_header(bytes: &[u8]) -> Result<Header, MatError> {
    let Some(header) = bytes.get(..HEADER_LEN) else {
        return Err(format_error(
            bytes.len(),
            format!("file ends after {} bytes, inside the 128-byte header", bytes.len()),
        ));
    };
    let text = header.get(..116).unwrap_or_default();
    if text.starts_with(b"\x89HDF") {
        return Err(format_error(
            0,
            "this is an HDF5 file; MATLAB v7.3 MAT-files are not supported (re-save with -v7)",
        ));
    }
    let endian = match header.get(126..128) {
        Some(b"IM") => Endian::Little,
        Some(b"MI") => Endian::Big,
        _ => {
            return Err(format_error(
                126,
                "no endian indicator \"IM\" or \"MI\" in the header: not a Level 5 MAT-file \
                 (MATLAB v4 files are not supported)",
            ));
        }
    };
    let version_bytes: [u8; 2] = header.get(124..126).and_then(|b| b.try_into().ok()).unwrap_or_default();
    let version = match endian {
        Endian::Little => u16::from_le_bytes(version_bytes),
        Endian::Big => u16::from_be_bytes(version_bytes),
    };
    if version != 0x0100 {
        let hint = if version == 0x0200 {
            " (a MATLAB v7.3 HDF5 file; re-save with -v7)"
        } else {
            ""
        };
        return Err(format_error(
            124,
            format!("unsupported MAT-file version {version:#06x}; only Level 5 (0x0100) is supported{hint}"),
        ));
    }
    let offset_bytes: [u8; 8] = header.get(116..124).and_then(|b| b.try_into().ok()).unwrap_or_default();
    // Writers leave the field as zeros or as spaces when there is no subsystem data.
    let subsystem_offset = if offset_bytes == [0; 8] || offset_bytes == [b' '; 8] {
        None
    } else {
        Some(match endian {
            Endian::Little => u64::from_le_bytes(offset_bytes),
            Endian::Big => u64::from_be_bytes(offset_bytes),
        })
    };
    Ok(Header {
        endian,
        subsystem_offset,
    })
}

/// A data element located in a [`Buf`].
struct Element<'a> {
    /// The data type from the tag.
    ty: u32,
    /// Offset of the tag.
    start: usize,
    /// Offset of the first data byte.
    data_start: usize,
    /// The data bytes (without padding).
    data: &'a [u8],
    /// Offset just past the element and its padding.
    next: usize,
}

/// A byte buffer being parsed: the file itself or the data decompressed from one
/// `miCOMPRESSED` element, which changes what error offsets refer to.
struct Buf<'a> {
    bytes: &'a [u8],
    endian: Endian,
    compressed_at: Option<u64>,
}

impl<'a> Buf<'a> {
    fn error(&self, offset: usize, message: impl Into<String>) -> MatError {
        MatError::Format {
            path: None,
            offset: offset as u64,
            compressed_at: self.compressed_at,
            message: message.into(),
        }
    }

    fn u32_of(&self, bytes: [u8; 4]) -> u32 {
        match self.endian {
            Endian::Little => u32::from_le_bytes(bytes),
            Endian::Big => u32::from_be_bytes(bytes),
        }
    }

    /// The four bytes at `pos` as a number, if they lie before `end`.
    fn u32_at(&self, pos: usize, end: usize) -> Option<u32> {
        let stop = pos.checked_add(4).filter(|&s| s <= end)?;
        let bytes: [u8; 4] = self.bytes.get(pos..stop)?.try_into().ok()?;
        Some(self.u32_of(bytes))
    }

    /// Reads the data element whose tag starts at `pos`, which must end by `end`.
    /// `padded` says whether the element is followed by padding to eight bytes.
    fn element(&self, pos: usize, end: usize, padded: bool) -> Result<Element<'a>, MatError> {
        let available = end.saturating_sub(pos);
        let Some(first) = self.u32_at(pos, end) else {
            return Err(self.error(
                pos,
                format!("data ends inside an element tag ({available} of 8 bytes present)"),
            ));
        };
        if first >> 16 != 0 {
            // Small data element: the size is in the upper half of the first word and
            // the data sits in the second word.
            let ty = first & 0xffff;
            let size = (first >> 16) as usize;
            if size > 4 {
                return Err(self.error(
                    pos,
                    format!(
                        "small data element of type {} declares {size} bytes; at most 4 fit",
                        type_name(ty)
                    ),
                ));
            }
            if available < 8 {
                return Err(self.error(
                    pos,
                    format!("data ends inside a small data element ({available} of 8 bytes present)"),
                ));
            }
            let data = self
                .bytes
                .get(pos + 4..pos + 4 + size)
                .ok_or_else(|| self.error(pos, "small data element lies outside the data"))?;
            return Ok(Element {
                ty,
                start: pos,
                data_start: pos + 4,
                data,
                next: pos + 8,
            });
        }
        let Some(size) = self.u32_at(pos + 4, end) else {
            return Err(self.error(
                pos,
                format!("data ends inside an element tag ({available} of 8 bytes present)"),
            ));
        };
        let size = size as usize;
        let data_start = pos + 8;
        let remaining = end - data_start;
        if size > remaining {
            return Err(self.error(
                pos,
                format!(
                    "{} element declares {size} bytes but only {remaining} remain{}",
                    type_name(first),
                    if self.compressed_at.is_none() && end == self.bytes.len() {
                        " (truncated file?)"
                    } else {
                        ""
                    }
                ),
            ));
        }
        let data = self
            .bytes
            .get(data_start..data_start + size)
            .ok_or_else(|| self.error(pos, "element lies outside the data"))?;
        let padded_size = if padded { size.next_multiple_of(8) } else { size };
        // A missing final padding inside a matrix is tolerated: it carries no data.
        let next = data_start + padded_size.min(remaining);
        Ok(Element {
            ty: first,
            start: pos,
            data_start,
            data,
            next,
        })
    }

    /// Parses a top-level `miMATRIX` element and stores it under its name.
    fn add_variable(&self, element: &Element<'a>, variables: &mut BTreeMap<String, MatValue>) -> Result<(), MatError> {
        let (name, value) = self.matrix(element, 0)?;
        if name.is_empty() {
            return Ok(());
        }
        if variables.contains_key(&name) {
            return Err(self.error(element.start, format!("variable {name:?} is defined twice")));
        }
        variables.insert(name, value);
        Ok(())
    }

    /// Parses an `miMATRIX` element into its name and value.
    fn matrix(&self, element: &Element<'a>, depth: usize) -> Result<(String, MatValue), MatError> {
        if element.data.is_empty() {
            return Ok((String::new(), MatValue::empty()));
        }
        if depth > MAX_DEPTH {
            return Err(self.error(
                element.start,
                format!("cells and structs nest deeper than {MAX_DEPTH} levels"),
            ));
        }
        let end = element.data_start + element.data.len();
        let mut pos = element.data_start;

        let flags_element = self.element(pos, end, true)?;
        let flags = match (flags_element.ty, flags_element.data.get(..4)) {
            (MI_UINT32, Some(word)) => self.u32_of(word.try_into().unwrap_or_default()),
            _ => {
                return Err(self.error(
                    pos,
                    format!(
                        "array flags must be an miUINT32 element of 8 bytes, found {} of {} bytes",
                        type_name(flags_element.ty),
                        flags_element.data.len()
                    ),
                ));
            }
        };
        pos = flags_element.next;
        let class = flags & 0xff;
        let complex = flags & FLAG_COMPLEX != 0;
        let logical = flags & FLAG_LOGICAL != 0;
        match class {
            MX_SPARSE => {
                return Err(self.error(
                    element.start,
                    "sparse arrays (mxSPARSE) are not supported; convert them with full() before saving",
                ));
            }
            MX_OBJECT => return Err(self.error(element.start, "MATLAB objects (mxOBJECT) are not supported")),
            MX_FUNCTION => return Err(self.error(element.start, "function handles are not supported")),
            MX_OPAQUE => {
                return Err(self.error(
                    element.start,
                    "opaque objects (strings, tables, …) are not supported; save plain char/cell arrays",
                ));
            }
            MX_CELL | MX_STRUCT | MX_CHAR => {}
            code if NumericClass::from_code(code).is_some() => {}
            code => return Err(self.error(flags_element.start, format!("unknown array class {code}"))),
        }

        let dims_element = self.element(pos, end, true)?;
        if dims_element.ty != MI_INT32 || !dims_element.data.len().is_multiple_of(4) {
            return Err(self.error(
                pos,
                format!(
                    "dimensions must be an miINT32 element, found {} of {} bytes",
                    type_name(dims_element.ty),
                    dims_element.data.len()
                ),
            ));
        }
        let mut dims = Vec::with_capacity(dims_element.data.len() / 4);
        for chunk in dims_element.data.chunks_exact(4) {
            let value = self.u32_of(chunk.try_into().unwrap_or_default()) as i32;
            let dim = usize::try_from(value)
                .map_err(|_| self.error(dims_element.start, format!("negative dimension {value}")))?;
            dims.push(dim);
        }
        if dims.is_empty() {
            dims = vec![0, 0];
        }
        let count = element_count(&dims).ok_or_else(|| {
            self.error(
                dims_element.start,
                format!("dimensions {} overflow the address space", dims_text(&dims)),
            )
        })?;
        pos = dims_element.next;

        let name_element = self.element(pos, end, true)?;
        if !matches!(name_element.ty, MI_INT8 | MI_UINT8) {
            return Err(self.error(
                pos,
                format!(
                    "array name must be an miINT8 element, found {}",
                    type_name(name_element.ty)
                ),
            ));
        }
        let name = String::from_utf8_lossy(name_element.data)
            .trim_end_matches('\0')
            .to_string();
        pos = name_element.next;

        let (value, pos) = match class {
            MX_CELL => self.cell(pos, end, dims, count, depth)?,
            MX_STRUCT => self.structure(pos, end, dims, count, depth)?,
            MX_CHAR => {
                let (chars, pos) = self.chars(pos, end, count, &dims)?;
                (MatValue::Char(CharArray { dims, chars }), pos)
            }
            code => {
                // The class was checked above, so this is a numeric class.
                let class = NumericClass::from_code(code).unwrap_or(NumericClass::Double);
                let (real, pos) = self.numbers(pos, end, count, &dims, "real part")?;
                let (imag, pos) = if complex {
                    let (imag, pos) = self.numbers(pos, end, count, &dims, "imaginary part")?;
                    (Some(imag), pos)
                } else {
                    (None, pos)
                };
                let array = NumericArray {
                    class,
                    dims,
                    real,
                    imag,
                    logical,
                };
                (MatValue::Numeric(array), pos)
            }
        };
        if pos < end {
            return Err(self.error(
                pos,
                format!("{} unexpected bytes after the data of array {name:?}", end - pos),
            ));
        }
        Ok((name, value))
    }

    /// Reads the numeric data element at `pos`, converting any storage type to `f64`.
    fn numbers(
        &self,
        pos: usize,
        end: usize,
        count: usize,
        dims: &[usize],
        what: &str,
    ) -> Result<(Vec<f64>, usize), MatError> {
        if count == 0 && pos >= end {
            // Some writers omit the data element of an empty array.
            return Ok((Vec::new(), pos));
        }
        let element = self.element(pos, end, true)?;
        let width = match element.ty {
            MI_INT8 | MI_UINT8 => 1,
            MI_INT16 | MI_UINT16 => 2,
            MI_INT32 | MI_UINT32 | MI_SINGLE => 4,
            MI_DOUBLE | MI_INT64 | MI_UINT64 => 8,
            other => {
                return Err(self.error(
                    pos,
                    format!(
                        "the {what} of a numeric array is stored as {}, which is not numeric",
                        type_name(other)
                    ),
                ));
            }
        };
        if !element.data.len().is_multiple_of(width) {
            return Err(self.error(
                pos,
                format!(
                    "{} data of {} bytes is not a whole number of {width}-byte values",
                    type_name(element.ty),
                    element.data.len()
                ),
            ));
        }
        let found = element.data.len() / width;
        if found != count {
            return Err(self.error(
                pos,
                format!(
                    "the {what} holds {found} values but the dimensions {} need {count}",
                    dims_text(dims)
                ),
            ));
        }
        let little = self.endian == Endian::Little;
        let values = element
            .data
            .chunks_exact(width)
            .map(|c| {
                // `chunks_exact(width)` yields exactly `width` bytes, so each conversion
                // to a fixed-size array succeeds; the defaults are never used.
                macro_rules! num {
                    ($t:ty) => {{
                        let b = c.try_into().unwrap_or_default();
                        (if little {
                            <$t>::from_le_bytes(b)
                        } else {
                            <$t>::from_be_bytes(b)
                        }) as f64
                    }};
                }
                match element.ty {
                    MI_INT8 => num!(i8),
                    MI_UINT8 => num!(u8),
                    MI_INT16 => num!(i16),
                    MI_UINT16 => num!(u16),
                    MI_INT32 => num!(i32),
                    MI_UINT32 => num!(u32),
                    MI_SINGLE => num!(f32),
                    MI_INT64 => num!(i64),
                    MI_UINT64 => num!(u64),
                    _ => num!(f64),
                }
            })
            .collect();
        Ok((values, element.next))
    }

    /// Reads the character data element at `pos`.
    fn chars(&self, pos: usize, end: usize, count: usize, dims: &[usize]) -> Result<(Vec<char>, usize), MatError> {
        if count == 0 && pos >= end {
            return Ok((Vec::new(), pos));
        }
        let element = self.element(pos, end, true)?;
        let data = element.data;
        let little = self.endian == Endian::Little;
        let chars: Vec<char> = match element.ty {
            MI_UTF8 => std::str::from_utf8(data)
                .map_err(|e| self.error(element.data_start + e.valid_up_to(), "invalid UTF-8 in character data"))?
                .chars()
                .collect(),
            MI_UINT16 | MI_UTF16 | MI_INT16 => {
                if !data.len().is_multiple_of(2) {
                    return Err(self.error(pos, format!("UTF-16 character data has an odd length {}", data.len())));
                }
                data.chunks_exact(2)
                    .map(|c| {
                        let b = c.try_into().unwrap_or_default();
                        let unit = if little {
                            u16::from_le_bytes(b)
                        } else {
                            u16::from_be_bytes(b)
                        };
                        char::from_u32(u32::from(unit)).unwrap_or(char::REPLACEMENT_CHARACTER)
                    })
                    .collect()
            }
            MI_UTF32 | MI_UINT32 | MI_INT32 => {
                if !data.len().is_multiple_of(4) {
                    return Err(self.error(
                        pos,
                        format!("UTF-32 character data of {} bytes is not a multiple of 4", data.len()),
                    ));
                }
                data.chunks_exact(4)
                    .map(|c| char::from_u32(self.u32_of(c.try_into().unwrap_or_default())).unwrap_or('\u{fffd}'))
                    .collect()
            }
            // One byte per character, read as Latin-1 as MATLAB does for 8-bit data.
            MI_UINT8 | MI_INT8 => data.iter().map(|&b| char::from(b)).collect(),
            other => {
                return Err(self.error(
                    pos,
                    format!(
                        "character data is stored as {}, which is not a text type",
                        type_name(other)
                    ),
                ));
            }
        };
        if chars.len() != count {
            return Err(self.error(
                pos,
                format!(
                    "character data holds {} characters but the dimensions {} need {count}",
                    chars.len(),
                    dims_text(dims)
                ),
            ));
        }
        Ok((chars, element.next))
    }

    /// Reads the `miMATRIX` element at `pos` as an element of a cell or struct.
    fn nested(&self, pos: usize, end: usize, depth: usize) -> Result<(MatValue, usize), MatError> {
        let element = self.element(pos, end, true)?;
        if element.ty != MI_MATRIX {
            return Err(self.error(
                pos,
                format!(
                    "a cell or struct element is stored as {}; expected miMATRIX",
                    type_name(element.ty)
                ),
            ));
        }
        let (_, value) = self.matrix(&element, depth + 1)?;
        Ok((value, element.next))
    }

    fn cell(
        &self,
        mut pos: usize,
        end: usize,
        dims: Vec<usize>,
        count: usize,
        depth: usize,
    ) -> Result<(MatValue, usize), MatError> {
        self.check_room(pos, end, count, "cell array", &dims)?;
        let mut items = Vec::with_capacity(count);
        for _ in 0..count {
            let (item, next) = self.nested(pos, end, depth)?;
            items.push(item);
            pos = next;
        }
        Ok((MatValue::Cell(CellArray { dims, items }), pos))
    }

    fn structure(
        &self,
        mut pos: usize,
        end: usize,
        dims: Vec<usize>,
        count: usize,
        depth: usize,
    ) -> Result<(MatValue, usize), MatError> {
        let length_element = self.element(pos, end, true)?;
        let name_length = match (length_element.ty, length_element.data.get(..4)) {
            (MI_INT32, Some(word)) => self.u32_of(word.try_into().unwrap_or_default()) as i32,
            _ => {
                return Err(self.error(
                    pos,
                    format!(
                        "the field-name length must be an miINT32 element, found {} of {} bytes",
                        type_name(length_element.ty),
                        length_element.data.len()
                    ),
                ));
            }
        };
        let name_length = usize::try_from(name_length)
            .map_err(|_| self.error(pos, format!("negative field-name length {name_length}")))?;
        pos = length_element.next;

        let names_element = self.element(pos, end, true)?;
        if !matches!(names_element.ty, MI_INT8 | MI_UINT8) {
            return Err(self.error(
                pos,
                format!(
                    "field names must be an miINT8 element, found {}",
                    type_name(names_element.ty)
                ),
            ));
        }
        let names_data = names_element.data;
        let field_count = match name_length {
            0 if names_data.is_empty() => 0,
            0 => return Err(self.error(pos, "field names are present but their length is 0")),
            n if !names_data.len().is_multiple_of(n) => {
                return Err(self.error(
                    pos,
                    format!(
                        "{} bytes of field names are not a multiple of the name length {n}",
                        names_data.len()
                    ),
                ));
            }
            n => names_data.len() / n,
        };
        let mut field_names: Vec<String> = Vec::with_capacity(field_count);
        if name_length > 0 {
            for slot in names_data.chunks_exact(name_length) {
                let used = slot.iter().position(|&b| b == 0).unwrap_or(slot.len());
                let name = String::from_utf8_lossy(slot.get(..used).unwrap_or_default()).into_owned();
                if field_names.contains(&name) {
                    return Err(self.error(pos, format!("field {name:?} is listed twice")));
                }
                field_names.push(name);
            }
        }
        pos = names_element.next;

        let value_count = count
            .checked_mul(field_count)
            .ok_or_else(|| self.error(pos, "the number of struct values overflows"))?;
        self.check_room(pos, end, value_count, "struct array", &dims)?;
        let mut values = Vec::with_capacity(value_count);
        for _ in 0..value_count {
            let (value, next) = self.nested(pos, end, depth)?;
            values.push(value);
            pos = next;
        }
        let array = StructArray {
            dims,
            field_names,
            values,
        };
        Ok((MatValue::Struct(array), pos))
    }

    /// Fails unless `count` nested elements could fit before `end`, so that a corrupt
    /// dimension cannot make the reader allocate more than the input justifies.
    fn check_room(&self, pos: usize, end: usize, count: usize, what: &str, dims: &[usize]) -> Result<(), MatError> {
        let room = end.saturating_sub(pos);
        if count.checked_mul(MIN_ELEMENT_LEN).is_none_or(|needed| needed > room) {
            return Err(self.error(
                pos,
                format!(
                    "{} {what} needs {count} nested arrays but only {room} bytes remain",
                    dims_text(dims)
                ),
            ));
        }
        Ok(())
    }
}

/// Decompresses an `miCOMPRESSED` element, refusing output beyond what deflate could
/// produce from its size so that a corrupt stream cannot exhaust memory.
fn inflate(file: &Buf<'_>, element: &Element<'_>) -> Result<Vec<u8>, MatError> {
    let limit = element
        .data
        .len()
        .saturating_mul(MAX_INFLATE_RATIO)
        .saturating_add(1024);
    let mut inflated = Vec::new();
    flate2::read::ZlibDecoder::new(element.data)
        .take(limit as u64)
        .read_to_end(&mut inflated)
        .map_err(|e| {
            file.error(
                element.start,
                format!("corrupt zlib stream in miCOMPRESSED element: {e}"),
            )
        })?;
    if inflated.len() >= limit {
        return Err(file.error(
            element.start,
            "miCOMPRESSED element expands implausibly; the stream is corrupt",
        ));
    }
    if inflated.is_empty() {
        return Err(file.error(element.start, "miCOMPRESSED element decompresses to nothing"));
    }
    Ok(inflated)
}

/// The product of `dims`, or `None` on overflow.
fn element_count(dims: &[usize]) -> Option<usize> {
    dims.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))
}

/// `2×3` style text for dimensions.
fn dims_text(dims: &[usize]) -> String {
    dims.iter().map(usize::to_string).collect::<Vec<_>>().join("×")
}

/// The name of a data type for messages.
fn type_name(ty: u32) -> String {
    let name = match ty {
        MI_INT8 => "miINT8",
        MI_UINT8 => "miUINT8",
        MI_INT16 => "miINT16",
        MI_UINT16 => "miUINT16",
        MI_INT32 => "miINT32",
        MI_UINT32 => "miUINT32",
        MI_SINGLE => "miSINGLE",
        MI_DOUBLE => "miDOUBLE",
        MI_INT64 => "miINT64",
        MI_UINT64 => "miUINT64",
        MI_MATRIX => "miMATRIX",
        MI_COMPRESSED => "miCOMPRESSED",
        MI_UTF8 => "miUTF8",
        MI_UTF16 => "miUTF16",
        MI_UTF32 => "miUTF32",
        other => return format!("unknown type {other}"),
    };
    name.to_string()
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    /// A minimal MAT-file writer for building test inputs in either byte order.
    #[derive(Clone, Copy)]
    struct W {
        big: bool,
    }

    const LE: W = W { big: false };
    const BE: W = W { big: true };

    impl W {
        fn u32(self, v: u32) -> [u8; 4] {
            if self.big { v.to_be_bytes() } else { v.to_le_bytes() }
        }

        fn header(self) -> Vec<u8> {
            let mut h = b"MATLAB 5.0 MAT-file, written by the xtask unit tests".to_vec();
            h.resize(116, b' ');
            h.extend_from_slice(&[0; 8]);
            h.extend_from_slice(&if self.big {
                0x0100u16.to_be_bytes()
            } else {
                0x0100u16.to_le_bytes()
            });
            h.extend_from_slice(if self.big { b"MI" } else { b"IM" });
            h
        }

        /// A regular element, padded to eight bytes.
        fn element(self, ty: u32, data: &[u8]) -> Vec<u8> {
            let mut e = self.u32(ty).to_vec();
            e.extend_from_slice(&self.u32(data.len() as u32));
            e.extend_from_slice(data);
            e.resize(e.len().next_multiple_of(8), 0);
            e
        }

        /// A small data element (at most four bytes of data).
        fn small(self, ty: u32, data: &[u8]) -> Vec<u8> {
            assert!(data.len() <= 4);
            let mut e = self.u32(((data.len() as u32) << 16) | ty).to_vec();
            e.extend_from_slice(data);
            e.resize(8, 0);
            e
        }

        fn i32s(self, values: &[i32]) -> Vec<u8> {
            values.iter().flat_map(|&v| self.u32(v as u32)).collect()
        }

        fn u16s(self, values: &[u16]) -> Vec<u8> {
            values
                .iter()
                .flat_map(|&v| if self.big { v.to_be_bytes() } else { v.to_le_bytes() })
                .collect()
        }

        /// An miMATRIX element with the given class and flag bits, dimensions, name
        /// and class-specific body.
        fn matrix(self, class: u32, flags: u32, dims: &[i32], name: &str, body: &[u8]) -> Vec<u8> {
            let mut content = self.element(MI_UINT32, &[self.u32(class | flags), [0; 4]].concat());
            content.extend(self.element(MI_INT32, &self.i32s(dims)));
            if name.len() <= 4 && !name.is_empty() {
                content.extend(self.small(MI_INT8, name.as_bytes()));
            } else {
                content.extend(self.element(MI_INT8, name.as_bytes()));
            }
            content.extend_from_slice(body);
            self.element(MI_MATRIX, &content)
        }

        fn compressed(self, element: &[u8]) -> Vec<u8> {
            let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
            z.write_all(element).unwrap();
            let data = z.finish().unwrap();
            // Compressed elements are not padded.
            let mut e = self.u32(MI_COMPRESSED).to_vec();
            e.extend_from_slice(&self.u32(data.len() as u32));
            e.extend(data);
            e
        }

        fn char_utf16(self, name: &str, dims: &[i32], text: &str) -> Vec<u8> {
            let units: Vec<u16> = text.encode_utf16().collect();
            self.matrix(MX_CHAR, 0, dims, name, &self.element(MI_UINT16, &self.u16s(&units)))
        }

        fn file(self, elements: &[Vec<u8>]) -> Vec<u8> {
            let mut f = self.header();
            for e in elements {
                f.extend_from_slice(e);
            }
            f
        }
    }

    fn numeric(value: &MatValue) -> &NumericArray {
        value.as_numeric().unwrap_or_else(|| panic!("not numeric: {value:?}"))
    }

    /// The data elements of `scipy.io.savemat(f, {'x': np.array([[1.5, -2.0]])})`, copied
    /// byte for byte, so that the reader is checked against a real writer and not only
    /// against the test writer below.
    const SCIPY_X: [u8; 72] = [
        0x0e, 0x00, 0x00, 0x00, 0x40, 0x00, 0x00, 0x00, 0x06, 0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x06, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00,
        0x02, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x78, 0x00, 0x00, 0x00, 0x09, 0x00, 0x00, 0x00, 0x10, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xf8, 0x3f, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc0,
    ];

    #[test]
    fn reads_scipy_bytes_with_small_name_element() {
        let file = LE.file(&[SCIPY_X.to_vec()]);
        let vars = read_mat_bytes(&file).unwrap();
        let x = numeric(&vars["x"]);
        assert_eq!(x.class, NumericClass::Double);
        assert_eq!(x.dims, vec![1, 2]);
        assert_eq!(x.real, vec![1.5, -2.0]);
        assert_eq!(x.imag, None);
        // The test writer produces the same bytes, which validates it for the other tests.
        let double_bytes: Vec<u8> = [1.5f64, -2.0].iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(
            LE.matrix(6, 0, &[1, 2], "x", &LE.element(MI_DOUBLE, &double_bytes)),
            SCIPY_X.to_vec()
        );
    }

    #[test]
    fn reads_both_byte_orders() {
        for w in [LE, BE] {
            let doubles: Vec<u8> = [0.25f64, -7.0, 1e300]
                .iter()
                .flat_map(|v| if w.big { v.to_be_bytes() } else { v.to_le_bytes() })
                .collect();
            let int16 = w.element(MI_INT16, &w.u16s(&[(-300i16) as u16, 2, 40]));
            let file = w.file(&[
                w.matrix(6, 0, &[3, 1], "doubles", &w.element(MI_DOUBLE, &doubles)),
                w.matrix(10, 0, &[1, 3], "ints", &int16),
                // A scalar stored MATLAB-style as a small miUINT16 element.
                w.matrix(6, 0, &[1, 1], "s", &w.small(MI_UINT16, &w.u16s(&[513]))),
            ]);
            let vars = read_mat_bytes(&file).unwrap();
            assert_eq!(numeric(&vars["doubles"]).real, vec![0.25, -7.0, 1e300]);
            assert_eq!(numeric(&vars["doubles"]).dims, vec![3, 1]);
            assert_eq!(numeric(&vars["ints"]).real, vec![-300.0, 2.0, 40.0]);
            assert_eq!(numeric(&vars["ints"]).class, NumericClass::Int16);
            assert_eq!(vars["s"].scalar(), Some(513.0));
        }
    }

    #[test]
    fn converts_every_storage_type_to_f64() {
        for w in [LE, BE] {
            let be = w.big;
            let cases: Vec<(u32, Vec<u8>, Vec<f64>)> = vec![
                (MI_INT8, vec![0xff, 0x05], vec![-1.0, 5.0]),
                (MI_UINT8, vec![0xff, 0x05], vec![255.0, 5.0]),
                (MI_INT16, w.u16s(&[0xfffe, 7]), vec![-2.0, 7.0]),
                (MI_UINT16, w.u16s(&[0xfffe, 7]), vec![65534.0, 7.0]),
                (MI_INT32, w.i32s(&[-70000, 3]), vec![-70000.0, 3.0]),
                (MI_UINT32, [w.u32(4_000_000_000), w.u32(3)].concat(), vec![4e9, 3.0]),
                (
                    MI_SINGLE,
                    [0.5f32, -3.0]
                        .iter()
                        .flat_map(|v| if be { v.to_be_bytes() } else { v.to_le_bytes() })
                        .collect(),
                    vec![0.5, -3.0],
                ),
                (
                    MI_INT64,
                    [-5i64, 1 << 40]
                        .iter()
                        .flat_map(|v| if be { v.to_be_bytes() } else { v.to_le_bytes() })
                        .collect(),
                    vec![-5.0, (1u64 << 40) as f64],
                ),
                (
                    MI_UINT64,
                    [9u64, 1 << 50]
                        .iter()
                        .flat_map(|v| if be { v.to_be_bytes() } else { v.to_le_bytes() })
                        .collect(),
                    vec![9.0, (1u64 << 50) as f64],
                ),
            ];
            for (ty, data, want) in cases {
                // MATLAB keeps the class `double` and stores the values in the narrowest
                // type that holds them exactly.
                let file = w.file(&[w.matrix(6, 0, &[1, 2], "v", &w.element(ty, &data))]);
                let vars = read_mat_bytes(&file).unwrap_or_else(|e| panic!("type {ty}: {e}"));
                assert_eq!(numeric(&vars["v"]).real, want, "type {ty}");
            }
        }
    }

    #[test]
    fn reads_complex_and_logical_arrays() {
        let w = LE;
        let complex = w.matrix(
            6,
            FLAG_COMPLEX,
            &[1, 2],
            "z",
            &[w.element(MI_UINT8, &[1, 2]), w.element(MI_INT8, &[0xff, 3])].concat(),
        );
        let logical = w.matrix(9, FLAG_LOGICAL, &[2, 2], "mask", &w.element(MI_UINT8, &[1, 0, 0, 1]));
        let vars = read_mat_bytes(&w.file(&[complex, logical])).unwrap();
        let z = numeric(&vars["z"]);
        assert_eq!(
            (z.real.clone(), z.imag.clone()),
            (vec![1.0, 2.0], Some(vec![-1.0, 3.0]))
        );
        assert_eq!(vars["z"].scalar(), None);
        let mask = numeric(&vars["mask"]);
        assert!(mask.logical);
        assert_eq!(mask.class, NumericClass::UInt8);
        assert_eq!(mask.real, vec![1.0, 0.0, 0.0, 1.0]);
        assert_eq!(vars["mask"].describe(), "2×2 logical array");
    }

    #[test]
    fn reads_character_encodings() {
        for w in [LE, BE] {
            let utf16 = w.matrix(
                MX_CHAR,
                0,
                &[1, 5],
                "a",
                &w.element(MI_UTF16, &w.u16s(&[104, 233, 108, 108, 111])),
            );
            let file = w.file(&[
                w.char_utf16("uint16", &[1, 7], "Büro 42"),
                utf16,
                w.matrix(MX_CHAR, 0, &[1, 5], "utf8", &w.element(MI_UTF8, "héllo".as_bytes())),
                w.matrix(MX_CHAR, 0, &[1, 3], "latin1", &w.element(MI_UINT8, &[0x41, 0xe9, 0x42])),
                // A 2×3 char matrix, column-major: rows "abc" and "xyz".
                w.char_utf16("rows", &[2, 3], "axbycz"),
                w.matrix(MX_CHAR, 0, &[0, 0], "none", &[]),
            ]);
            let vars = read_mat_bytes(&file).unwrap();
            assert_eq!(vars["uint16"].text().as_deref(), Some("Büro 42"));
            assert_eq!(vars["a"].text().as_deref(), Some("héllo"));
            assert_eq!(vars["utf8"].text().as_deref(), Some("héllo"));
            assert_eq!(vars["latin1"].text().as_deref(), Some("AéB"));
            assert_eq!(vars["rows"].text(), None);
            assert_eq!(vars["rows"].as_char().unwrap().rows(), vec!["abc", "xyz"]);
            assert_eq!(vars["none"].text().as_deref(), Some(""));
        }
    }

    /// A 1×2 struct array with fields `name` (char) and `id` (double stored as
    /// miUINT8), and a 1×3 cell array holding a char, an empty miMATRIX and a number.
    fn struct_and_cell(w: W) -> (Vec<u8>, Vec<u8>) {
        let field_length = w.small(MI_INT32, &w.u32(8));
        let field_names = w.element(MI_INT8, b"name\0\0\0\0id\0\0\0\0\0\0");
        let mut body = [field_length, field_names].concat();
        for (name, id) in [("first", 3u8), ("second", 250)] {
            body.extend(w.char_utf16("", &[1, name.len() as i32], name));
            body.extend(w.matrix(6, 0, &[1, 1], "", &w.small(MI_UINT8, &[id])));
        }
        let structure = w.matrix(MX_STRUCT, 0, &[1, 2], "people", &body);
        let items = [
            w.char_utf16("", &[1, 2], "ok"),
            w.element(MI_MATRIX, &[]),
            w.matrix(6, 0, &[1, 1], "", &w.small(MI_INT16, &w.u16s(&[(-4i16) as u16]))),
        ]
        .concat();
        let cell = w.matrix(MX_CELL, 0, &[1, 3], "things", &items);
        (structure, cell)
    }

    fn check_struct_and_cell(vars: &BTreeMap<String, MatValue>) {
        let people = vars["people"].as_struct().unwrap();
        assert_eq!(people.dims, vec![1, 2]);
        assert_eq!(people.len(), 2);
        assert_eq!(people.field_names, vec!["name", "id"]);
        let names: Vec<String> = people.field("name").unwrap().map(|v| v.text().unwrap()).collect();
        assert_eq!(names, vec!["first", "second"]);
        let ids: Vec<f64> = people.field("id").unwrap().map(|v| v.scalar().unwrap()).collect();
        assert_eq!(ids, vec![3.0, 250.0]);
        assert_eq!(
            people.get(1, "name").and_then(MatValue::text).as_deref(),
            Some("second")
        );
        assert!(people.get(2, "name").is_none() && people.field("age").is_none());
        let things = vars["things"].as_cell().unwrap();
        assert_eq!(things.items.len(), 3);
        assert_eq!(things.items[0].text().as_deref(), Some("ok"));
        assert_eq!(things.items[1], MatValue::empty());
        assert!(things.items[1].is_empty());
        assert_eq!(things.items[2].scalar(), Some(-4.0));
        assert_eq!(vars["things"].describe(), "1×3 cell array");
    }

    #[test]
    fn reads_struct_and_cell_arrays() {
        for w in [LE, BE] {
            let (structure, cell) = struct_and_cell(w);
            let vars = read_mat_bytes(&w.file(&[structure, cell])).unwrap();
            check_struct_and_cell(&vars);
        }
    }

    #[test]
    fn reads_compressed_variables_back_to_back() {
        for w in [LE, BE] {
            let (structure, cell) = struct_and_cell(w);
            let file = w.file(&[w.compressed(&structure), w.compressed(&cell)]);
            let vars = read_mat_bytes(&file).unwrap();
            check_struct_and_cell(&vars);
        }
    }

    #[test]
    fn reads_empty_arrays() {
        let w = LE;
        let file = w.file(&[
            w.matrix(6, 0, &[0, 0], "e", &w.element(MI_DOUBLE, &[])),
            w.matrix(6, 0, &[1, 0], "f", &[]),
            w.matrix(MX_CELL, 0, &[0, 0], "c", &[]),
            w.matrix(
                MX_STRUCT,
                0,
                &[0, 1],
                "s",
                &[w.small(MI_INT32, &w.u32(8)), w.element(MI_INT8, b"a\0\0\0\0\0\0\0")].concat(),
            ),
            // A top-level miMATRIX without contents has no name and is skipped.
            w.element(MI_MATRIX, &[]),
        ]);
        let vars = read_mat_bytes(&file).unwrap();
        assert_eq!(vars.len(), 4);
        assert!(vars.values().all(MatValue::is_empty));
        assert_eq!(vars["s"].as_struct().unwrap().field_names, vec!["a"]);
        assert!(read_mat_bytes(&w.header()).unwrap().is_empty());
    }

    fn error_of(bytes: &[u8]) -> String {
        match read_mat_bytes(bytes) {
            Ok(vars) => panic!("expected an error, read {vars:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn every_truncation_is_an_error_not_a_panic() {
        for w in [LE, BE] {
            let (structure, cell) = struct_and_cell(w);
            let file = w.file(&[w.compressed(&structure), cell]);
            let boundary = HEADER_LEN + w.compressed(&structure).len();
            for len in 0..file.len() {
                let result = read_mat_bytes(&file[..len]);
                // A file cut exactly between variables is a valid file with fewer of them.
                if len == HEADER_LEN || len == boundary {
                    assert!(result.is_ok(), "prefix {len}: {result:?}");
                } else {
                    let message = result.expect_err(&format!("prefix {len} must fail")).to_string();
                    assert!(message.contains("at byte"), "prefix {len}: {message}");
                }
            }
        }
    }

    #[test]
    fn corrupted_bytes_never_panic() {
        let (structure, cell) = struct_and_cell(LE);
        let plain = LE.file(&[structure.clone(), cell.clone()]);
        let packed = LE.file(&[LE.compressed(&structure), LE.compressed(&cell)]);
        for file in [plain, packed] {
            for i in HEADER_LEN..file.len() {
                for value in [0x00, 0x01, 0x7f, 0x80, 0xff] {
                    let mut bad = file.clone();
                    bad[i] = value;
                    // Any outcome but a panic is acceptable; errors must carry an offset.
                    if let Err(e) = read_mat_bytes(&bad) {
                        assert!(e.to_string().contains("at byte"), "{e}");
                    }
                }
            }
        }
    }

    #[test]
    fn reports_malformed_and_unsupported_input() {
        let w = LE;
        let e = error_of(b"MATLAB 5.0 MAT-file");
        assert!(e.contains("inside the 128-byte header"), "{e}");
        let mut v4 = w.header();
        v4[126..128].copy_from_slice(b"XX");
        assert!(error_of(&v4).contains("endian indicator"), "{}", error_of(&v4));
        let mut v73 = w.header();
        v73[124..126].copy_from_slice(&0x0200u16.to_le_bytes());
        assert!(error_of(&v73).contains("v7.3"), "{}", error_of(&v73));

        let sparse = w.file(&[w.matrix(MX_SPARSE, 0, &[2, 2], "sp", &[])]);
        let e = error_of(&sparse);
        assert!(e.contains("sparse") && e.contains("at byte 128"), "{e}");
        let e = error_of(&w.file(&[w.matrix(MX_OBJECT, 0, &[1, 1], "o", &[])]));
        assert!(e.contains("objects"), "{e}");

        // A small element cannot hold more than four bytes.
        let mut bad_small = w.file(&[w.matrix(6, 0, &[1, 1], "s", &w.small(MI_UINT8, &[1]))]);
        let tag_at = bad_small.len() - 8;
        bad_small[tag_at..tag_at + 4].copy_from_slice(&w.u32((6 << 16) | MI_UINT8));
        let e = error_of(&bad_small);
        assert!(
            e.contains(&format!("at byte {tag_at}")) && e.contains("at most 4"),
            "{e}"
        );

        let e = error_of(&w.file(&[w.matrix(6, 0, &[1, 3], "n", &w.element(MI_UINT8, &[1, 2]))]));
        assert!(e.contains("holds 2 values") && e.contains("1×3 need 3"), "{e}");
        let e = error_of(&w.file(&[w.matrix(6, 0, &[1, -2], "n", &[])]));
        assert!(e.contains("negative dimension -2"), "{e}");

        // A cell claiming a billion items in a few bytes fails before allocating.
        let e = error_of(&w.file(&[w.matrix(MX_CELL, 0, &[40000, 40000], "c", &[])]));
        assert!(e.contains("needs 1600000000 nested arrays"), "{e}");

        let mut corrupt_zlib = w.file(&[w.compressed(&w.char_utf16("t", &[1, 4], "text"))]);
        for byte in corrupt_zlib.iter_mut().skip(HEADER_LEN + 10) {
            *byte = 0xa5;
        }
        let e = error_of(&corrupt_zlib);
        assert!(
            e.contains("at byte 128") || e.contains("decompressed from the miCOMPRESSED element at byte 128"),
            "{e}"
        );

        let e = error_of(&w.file(&[w.element(MI_DOUBLE, &[0; 8])]));
        assert!(e.contains("unexpected top-level element of type miDOUBLE"), "{e}");

        let twice = w.file(&[w.char_utf16("t", &[1, 1], "a"), w.char_utf16("t", &[1, 1], "b")]);
        assert!(error_of(&twice).contains("defined twice"));
    }

    #[test]
    fn bounds_nesting_depth() {
        let w = LE;
        let mut inner = w.matrix(6, 0, &[1, 1], "", &w.small(MI_UINT8, &[1]));
        for _ in 0..(MAX_DEPTH + 5) {
            inner = w.matrix(MX_CELL, 0, &[1, 1], "", &inner);
        }
        let mut top = w.matrix(MX_CELL, 0, &[1, 1], "deep", &inner);
        let e = error_of(&w.file(&[top.clone()]));
        assert!(e.contains("nest deeper than"), "{e}");
        // A moderately nested value reads fine.
        top = w.matrix(6, 0, &[1, 1], "", &w.small(MI_UINT8, &[9]));
        for _ in 0..10 {
            top = w.matrix(MX_CELL, 0, &[1, 1], "", &top);
        }
        let vars = read_mat_bytes(&w.file(&[w.matrix(MX_CELL, 0, &[1, 1], "ok", &top)])).unwrap();
        let mut value = &vars["ok"];
        while let Some(cell) = value.as_cell() {
            value = &cell.items[0];
        }
        assert_eq!(value.scalar(), Some(9.0));
    }

    #[test]
    fn read_mat_names_the_file() {
        let path = std::env::temp_dir().join(format!("xtask-mat-unit-{}.mat", std::process::id()));
        std::fs::write(&path, b"not a mat file").unwrap();
        let e = read_mat(&path).unwrap_err().to_string();
        assert!(e.contains(&path.display().to_string()) && e.contains("at byte"), "{e}");
        std::fs::remove_file(&path).unwrap();
        let e = read_mat(&path).unwrap_err().to_string();
        assert!(
            e.contains("cannot read") && e.contains(&path.display().to_string()),
            "{e}"
        );
    }
}
