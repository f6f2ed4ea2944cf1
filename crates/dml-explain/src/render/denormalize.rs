//! Network inputs back to viewable images.

use image::{Rgb, RgbImage};

use super::error::RenderError;

/// The ImageNet channel means (RGB) that torchvision-style normalisation subtracts.
pub const IMAGENET_MEAN: [f32; 3] = [0.485, 0.456, 0.406];
/// The ImageNet channel standard deviations (RGB) that torchvision-style normalisation divides by.
pub const IMAGENET_STD: [f32; 3] = [0.229, 0.224, 0.225];

/// Undoes `x = (pixel / 255 - mean) / std` for a normalised image `chw` of shape `[3, h, w]`
/// (row-major, channel planes in RGB order): `pixel = round(255 * (x * std + mean))`, clamped
/// to `[0, 255]`. Augmentations that push values outside the original range therefore saturate
/// instead of wrapping, and NaN becomes 0 (black).
///
/// Errors: `chw.len() != 3 * h * w`, a zero side, or a side beyond `u32`.
pub fn denormalize(chw: &[f32], h: usize, w: usize, mean: [f32; 3], std: [f32; 3]) -> Result<RgbImage, RenderError> {
    if chw.len() != 3 * h * w {
        return Err(RenderError::ImageLength { len: chw.len(), h, w });
    }
    if h == 0 || w == 0 {
        return Err(RenderError::EmptyShape {
            what: "normalised image",
            h,
            w,
        });
    }
    let (Ok(height), Ok(width)) = (u32::try_from(h), u32::try_from(w)) else {
        return Err(RenderError::TooLarge {
            what: "normalised image",
            h,
            w,
        });
    };
    let plane = h * w;
    Ok(RgbImage::from_fn(width, height, |x, y| {
        let i = y as usize * w + x as usize;
        // `as u8` saturates and maps NaN to 0, which is exactly the documented clamping.
        Rgb(std::array::from_fn(|c| {
            (255.0 * (chw[c * plane + i] * std[c] + mean[c])).round() as u8
        }))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalisation_round_trips_and_saturates() {
        let pixels = [[0_u8, 128, 255], [10, 20, 30]];
        let mut chw = vec![0.0_f32; 6];
        for (i, p) in pixels.iter().enumerate() {
            for c in 0..3 {
                chw[c * 2 + i] = (f32::from(p[c]) / 255.0 - IMAGENET_MEAN[c]) / IMAGENET_STD[c];
            }
        }
        let image = denormalize(&chw, 1, 2, IMAGENET_MEAN, IMAGENET_STD).unwrap();
        assert_eq!(image.get_pixel(0, 0).0, pixels[0]);
        assert_eq!(image.get_pixel(1, 0).0, pixels[1]);
        let extreme = denormalize(&[100.0, -100.0, f32::NAN], 1, 1, IMAGENET_MEAN, IMAGENET_STD).unwrap();
        assert_eq!(extreme.get_pixel(0, 0).0, [255, 0, 0]);
    }

    #[test]
    fn wrong_length_names_the_shape() {
        let err = denormalize(&[0.0; 11], 2, 2, IMAGENET_MEAN, IMAGENET_STD).unwrap_err();
        assert_eq!(
            err.to_string(),
            "normalised image has 11 values but its shape [3, 2, 2] needs 12"
        );
    }
}
