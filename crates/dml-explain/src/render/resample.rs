//! Bilinear resampling of a map to another resolution (feature-map cells to image pixels).

use super::error::RenderError;

/// Resamples a row-major map of shape `[h, w]` to `[out_h, out_w]` bilinearly; returns
/// `out_h * out_w` values, row-major.
///
/// Pixel centres are aligned (`align_corners = false`, the convention of OpenCV's
/// `cv2.resize(..., INTER_LINEAR)` that pytorch-grad-cam uses to upsample CAMs): output pixel
/// `y` samples source row `(y + 0.5) * h / out_h - 0.5`, clamped to the border. NaN values
/// propagate into every output pixel that mixes them, so missing values stay visible.
/// Errors: `map.len() != h * w`, or a zero side in either shape.
pub fn resize_bilinear(map: &[f32], h: usize, w: usize, out_h: usize, out_w: usize) -> Result<Vec<f32>, RenderError> {
    if map.len() != h * w {
        return Err(RenderError::MapLength { len: map.len(), h, w });
    }
    if h == 0 || w == 0 {
        return Err(RenderError::EmptyShape { what: "map", h, w });
    }
    if out_h == 0 || out_w == 0 {
        return Err(RenderError::EmptyShape {
            what: "resampled map",
            h: out_h,
            w: out_w,
        });
    }
    if (h, w) == (out_h, out_w) {
        return Ok(map.to_vec());
    }
    // For each output coordinate along one axis: the two source indices and the weight of the
    // second; computed once per axis instead of once per pixel.
    let taps = |n_in: usize, n_out: usize| -> Vec<(usize, usize, f32)> {
        let scale = n_in as f64 / n_out as f64;
        (0..n_out)
            .map(|o| {
                let s = ((o as f64 + 0.5) * scale - 0.5).clamp(0.0, (n_in - 1) as f64);
                let i0 = s.floor() as usize;
                let i1 = (i0 + 1).min(n_in - 1);
                (i0, i1, (s - i0 as f64) as f32)
            })
            .collect()
    };
    let rows = taps(h, out_h);
    let cols = taps(w, out_w);
    let mut out = Vec::with_capacity(out_h * out_w);
    for &(y0, y1, fy) in &rows {
        for &(x0, x1, fx) in &cols {
            let top = lerp(map[y0 * w + x0], map[y0 * w + x1], fx);
            let bottom = lerp(map[y1 * w + x0], map[y1 * w + x1], fx);
            out.push(lerp(top, bottom, fy));
        }
    }
    Ok(out)
}

/// `a + t * (b - a)` written as a weighted sum, so that `t = 0` returns `a` exactly even when
/// `b` is infinite.
fn lerp(a: f32, b: f32, t: f32) -> f32 {
    if t == 0.0 { a } else { (1.0 - t) * a + t * b }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upsampling_two_by_two_matches_opencv() {
        // cv2.resize(np.array([[0, 1], [2, 3]], np.float32), (4, 4)) gives rows
        // [0, .25, .75, 1], [.5, .75, 1.25, 1.5], [1.5, 1.75, 2.25, 2.5], [2, 2.25, 2.75, 3].
        let out = resize_bilinear(&[0.0, 1.0, 2.0, 3.0], 2, 2, 4, 4).unwrap();
        let expected = [
            0.0, 0.25, 0.75, 1.0, 0.5, 0.75, 1.25, 1.5, 1.5, 1.75, 2.25, 2.5, 2.0, 2.25, 2.75, 3.0,
        ];
        for (a, b) in out.iter().zip(expected) {
            assert!((a - b).abs() < 1e-6, "{out:?}");
        }
    }

    #[test]
    fn same_size_is_a_copy_and_bad_shapes_are_errors() {
        let m = [1.0, 2.0, 3.0];
        assert_eq!(resize_bilinear(&m, 1, 3, 1, 3).unwrap(), m.to_vec());
        let err = resize_bilinear(&m, 2, 2, 4, 4).unwrap_err();
        assert_eq!(err.to_string(), "map has 3 values but its shape [2, 2] needs 4");
        assert!(resize_bilinear(&[], 0, 3, 4, 4).is_err());
        assert!(resize_bilinear(&m, 1, 3, 0, 4).is_err());
    }
}
