//! Image transforms: resize, random-resized-crop, center crop, horizontal flip and
//! ImageNet normalisation, fused into a single resampling pass.
//!
//! Geometric steps are composed into one source region, which is resampled once with a
//! separable triangle (bilinear) filter whose support widens with the downscale factor,
//! as PIL's antialiased bilinear resize does (torchvision's default on PIL images). This
//! avoids intermediate images and the aliasing of naive bilinear sampling when a 500-pixel
//! photograph is reduced to 224 pixels.

use image::RgbImage;
use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::error::DataError;

/// ImageNet channel means (RGB), as used by torchvision's pretrained models.
pub const IMAGENET_MEAN: [f32; 3] = [0.485, 0.456, 0.406];
/// ImageNet channel standard deviations (RGB).
pub const IMAGENET_STD: [f32; 3] = [0.229, 0.224, 0.225];

/// How the (optionally resized) image is cropped to the network's input size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Crop {
    /// No crop: the output has the (resized) image's size.
    None,
    /// A centred `size × size` crop.
    Center {
        /// Output side in pixels.
        size: u32,
    },
    /// torchvision's `RandomResizedCrop`: a random area fraction in `scale` and aspect
    /// ratio (log-uniform) in `ratio`, resized to `size × size`; ten attempts, then a
    /// central crop of the closest valid ratio.
    RandomResized {
        /// Output side in pixels.
        size: u32,
        /// Range of the crop's area as a fraction of the image (torchvision: 0.08–1).
        scale: (f32, f32),
        /// Range of the crop's aspect ratio w/h (torchvision: 3/4–4/3).
        ratio: (f32, f32),
    },
}

/// A transform pipeline's configuration (serialisable into run configs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TransformConfig {
    /// Resize so that the shorter side has this many pixels (before cropping).
    pub resize: Option<u32>,
    /// The crop to the final size.
    pub crop: Crop,
    /// Probability of a horizontal flip.
    pub hflip: f32,
    /// Per-channel mean subtracted after scaling pixels to [0, 1].
    pub mean: [f32; 3],
    /// Per-channel standard deviation divided by after subtracting the mean.
    pub std: [f32; 3],
}

impl TransformConfig {
    /// The papers' training augmentation: random-resized-crop to `size`, flip with
    /// probability 0.5, ImageNet normalisation.
    pub fn train(size: u32) -> Self {
        Self {
            resize: None,
            crop: Crop::RandomResized {
                size,
                scale: (0.08, 1.0),
                ratio: (3.0 / 4.0, 4.0 / 3.0),
            },
            hflip: 0.5,
            mean: IMAGENET_MEAN,
            std: IMAGENET_STD,
        }
    }

    /// The papers' evaluation transform: resize the shorter side to `size·256/224`, crop
    /// the centre `size × size`, ImageNet normalisation (256 → 224 for `size` = 224).
    pub fn eval(size: u32) -> Self {
        Self {
            resize: Some(((size as f32) * 256.0 / 224.0).round() as u32),
            crop: Crop::Center { size },
            hflip: 0.0,
            mean: IMAGENET_MEAN,
            std: IMAGENET_STD,
        }
    }

    /// No geometric change, no flip; only ImageNet normalisation (small images such as
    /// Fashion-MNIST that are used at their native size).
    pub fn identity() -> Self {
        Self {
            resize: None,
            crop: Crop::None,
            hflip: 0.0,
            mean: IMAGENET_MEAN,
            std: IMAGENET_STD,
        }
    }
}

/// A validated transform pipeline.
#[derive(Debug, Clone)]
pub struct Pipeline {
    config: TransformConfig,
}

/// A rectangle in source-pixel coordinates (continuous, `x0 + w ≤ width`).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Region {
    x0: f32,
    y0: f32,
    w: f32,
    h: f32,
}

impl Pipeline {
    /// Validates the configuration (positive sizes, ordered ranges, positive std).
    pub fn new(config: TransformConfig) -> Result<Self, DataError> {
        let bad = |m: String| Err(DataError::Config(m));
        if config.resize == Some(0) {
            return bad("resize must be positive".into());
        }
        match config.crop {
            Crop::Center { size: 0 } | Crop::RandomResized { size: 0, .. } => {
                return bad("crop size must be positive".into());
            }
            Crop::RandomResized { scale, ratio, .. } => {
                if !(scale.0 > 0.0 && scale.0 <= scale.1 && scale.1 <= 1.0) {
                    return bad(format!(
                        "random-resized-crop scale {scale:?} must satisfy 0 < lo <= hi <= 1"
                    ));
                }
                if !(ratio.0 > 0.0 && ratio.0 <= ratio.1) {
                    return bad(format!("random-resized-crop ratio {ratio:?} must satisfy 0 < lo <= hi"));
                }
            }
            _ => {}
        }
        if !(0.0..=1.0).contains(&config.hflip) {
            return bad(format!("flip probability {} is not in [0, 1]", config.hflip));
        }
        if config.std.iter().any(|&s| s <= 0.0 || !s.is_finite()) {
            return bad(format!("normalisation std {:?} must be positive", config.std));
        }
        Ok(Self { config })
    }

    /// The configuration this pipeline was built from.
    pub fn config(&self) -> &TransformConfig {
        &self.config
    }

    /// The output `(height, width)` for a source of `width × height`.
    pub fn output_size(&self, width: u32, height: u32) -> (u32, u32) {
        match self.config.crop {
            Crop::Center { size } | Crop::RandomResized { size, .. } => (size, size),
            Crop::None => {
                let (w, h) = self.resized(width, height);
                (h.round() as u32, w.round() as u32)
            }
        }
    }

    /// The image size after the optional shorter-side resize, as floats.
    fn resized(&self, width: u32, height: u32) -> (f32, f32) {
        match self.config.resize {
            None => (width as f32, height as f32),
            Some(r) => {
                let s = r as f32 / width.min(height) as f32;
                (width as f32 * s, height as f32 * s)
            }
        }
    }

    /// Applies the pipeline to `image`, drawing random choices from `rng`, and returns
    /// the normalised image as a row-major `[3, H, W]` buffer with `(H, W)` from
    /// [`Pipeline::output_size`].
    pub fn apply(&self, image: &RgbImage, rng: &mut impl Rng) -> Vec<f32> {
        let (width, height) = image.dimensions();
        let (out_h, out_w) = self.output_size(width, height);
        let (rw, rh) = self.resized(width, height);
        // The region is chosen in resized coordinates and mapped back to the source, so
        // that resize + crop is a single resampling.
        let to_src = width as f32 / rw;
        let region = match self.config.crop {
            Crop::None => Region {
                x0: 0.0,
                y0: 0.0,
                w: rw,
                h: rh,
            },
            Crop::Center { size } => {
                let s = size as f32;
                Region {
                    x0: (rw - s) / 2.0,
                    y0: (rh - s) / 2.0,
                    w: s,
                    h: s,
                }
            }
            Crop::RandomResized { scale, ratio, .. } => random_resized_region(rw, rh, scale, ratio, rng),
        };
        let region = Region {
            x0: region.x0 * to_src,
            y0: region.y0 * to_src,
            w: region.w * to_src,
            h: region.h * to_src,
        };
        let flip = self.config.hflip > 0.0 && rng.random::<f32>() < self.config.hflip;
        let hwc = resample(image, region, out_w as usize, out_h as usize);
        to_chw_normalised(
            &hwc,
            out_w as usize,
            out_h as usize,
            flip,
            &self.config.mean,
            &self.config.std,
        )
    }
}

/// torchvision's `RandomResizedCrop.get_params`, in (resized) image coordinates.
fn random_resized_region(width: f32, height: f32, scale: (f32, f32), ratio: (f32, f32), rng: &mut impl Rng) -> Region {
    let area = width * height;
    let (log_lo, log_hi) = (ratio.0.ln(), ratio.1.ln());
    for _ in 0..10 {
        let target = area * rng.random_range(scale.0..=scale.1);
        let aspect = rng.random_range(log_lo..=log_hi).exp();
        let w = (target * aspect).sqrt().round();
        let h = (target / aspect).sqrt().round();
        if w > 0.0 && h > 0.0 && w <= width && h <= height {
            let x0 = rng.random_range(0..=(width - w) as u32) as f32;
            let y0 = rng.random_range(0..=(height - h) as u32) as f32;
            return Region { x0, y0, w, h };
        }
    }
    // Fallback: a central crop whose aspect ratio is clamped into the allowed range.
    let in_ratio = width / height;
    let (w, h) = if in_ratio < ratio.0 {
        (width, (width / ratio.0).round())
    } else if in_ratio > ratio.1 {
        ((height * ratio.1).round(), height)
    } else {
        (width, height)
    };
    Region {
        x0: (width - w) / 2.0,
        y0: (height - h) / 2.0,
        w,
        h,
    }
}

/// Filter taps of a 1-D antialiased triangle resampling from `region` (start, length)
/// of a source axis of `src_len` pixels onto `out_len` pixels: for each output pixel the
/// first source index and the normalised weights.
fn taps(start: f32, length: f32, src_len: usize, out_len: usize) -> Vec<(usize, Vec<f32>)> {
    let scale = length / out_len as f32;
    // Downscaling widens the filter so that every source pixel contributes (antialias);
    // upscaling keeps the plain bilinear support of one pixel.
    let support = scale.max(1.0);
    (0..out_len)
        .map(|i| {
            let center = start + (i as f32 + 0.5) * scale;
            let lo = ((center - support).floor().max(0.0)) as usize;
            let hi = ((center + support).ceil() as usize).min(src_len);
            let mut weights: Vec<f32> = (lo..hi)
                .map(|j| {
                    let d = (j as f32 + 0.5 - center) / support;
                    (1.0 - d.abs()).max(0.0)
                })
                .collect();
            let sum: f32 = weights.iter().sum();
            if sum > 0.0 {
                weights.iter_mut().for_each(|w| *w /= sum);
                (lo, weights)
            } else {
                // The region lies entirely outside the image (degenerate crop): take the
                // nearest edge pixel instead of producing NaN.
                let j = (center.max(0.0) as usize).min(src_len - 1);
                (j, vec![1.0])
            }
        })
        .collect()
}

/// Resamples `region` of `image` to `out_w × out_h`, returning row-major HWC floats in
/// [0, 255].
fn resample(image: &RgbImage, region: Region, out_w: usize, out_h: usize) -> Vec<f32> {
    let (w, h) = (image.width() as usize, image.height() as usize);
    let src = image.as_raw();
    let xt = taps(region.x0, region.w, w, out_w);
    let yt = taps(region.y0, region.h, h, out_h);
    // Only the source rows that some output row touches are filtered horizontally.
    let row_lo = yt.iter().map(|t| t.0).min().unwrap_or(0);
    let row_hi = yt.iter().map(|t| t.0 + t.1.len()).max().unwrap_or(0);
    let mut horizontal = vec![0f32; (row_hi - row_lo) * out_w * 3];
    for y in row_lo..row_hi {
        let src_row = &src[y * w * 3..(y + 1) * w * 3];
        let dst_row = &mut horizontal[(y - row_lo) * out_w * 3..(y - row_lo + 1) * out_w * 3];
        for (x, (start, weights)) in xt.iter().enumerate() {
            let mut acc = [0f32; 3];
            for (k, &wt) in weights.iter().enumerate() {
                let p = &src_row[(start + k) * 3..(start + k) * 3 + 3];
                acc[0] += wt * p[0] as f32;
                acc[1] += wt * p[1] as f32;
                acc[2] += wt * p[2] as f32;
            }
            dst_row[x * 3..x * 3 + 3].copy_from_slice(&acc);
        }
    }
    let mut out = vec![0f32; out_h * out_w * 3];
    for (y, (start, weights)) in yt.iter().enumerate() {
        let dst = &mut out[y * out_w * 3..(y + 1) * out_w * 3];
        for (k, &wt) in weights.iter().enumerate() {
            let r = start + k - row_lo;
            let src_row = &horizontal[r * out_w * 3..(r + 1) * out_w * 3];
            dst.iter_mut().zip(src_row).for_each(|(d, s)| *d += wt * s);
        }
    }
    out
}

/// HWC [0, 255] → CHW normalised, optionally mirrored horizontally.
fn to_chw_normalised(hwc: &[f32], w: usize, h: usize, flip: bool, mean: &[f32; 3], std: &[f32; 3]) -> Vec<f32> {
    let mut out = vec![0f32; 3 * h * w];
    for c in 0..3 {
        let scale = 1.0 / (255.0 * std[c]);
        let shift = mean[c] / std[c];
        let plane = &mut out[c * h * w..(c + 1) * h * w];
        for y in 0..h {
            for x in 0..w {
                let sx = if flip { w - 1 - x } else { x };
                plane[y * w + x] = hwc[(y * w + sx) * 3 + c] * scale - shift;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn gradient(w: u32, h: u32) -> RgbImage {
        RgbImage::from_fn(w, h, |x, y| {
            image::Rgb([(x * 255 / (w - 1)) as u8, (y * 255 / (h - 1)) as u8, 77])
        })
    }

    fn plain(crop: Crop, resize: Option<u32>) -> Pipeline {
        Pipeline::new(TransformConfig {
            resize,
            crop,
            hflip: 0.0,
            mean: [0.0; 3],
            std: [1.0 / 255.0; 3],
        })
        .unwrap()
    }

    #[test]
    fn identity_reproduces_pixels_and_normalises() {
        let img = gradient(7, 5);
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let out = plain(Crop::None, None).apply(&img, &mut rng);
        assert_eq!(out.len(), 3 * 5 * 7);
        for y in 0..5 {
            for x in 0..7 {
                let p = img.get_pixel(x, y);
                for c in 0..3 {
                    let got = out[c * 35 + (y * 7 + x) as usize];
                    assert!((got - p[c] as f32).abs() < 1e-3, "({x},{y},{c}): {got} vs {}", p[c]);
                }
            }
        }
        // ImageNet normalisation: (v/255 - mean)/std.
        let p = Pipeline::new(TransformConfig::identity()).unwrap();
        let out = p.apply(&img, &mut rng);
        let want = (img.get_pixel(3, 2)[1] as f32 / 255.0 - IMAGENET_MEAN[1]) / IMAGENET_STD[1];
        assert!((out[35 + 2 * 7 + 3] - want).abs() < 1e-5);
    }

    #[test]
    fn center_crop_takes_the_middle() {
        let img = gradient(10, 8);
        let out = plain(Crop::Center { size: 4 }, None).apply(&img, &mut ChaCha8Rng::seed_from_u64(0));
        // Output pixel (0,0) is source pixel (3,2).
        let p = img.get_pixel(3, 2);
        assert!((out[0] - p[0] as f32).abs() < 1e-3 && (out[16] - p[1] as f32).abs() < 1e-3);
    }

    #[test]
    fn resize_halves_by_averaging_pairs() {
        // A 2x downscale with the antialiased triangle filter averages neighbourhoods:
        // on a linear ramp the result equals the ramp at the output pixel centres.
        let img = RgbImage::from_fn(16, 16, |x, _| image::Rgb([(x * 10) as u8, 0, 0]));
        let out = plain(Crop::None, Some(8)).apply(&img, &mut ChaCha8Rng::seed_from_u64(0));
        assert_eq!(out.len(), 3 * 8 * 8);
        for x in 1..7 {
            let want = (2 * x) as f32 * 10.0 + 5.0;
            assert!(
                (out[3 * 8 + x] - want).abs() < 1e-3,
                "x={x}: {} vs {want}",
                out[3 * 8 + x]
            );
        }
    }

    #[test]
    fn flip_mirrors_rows() {
        let img = gradient(6, 4);
        let cfg = |hflip| TransformConfig {
            resize: None,
            crop: Crop::None,
            hflip,
            mean: [0.0; 3],
            std: [1.0; 3],
        };
        let straight = Pipeline::new(cfg(0.0))
            .unwrap()
            .apply(&img, &mut ChaCha8Rng::seed_from_u64(0));
        let flipped = Pipeline::new(cfg(1.0))
            .unwrap()
            .apply(&img, &mut ChaCha8Rng::seed_from_u64(0));
        for y in 0..4 {
            for x in 0..6 {
                assert_eq!(straight[y * 6 + x], flipped[y * 6 + 5 - x]);
            }
        }
    }

    #[test]
    fn random_resized_crop_respects_ranges_and_seed() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for _ in 0..500 {
            let r = random_resized_region(500.0, 375.0, (0.08, 1.0), (0.75, 4.0 / 3.0), &mut rng);
            assert!(
                r.x0 >= 0.0 && r.y0 >= 0.0 && r.x0 + r.w <= 500.0 && r.y0 + r.h <= 375.0,
                "{r:?}"
            );
            let frac = r.w * r.h / (500.0 * 375.0);
            assert!((0.07..=1.0).contains(&frac), "{frac}");
        }
        let p = Pipeline::new(TransformConfig::train(32)).unwrap();
        let img = gradient(50, 40);
        let a = p.apply(&img, &mut ChaCha8Rng::seed_from_u64(9));
        let b = p.apply(&img, &mut ChaCha8Rng::seed_from_u64(9));
        let c = p.apply(&img, &mut ChaCha8Rng::seed_from_u64(10));
        assert_eq!(a.len(), 3 * 32 * 32);
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(a.iter().all(|v| v.is_finite()));
    }

    #[test]
    fn eval_preset_resizes_then_crops() {
        let p = Pipeline::new(TransformConfig::eval(224)).unwrap();
        assert_eq!(p.output_size(500, 375), (224, 224));
        assert_eq!(p.config().resize, Some(256));
        assert!(
            Pipeline::new(TransformConfig {
                hflip: 2.0,
                ..TransformConfig::identity()
            })
            .is_err()
        );
    }
}
