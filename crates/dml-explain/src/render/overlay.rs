//! A heat map blended over the image it explains.

use image::{Rgb, RgbImage};

use super::colormap::colormap;
use super::error::RenderError;
use super::resample::resize_bilinear;

/// Blends `jet(map)` over `image`: every pixel becomes `(1 - alpha) * image + alpha * jet(m)`,
/// rounded to `u8`.
///
/// `map` is row-major of shape `[map_h, map_w]` with values already on the colour scale
/// (`[0, 1]`; outside is clamped, NaN is the colormap's NaN colour; see
/// [`super::ValueRange::normalise_all`]). A map of another size than the image (e.g. a 7x7
/// Grad-CAM over a 224x224 input) is first resampled bilinearly to `[image.height(),
/// image.width()]`; resampling the values rather than the colours keeps the colours on the
/// colormap. pytorch-grad-cam's `show_cam_on_image` is this blend with `alpha = 0.5`.
///
/// Errors: `map.len() != map_h * map_w`, an empty map or image, `alpha` outside `[0, 1]`.
pub fn overlay(image: &RgbImage, map: &[f32], map_h: usize, map_w: usize, alpha: f32) -> Result<RgbImage, RenderError> {
    if !(0.0..=1.0).contains(&alpha) {
        return Err(RenderError::Alpha(alpha));
    }
    let (w, h) = image.dimensions();
    if w == 0 || h == 0 {
        return Err(RenderError::EmptyShape {
            what: "image",
            h: h as usize,
            w: w as usize,
        });
    }
    let map = resize_bilinear(map, map_h, map_w, h as usize, w as usize)?;
    let mut out = RgbImage::new(w, h);
    for ((pixel, source), &value) in out.pixels_mut().zip(image.pixels()).zip(&map) {
        let heat = colormap(value);
        *pixel = Rgb(std::array::from_fn(|c| {
            ((1.0 - alpha) * f32::from(source[c]) + alpha * f32::from(heat[c])).round() as u8
        }));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gradient(w: u32, h: u32) -> RgbImage {
        RgbImage::from_fn(w, h, |x, y| Rgb([(x * 40) as u8, (y * 50) as u8, 200]))
    }

    #[test]
    fn alpha_zero_is_the_image_and_alpha_one_is_the_colormap() {
        let image = gradient(5, 4);
        let map: Vec<f32> = (0..20).map(|i| i as f32 / 19.0).collect();
        assert_eq!(overlay(&image, &map, 4, 5, 0.0).unwrap(), image);
        let full = overlay(&image, &map, 4, 5, 1.0).unwrap();
        for (i, p) in full.pixels().enumerate() {
            assert_eq!(*p, colormap(map[i]));
        }
    }

    #[test]
    fn half_alpha_averages_and_small_maps_are_resampled() {
        let image = RgbImage::from_pixel(4, 4, Rgb([0, 0, 0]));
        // A constant 2x2 map resamples to the same constant at 4x4.
        let out = overlay(&image, &[1.0; 4], 2, 2, 0.5).unwrap();
        assert!(out.pixels().all(|p| *p == Rgb([64, 0, 0])));
    }

    #[test]
    fn bad_inputs_are_errors_naming_shapes() {
        let image = gradient(5, 4);
        let err = overlay(&image, &[0.0; 19], 4, 5, 0.5).unwrap_err();
        assert_eq!(err.to_string(), "map has 19 values but its shape [4, 5] needs 20");
        assert!(matches!(
            overlay(&image, &[0.0; 20], 4, 5, 1.5),
            Err(RenderError::Alpha(_))
        ));
        assert!(overlay(&image, &[0.0; 20], 4, 5, f32::NAN).is_err());
        assert!(overlay(&RgbImage::new(0, 3), &[0.0; 4], 2, 2, 0.5).is_err());
    }
}
