//! The benchmark's figure, one block per run: a grid of example queries (each explained against its
//! positive and its negative partner) with every method's and baseline's map, and under it the
//! table's headline numbers per method, so that what the maps look like and how they score are
//! read together.

use std::collections::BTreeMap;

use dml_explain::render::{GridRow, RenderError, draw_text, map_grid, text_height, text_width};
use image::{Rgb, RgbImage};

use super::scores::min_max;
use super::summary::Table;

const WHITE: Rgb<u8> = Rgb([255, 255, 255]);
const BLACK: Rgb<u8> = Rgb([0, 0, 0]);

/// One example row: the query as shown, what it is explained against, and every column's map
/// `[H, W]` (any scale; each is min-max normalised for display).
pub(super) struct ExampleRow {
    /// The query image.
    pub image: RgbImage,
    /// `vs positive` or `vs negative`.
    pub label: String,
    /// One map per column.
    pub maps: Vec<Vec<f32>>,
}

/// The headline metrics printed under the grid, with their table names.
const HEADLINES: [(&str, &str); 6] = [
    ("mass", "mass"),
    ("auc", "auc"),
    ("road", "road"),
    ("part_rho", "part"),
    ("partner_spearman", "partner"),
    ("sparseness", "gini"),
];

/// One run's block: a title, the grid of `rows` over `columns`, then one line per column with its
/// headline means (and its randomisation Spearman at the last cascade step, `last_step`).
pub(super) fn run_block(
    title: &str,
    columns: &[String],
    rows: &[ExampleRow],
    table: &Table,
    last_step: &BTreeMap<String, Option<f64>>,
) -> Result<RgbImage, RenderError> {
    let normalised: Vec<Vec<Vec<f32>>> = rows
        .iter()
        .map(|r| r.maps.iter().map(|m| min_max(m, 0.5)).collect())
        .collect();
    let grid_rows: Vec<GridRow> = rows
        .iter()
        .zip(&normalised)
        .map(|(r, maps)| GridRow {
            image: &r.image,
            maps: maps.iter().map(Vec::as_slice).collect(),
        })
        .collect();
    // Column heads must fit a cell: `attention_stage4` is shown as `att stage4`.
    let heads: Vec<String> = columns.iter().map(|c| c.replace("attention_", "att ")).collect();
    let grid = map_grid(&grid_rows, &heads, 80, 1)?;
    let line_h = text_height(1) + 4;
    let mut lines = vec![title.to_string()];
    lines.extend(
        rows.iter()
            .enumerate()
            .map(|(i, r)| format!("row {}: query {}", i + 1, r.label)),
    );
    lines.push("part: part-level faithfulness (Spearman); partner: Spearman of the maps against".into());
    lines.push("the positive and the negative; rand rho: Spearman with the trained map, all weights fresh".into());
    let mut header = format!("{:<18}", "mean over pairs");
    for (_, short) in HEADLINES {
        header.push_str(&format!("{short:>9}"));
    }
    header.push_str(&format!("{:>10}", "rand rho"));
    lines.push(header);
    for c in columns {
        let mut line = format!("{c:<18}");
        for (metric, _) in HEADLINES {
            let v = table.get(c).and_then(|r| r.get(metric)).and_then(|cell| cell.mean);
            line.push_str(&format!("{:>9}", v.map_or("n/a".into(), |v| format!("{v:.3}"))));
        }
        let r = last_step.get(c).copied().flatten();
        line.push_str(&format!("{:>10}", r.map_or("n/a".into(), |v| format!("{v:.3}"))));
        lines.push(line);
    }
    let text_w = lines.iter().map(|l| text_width(l, 1)).max().unwrap_or(0) + 16;
    let width = grid.width().max(text_w);
    let height = grid.height() + 8 + line_h * lines.len() as u32 + 8;
    let mut img = RgbImage::from_pixel(width, height, WHITE);
    image::imageops::replace(&mut img, &grid, 0, 0);
    for (i, line) in lines.iter().enumerate() {
        let y = grid.height() + 8 + i as u32 * line_h;
        draw_text(&mut img, 8, i64::from(y), line, 1, BLACK);
    }
    Ok(img)
}

/// `blocks` one under the other, separated by a gap.
pub(super) fn stack(blocks: &[RgbImage]) -> RgbImage {
    let width = blocks.iter().map(RgbImage::width).max().unwrap_or(1);
    let height = blocks.iter().map(|b| b.height() + 16).sum::<u32>().max(1);
    let mut img = RgbImage::from_pixel(width, height, WHITE);
    let mut y = 0;
    for b in blocks {
        image::imageops::replace(&mut img, b, 0, i64::from(y));
        y += b.height() + 16;
    }
    img
}
