//! Object masks given as booleans or as bytes.

/// An element of an object mask: `bool` (`true` is object) or `u8` (`> 0` is object, so both
/// 0/1 and 0/255 masks work).
pub trait MaskValue: Copy {
    /// Whether this pixel belongs to the object.
    fn is_object(self) -> bool;
}

impl MaskValue for bool {
    fn is_object(self) -> bool {
        self
    }
}

impl MaskValue for u8 {
    fn is_object(self) -> bool {
        self > 0
    }
}

/// Checks a mask's length against `[h, w]` and that it marks at least one object pixel.
pub(super) fn check_mask<M: MaskValue>(mask: &[M], h: usize, w: usize) -> Result<(), super::FaithError> {
    super::error::check_len("mask", mask.len(), 1, h, w)?;
    if mask.iter().any(|m| m.is_object()) {
        Ok(())
    } else {
        Err(super::FaithError::EmptyMask { h, w })
    }
}
