//! OpenCV's `COLORMAP_JET`, the colormap of pytorch-grad-cam's `show_cam_on_image`.
//!
//! Jet is not perceptually uniform (turbo or viridis would be), but it is what the Grad-CAM
//! literature and pytorch-grad-cam show, so figures made here read like theirs. OpenCV's jet is a
//! 256-entry table (GNU Octave's `jet`); its entries are exactly the piecewise-linear functions
//! below at `x = i / 255`, so evaluating the functions reproduces the table at those points and
//! interpolates linearly between them.

use image::Rgb;

/// The colour of a NaN value: mid grey, which jet itself never produces (jet's colours are
/// saturated), so missing values stand out instead of passing for "low" or "high".
pub const NAN_COLOUR: Rgb<u8> = Rgb([128, 128, 128]);

/// Maps a value in `[0, 1]` to OpenCV's jet colour (RGB order, not OpenCV's BGR).
///
/// `0` is dark blue `(0, 0, 128)`, `0.5` is light green `(128, 255, 128)`, `1` is dark red
/// `(128, 0, 0)`. Values outside `[0, 1]` are clamped (so `-inf` is dark blue and `+inf` dark
/// red); NaN is [`NAN_COLOUR`]. Never panics.
pub fn colormap(value: f32) -> Rgb<u8> {
    if value.is_nan() {
        return NAN_COLOUR;
    }
    let x = value.clamp(0.0, 1.0);
    // Each channel is a trapezoid of slope 4: blue rises first, then green, then red, and each
    // falls a quarter later; the end points are half intensity (0.5 at x = 0 for blue and at
    // x = 1 for red), exactly OpenCV's table.
    let channel = |rise: f32, fall: f32| -> u8 {
        let v = (4.0 * x - rise).min(fall - 4.0 * x).clamp(0.0, 1.0);
        (v * 255.0).round() as u8
    };
    Rgb([channel(1.5, 4.5), channel(0.5, 3.5), channel(-0.5, 2.5)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_opencv_jet() {
        // cv2.applyColorMap(np.array([[0, 255]], np.uint8), cv2.COLORMAP_JET) gives BGR
        // [128, 0, 0] and [0, 0, 128].
        assert_eq!(colormap(0.0), Rgb([0, 0, 128]));
        assert_eq!(colormap(1.0), Rgb([128, 0, 0]));
        // OpenCV's table at i = 96: r = 0.00588 (rounds to 2), b = 0.99412 (rounds to 254).
        assert_eq!(colormap(96.0 / 255.0), Rgb([2, 255, 254]));
    }

    #[test]
    fn red_rises_and_blue_falls_over_the_upper_and_lower_halves() {
        let mut last = colormap(0.375);
        for i in 1..=40 {
            let c = colormap(0.375 + i as f32 * 0.00625);
            assert!(c[0] >= last[0], "red must not fall on [0.375, 0.625]");
            last = c;
        }
        let mut last = colormap(0.375);
        for i in 1..=40 {
            let c = colormap(0.375 + i as f32 * 0.00625);
            assert!(c[2] <= last[2], "blue must not rise on [0.375, 0.625]");
            last = c;
        }
    }

    #[test]
    fn out_of_range_clamps_and_nan_is_grey() {
        assert_eq!(colormap(-3.0), colormap(0.0));
        assert_eq!(colormap(f32::NEG_INFINITY), colormap(0.0));
        assert_eq!(colormap(7.0), colormap(1.0));
        assert_eq!(colormap(f32::INFINITY), colormap(1.0));
        assert_eq!(colormap(f32::NAN), NAN_COLOUR);
    }
}
