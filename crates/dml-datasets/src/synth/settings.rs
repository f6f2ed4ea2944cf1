//! The checks every rendered set runs on its settings before anything is written.

use crate::error::{DatasetError, Result};

/// Refuses `n` below two images per class (every class needs a positive pair in its split) or
/// beyond `u32::MAX` (image indices go into the keyed generators and file names; the bound keeps a
/// typo from asking for billions of files), and a side outside `sizes`; `size_note`, if not
/// empty, follows the size's range in the message.
pub(crate) fn check_settings(
    n: usize,
    size: u32,
    classes: usize,
    images_per_class: usize,
    sizes: std::ops::RangeInclusive<u32>,
    size_note: &str,
) -> Result<()> {
    let min_n = classes * images_per_class;
    if n < min_n {
        return Err(DatasetError::InvalidSetting {
            setting: "n",
            value: n.to_string(),
            reason: format!(
                "need at least {min_n} images ({images_per_class} per class for each of the {classes} classes), \
                 since every class needs a positive pair in its split"
            ),
        });
    }
    if u32::try_from(n).is_err() {
        return Err(DatasetError::InvalidSetting {
            setting: "n",
            value: n.to_string(),
            reason: format!("too large (at most {})", u32::MAX),
        });
    }
    if !sizes.contains(&size) {
        return Err(DatasetError::InvalidSetting {
            setting: "size",
            value: size.to_string(),
            reason: format!("out of range ({}..={} pixels){size_note}", sizes.start(), sizes.end()),
        });
    }
    Ok(())
}
