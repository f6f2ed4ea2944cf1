//! A grid of maps over their images: rows are images, columns are models (e.g. the saliency of
//! several models on the same test images, Kobs et al., Fig. 4).

use image::imageops::{FilterType, resize};
use image::{Rgb, RgbImage};

use super::error::RenderError;
use super::font::{draw_text, text_height, text_width};
use super::overlay::overlay;

const WHITE: Rgb<u8> = Rgb([255, 255, 255]);
const BLACK: Rgb<u8> = Rgb([0, 0, 0]);

/// One row of a [`map_grid`]: the image and one map per column, each `[h, w]` at the image's
/// size with values in `[0, 1]`.
#[derive(Debug, Clone)]
pub struct GridRow<'a> {
    /// The image.
    pub image: &'a RgbImage,
    /// One map per model column.
    pub maps: Vec<&'a [f32]>,
}

/// Draws `rows` as a grid: the image in the first column, then each map as a jet overlay
/// (`alpha` 0.5) in the columns named by `columns`, every cell enlarged to `cell` pixels (nearest
/// neighbour, so pixels stay visible), labels above the columns at text `scale`.
pub fn map_grid(rows: &[GridRow<'_>], columns: &[String], cell: u32, scale: u32) -> Result<RgbImage, RenderError> {
    if rows.is_empty() || columns.is_empty() {
        return Err(RenderError::Config(
            "a map grid needs at least one row and one column".into(),
        ));
    }
    if let Some((i, r)) = rows.iter().enumerate().find(|(_, r)| r.maps.len() != columns.len()) {
        return Err(RenderError::Config(format!(
            "grid row {i} has {} maps for {} columns",
            r.maps.len(),
            columns.len()
        )));
    }
    let cell = cell.max(16);
    let scale = scale.max(1);
    let gap = 4 * scale;
    let header = text_height(scale) * 2 + 3 * gap;
    let ncols = columns.len() as u32 + 1;
    let width = gap + ncols * (cell + gap);
    let height = header + rows.len() as u32 * (cell + gap);
    let mut img = RgbImage::from_pixel(width, height, WHITE);
    let mut labels = vec!["image".to_string()];
    labels.extend(columns.iter().cloned());
    for (c, label) in labels.iter().enumerate() {
        // Long labels are cut to the cell's width rather than running into the next column.
        let fit: String = label
            .chars()
            .take_while({
                let mut acc = String::new();
                move |ch| {
                    acc.push(*ch);
                    text_width(&acc, scale) <= cell
                }
            })
            .collect();
        let x = gap + c as u32 * (cell + gap) + (cell - text_width(&fit, scale)) / 2;
        draw_text(&mut img, i64::from(x), i64::from(gap), &fit, scale, BLACK);
    }
    for (r, row) in rows.iter().enumerate() {
        let y = header + r as u32 * (cell + gap);
        let (w, h) = row.image.dimensions();
        let mut tiles = vec![row.image.clone()];
        for (c, map) in row.maps.iter().enumerate() {
            let blended = overlay(row.image, map, h as usize, w as usize, 0.5)
                .map_err(|e| RenderError::Config(format!("grid row {r}, column {:?}: {e}", columns[c])))?;
            tiles.push(blended);
        }
        for (c, tile) in tiles.iter().enumerate() {
            let big = resize(tile, cell, cell, FilterType::Nearest);
            let x = gap + c as u32 * (cell + gap);
            image::imageops::replace(&mut img, &big, i64::from(x), i64::from(y));
        }
    }
    Ok(img)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_size_and_errors() {
        let image = RgbImage::from_pixel(8, 8, Rgb([10, 20, 30]));
        let map = vec![0.5f32; 64];
        let rows = vec![
            GridRow {
                image: &image,
                maps: vec![&map, &map],
            };
            3
        ];
        let cols = vec!["margin s0".to_string(), "arcface s1".to_string()];
        let g = map_grid(&rows, &cols, 64, 1).unwrap();
        assert_eq!(g.width(), 4 + 3 * (64 + 4));
        assert_eq!(g.height(), text_height(1) * 2 + 12 + 3 * (64 + 4));
        let bad = vec![GridRow {
            image: &image,
            maps: vec![&map],
        }];
        assert!(
            map_grid(&bad, &cols, 64, 1)
                .unwrap_err()
                .to_string()
                .contains("1 maps for 2 columns")
        );
        let short = vec![0.5f32; 3];
        let wrong = vec![GridRow {
            image: &image,
            maps: vec![&short, &map],
        }];
        assert!(
            map_grid(&wrong, &cols, 64, 1)
                .unwrap_err()
                .to_string()
                .contains("margin s0")
        );
    }
}
