//! A figure of transport flows between two images (DIML's Figure 5): both images side by side with
//! their location grids, and one line per location pair from the centre of its source cell to the
//! centre of its target cell, coloured and thickened by its value, with a colour bar.

use image::{Rgb, RgbImage, imageops};

use super::colorbar::{colorbar, colorbar_padding};
use super::colormap::colormap;
use super::error::RenderError;
use super::font::{draw_text, text_height, text_width};
use super::range::ValueRange;

const WHITE: Rgb<u8> = Rgb([255, 255, 255]);
const BLACK: Rgb<u8> = Rgb([0, 0, 0]);
const GRID: Rgb<u8> = Rgb([255, 255, 255]);

/// One line of a [`flow_figure`]: a location pair and the value its colour and width show.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FlowLine {
    /// `[row, column]` of the source cell in the left image's grid.
    pub source_cell: [usize; 2],
    /// `[row, column]` of the target cell in the right image's grid.
    pub target_cell: [usize; 2],
    /// The value shown (e.g. the contribution `T*_ij S_ij` to the structural similarity).
    pub value: f32,
}

/// How a [`flow_figure`] is drawn; [`Default`] gives a figure readable at 100 % zoom.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FlowStyle {
    /// Images are enlarged by the smallest integer factor (nearest neighbour) that makes them at
    /// least this many pixels tall.
    pub min_image_height: u32,
    /// Space between the two images (the lines cross it), in pixels.
    pub gap: u32,
    /// White border around the figure and space before the colour bar, in pixels.
    pub margin: u32,
    /// Scale of the bitmap font for captions and tick labels.
    pub text_scale: u32,
    /// Width in pixels of the line with the largest value (the smallest value gets 1).
    pub max_line_width: u32,
}

impl Default for FlowStyle {
    fn default() -> Self {
        Self {
            min_image_height: 200,
            gap: 64,
            margin: 12,
            text_scale: 2,
            max_line_width: 5,
        }
    }
}

/// Draws `left` and `right` side by side (each enlarged as [`FlowStyle::min_image_height`] says,
/// captioned above), the `left_grid` / `right_grid` cell borders (`[rows, columns]`) in white over
/// them, and one line per flow from the centre of its source cell on the left to the centre of its
/// target cell on the right, coloured by `jet` of its value on the range of all values and from 1
/// to [`FlowStyle::max_line_width`] pixels wide; weaker lines are drawn first so the strongest stay
/// visible. A colour bar of the values stands at the right.
///
/// Errors: an empty image or grid, a grid with more cells than its image has pixels, a flow whose
/// cell lies outside its grid (named by its index).
pub fn flow_figure(
    left: &RgbImage,
    right: &RgbImage,
    left_grid: [usize; 2],
    right_grid: [usize; 2],
    flows: &[FlowLine],
    captions: [&str; 2],
    style: &FlowStyle,
) -> Result<RgbImage, RenderError> {
    for (what, image, grid) in [("left image", left, left_grid), ("right image", right, right_grid)] {
        let (w, h) = image.dimensions();
        if w == 0 || h == 0 {
            return Err(RenderError::EmptyShape {
                what,
                h: h as usize,
                w: w as usize,
            });
        }
        if grid[0] == 0 || grid[1] == 0 || grid[0] > h as usize || grid[1] > w as usize {
            return Err(RenderError::Config(format!(
                "{what}: grid {grid:?} does not fit an image of {h}x{w} pixels"
            )));
        }
    }
    for (index, flow) in flows.iter().enumerate() {
        let inside = |cell: [usize; 2], grid: [usize; 2]| cell[0] < grid[0] && cell[1] < grid[1];
        if !inside(flow.source_cell, left_grid) || !inside(flow.target_cell, right_grid) {
            return Err(RenderError::Config(format!(
                "flow {index}: cells {:?} -> {:?} lie outside the grids {left_grid:?} and {right_grid:?}",
                flow.source_cell, flow.target_cell
            )));
        }
    }
    let scale = style.text_scale.max(1);
    let enlarge = |image: &RgbImage| {
        let factor = style.min_image_height.div_ceil(image.height()).max(1);
        let (w, h) = image.dimensions();
        RgbImage::from_fn(w * factor, h * factor, |x, y| *image.get_pixel(x / factor, y / factor))
    };
    let (shown_left, shown_right) = (enlarge(left), enlarge(right));
    let row_height = shown_left.height().max(shown_right.height());
    let caption_h = text_height(scale);
    let images_top = style.margin + caption_h + style.gap / 4;
    let right_x = style.margin + shown_left.width() + style.gap;
    let range = ValueRange::of(&[&flows.iter().map(|f| f.value).collect::<Vec<_>>()]);
    let bar = colorbar(row_height, range, scale);
    let bar_x = right_x + shown_right.width() + style.margin;
    let width = (bar_x + bar.width() + style.margin)
        .max(style.margin * 2 + text_width(captions[0], scale) + style.gap + text_width(captions[1], scale));
    let height = images_top + row_height + style.margin;
    let mut figure = RgbImage::from_pixel(width, height, WHITE);
    let placed = [
        (shown_left, style.margin, left_grid, captions[0]),
        (shown_right, right_x, right_grid, captions[1]),
    ];
    for (shown, x, grid, caption) in &placed {
        let top = images_top + (row_height - shown.height()) / 2;
        imageops::replace(&mut figure, shown, i64::from(*x), i64::from(top));
        draw_grid(&mut figure, *x, top, shown.width(), shown.height(), *grid);
        let cx = x + shown.width().saturating_sub(text_width(caption, scale)) / 2;
        draw_text(
            &mut figure,
            i64::from(cx),
            i64::from(style.margin),
            caption,
            scale,
            BLACK,
        );
    }
    let centre = |index: usize, cell: [usize; 2]| -> (f32, f32) {
        let (shown, x, grid, _) = &placed[index];
        let top = images_top + (row_height - shown.height()) / 2;
        let cw = shown.width() as f32 / grid[1] as f32;
        let ch = shown.height() as f32 / grid[0] as f32;
        (
            *x as f32 + (cell[1] as f32 + 0.5) * cw,
            top as f32 + (cell[0] as f32 + 0.5) * ch,
        )
    };
    let mut order: Vec<usize> = (0..flows.len()).collect();
    order.sort_by(|&a, &b| flows[a].value.total_cmp(&flows[b].value).then(b.cmp(&a)));
    for index in order {
        let flow = flows[index];
        let t = range.normalise(flow.value);
        let t = if t.is_finite() { t.clamp(0.0, 1.0) } else { 0.5 };
        let width = 1.0 + t * (style.max_line_width.max(1) - 1) as f32;
        let from = centre(0, flow.source_cell);
        let to = centre(1, flow.target_cell);
        draw_line(&mut figure, from, to, width, BLACK, 1.5);
        draw_line(&mut figure, from, to, width, colormap(t), 0.0);
    }
    imageops::replace(
        &mut figure,
        &bar,
        i64::from(bar_x),
        i64::from(images_top) - i64::from(colorbar_padding(scale)),
    );
    Ok(figure)
}

/// The inner cell borders of a `grid` over the image placed at `(x, y)` with size `w × h`.
fn draw_grid(figure: &mut RgbImage, x: u32, y: u32, w: u32, h: u32, grid: [usize; 2]) {
    for r in 1..grid[0] as u32 {
        let row = y + r * h / grid[0] as u32;
        for col in x..x + w {
            figure.put_pixel(col, row, GRID);
        }
    }
    for c in 1..grid[1] as u32 {
        let col = x + c * w / grid[1] as u32;
        for row in y..y + h {
            figure.put_pixel(col, row, GRID);
        }
    }
}

/// A straight line of `width + 2 * outline` pixels from `from` to `to`, as filled discs stepped at
/// half-pixel spacing (clipped to the figure). A black pass with an outline under the coloured
/// pass keeps light colours visible over light image regions.
fn draw_line(figure: &mut RgbImage, from: (f32, f32), to: (f32, f32), width: f32, colour: Rgb<u8>, outline: f32) {
    let radius = (width / 2.0 + outline).max(0.5);
    let length = ((to.0 - from.0).powi(2) + (to.1 - from.1).powi(2)).sqrt();
    let steps = (length * 2.0).ceil().max(1.0) as usize;
    let (w, h) = (figure.width() as i64, figure.height() as i64);
    let r = radius.ceil() as i64;
    for s in 0..=steps {
        let t = s as f32 / steps as f32;
        let (cx, cy) = (from.0 + t * (to.0 - from.0), from.1 + t * (to.1 - from.1));
        for dy in -r..=r {
            for dx in -r..=r {
                let (px, py) = (cx.floor() as i64 + dx, cy.floor() as i64 + dy);
                let (ex, ey) = (px as f32 + 0.5 - cx, py as f32 + 0.5 - cy);
                if ex * ex + ey * ey <= radius * radius && (0..w).contains(&px) && (0..h).contains(&py) {
                    figure.put_pixel(px as u32, py as u32, colour);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grey(w: u32, h: u32) -> RgbImage {
        RgbImage::from_pixel(w, h, Rgb([128, 128, 128]))
    }

    #[test]
    fn the_strongest_flow_is_drawn_in_dark_red_between_its_cell_centres() {
        let flows = [
            FlowLine {
                source_cell: [0, 0],
                target_cell: [1, 1],
                value: 0.1,
            },
            FlowLine {
                source_cell: [1, 0],
                target_cell: [0, 1],
                value: 0.9,
            },
        ];
        let style = FlowStyle::default();
        let figure = flow_figure(&grey(20, 20), &grey(20, 20), [2, 2], [2, 2], &flows, ["a", "b"], &style).unwrap();
        // Images of 20 px are enlarged 10x to 200 px; the left image starts at the margin.
        let top = style.margin + text_height(2) + style.gap / 4;
        let from = (style.margin + 50, top + 150);
        let to = (style.margin + 200 + style.gap + 150, top + 50);
        let mid = ((from.0 + to.0) / 2, (from.1 + to.1) / 2);
        assert_eq!(
            *figure.get_pixel(mid.0, mid.1),
            colormap(1.0),
            "strongest line's middle"
        );
        assert_eq!(*figure.get_pixel(from.0, from.1), colormap(1.0), "its source centre");
        // The grid's border runs through the middle of each enlarged image.
        assert_eq!(*figure.get_pixel(style.margin + 100, top + 5), GRID);
    }

    #[test]
    fn a_cell_outside_the_grid_is_named() {
        let flows = [FlowLine {
            source_cell: [0, 0],
            target_cell: [3, 0],
            value: 1.0,
        }];
        let e = flow_figure(
            &grey(8, 8),
            &grey(8, 8),
            [2, 2],
            [2, 2],
            &flows,
            ["a", "b"],
            &FlowStyle::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("flow 0") && e.contains("[3, 0]"), "{e}");
    }
}
