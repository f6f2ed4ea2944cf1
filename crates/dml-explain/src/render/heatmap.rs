//! A labelled matrix as a heat map (e.g. the mean saliency correlation between every pair of
//! models, Kobs et al., Fig. 3).

use image::{Rgb, RgbImage};

use super::colorbar::colorbar;
use super::colormap::colormap;
use super::error::RenderError;
use super::font::{draw_text, text_height, text_width};
use super::range::ValueRange;

const WHITE: Rgb<u8> = Rgb([255, 255, 255]);
const BLACK: Rgb<u8> = Rgb([0, 0, 0]);

/// Draws the `n × n` matrix `values` (row-major) with row and column `labels`, each cell coloured
/// by `range` and printed with its value (2 decimals), and a colour bar at the right. `cell` is the
/// side of a cell in pixels (at least 8), `scale` the text scale.
pub fn matrix_heatmap(
    values: &[f32],
    labels: &[String],
    range: ValueRange,
    cell: u32,
    scale: u32,
) -> Result<RgbImage, RenderError> {
    let n = labels.len();
    if n == 0 || values.len() != n * n {
        return Err(RenderError::Config(format!(
            "a heat map of {n} labels needs {} values, got {}",
            n * n,
            values.len()
        )));
    }
    let cell = cell.max(8);
    let scale = scale.max(1);
    let margin = 8 * scale;
    // Rows carry "index: label", columns only the index, so long names never overlap.
    let row_labels: Vec<String> = labels.iter().enumerate().map(|(i, l)| format!("{i}: {l}")).collect();
    let label_w = row_labels.iter().map(|l| text_width(l, scale)).max().unwrap_or(0);
    let text_h = text_height(scale);
    let grid = cell * n as u32;
    let bar = colorbar(grid, range, scale);
    let top = margin + text_h + margin;
    let left = margin + label_w + margin;
    let width = left + grid + margin + bar.width() + margin;
    let height = top + grid.max(bar.height()) + margin;
    let mut img = RgbImage::from_pixel(width, height, WHITE);
    for j in 0..n {
        let text = j.to_string();
        let x = left + cell * j as u32 + cell.saturating_sub(text_width(&text, scale)) / 2;
        draw_text(&mut img, i64::from(x), i64::from(margin), &text, scale, BLACK);
    }
    for (i, label) in row_labels.iter().enumerate() {
        let y = top + cell * i as u32 + cell.saturating_sub(text_h) / 2;
        draw_text(&mut img, i64::from(margin), i64::from(y), label, scale, BLACK);
        for j in 0..n {
            let v = values[i * n + j];
            let colour = colormap(range.normalise(v));
            let (x0, y0) = (left + cell * j as u32, top + cell * i as u32);
            for y in y0..y0 + cell - 1 {
                for x in x0..x0 + cell - 1 {
                    img.put_pixel(x, y, colour);
                }
            }
            let text = if v.is_finite() { format!("{v:.2}") } else { "-".into() };
            let tw = text_width(&text, scale);
            if tw + 2 <= cell {
                // Black on light cells, white on dark ones, by the cell colour's luminance.
                let [r, g, b] = colour.0;
                let luminance = 0.299 * f32::from(r) + 0.587 * f32::from(g) + 0.114 * f32::from(b);
                let ink = if luminance > 110.0 { BLACK } else { WHITE };
                let tx = x0 + (cell - tw) / 2;
                let ty = y0 + cell.saturating_sub(text_h) / 2;
                draw_text(&mut img, i64::from(tx), i64::from(ty), &text, scale, ink);
            }
        }
    }
    image::imageops::replace(&mut img, &bar, i64::from(left + grid + margin), i64::from(top));
    Ok(img)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_take_the_colour_of_their_value() {
        let labels = vec!["a".to_string(), "b".to_string()];
        let range = ValueRange::new(0.0, 1.0).unwrap();
        let img = matrix_heatmap(&[1.0, 0.0, 0.0, 1.0], &labels, range, 40, 1).unwrap();
        assert!(img.width() > 80 && img.height() > 80);
        assert!(matrix_heatmap(&[1.0], &labels, range, 40, 1).is_err());
        // A corner pixel of each cell (away from its printed value) has the cell's colour.
        let margin = 8;
        let label_w = text_width("0: a", 1);
        let left = margin + label_w + margin;
        let top = margin + text_height(1) + margin;
        assert_eq!(*img.get_pixel(left + 1, top + 1), colormap(1.0));
        assert_eq!(*img.get_pixel(left + 40 + 1, top + 1), colormap(0.0));
    }
}
