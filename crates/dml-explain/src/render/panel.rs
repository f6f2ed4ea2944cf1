//! A figure explaining one tuple (anchor, positive, negatives …): per image a column with the
//! caption, the original image and its heat-map overlay, and one colour bar for all maps.

use image::{Rgb, RgbImage, imageops};

use super::colorbar::{colorbar, colorbar_padding};
use super::error::RenderError;
use super::font::{draw_text, text_height, text_width};
use super::overlay::overlay;
use super::range::ValueRange;

const WHITE: Rgb<u8> = Rgb([255, 255, 255]);
const BLACK: Rgb<u8> = Rgb([0, 0, 0]);

/// One column of a [`panel`]: an image, its explanation map and a caption.
#[derive(Debug, Clone, Copy)]
pub struct PanelItem<'a> {
    /// The image as shown to a person (e.g. from [`super::denormalize()`]), any size.
    pub image: &'a RgbImage,
    /// The explanation map, row-major `[map_h, map_w]`, in its own units: the panel puts all
    /// maps on one shared scale (see [`PanelStyle::range`]). Resampled bilinearly to the
    /// displayed image size.
    pub map: &'a [f32],
    /// Rows of `map`.
    pub map_h: usize,
    /// Columns of `map`.
    pub map_w: usize,
    /// The line drawn above the column, e.g. `"anchor  s=0.731"` (see the font's character set).
    pub caption: &'a str,
}

/// How a [`panel`] is drawn; [`Default`] gives a figure readable at 100 % zoom.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PanelStyle {
    /// Weight of the heat map in the overlay, `[0, 1]` (pytorch-grad-cam shows 0.5).
    pub alpha: f32,
    /// Images are enlarged by the smallest integer factor (nearest neighbour, so pixels stay
    /// crisp and honest) that makes them at least this many pixels tall; larger images are
    /// shown at factor 1.
    pub min_image_height: u32,
    /// Scale of the bitmap font for captions and tick labels (2 gives 10x14-pixel capitals).
    pub text_scale: u32,
    /// White border around the figure, in pixels.
    pub margin: u32,
    /// Space between columns, between the caption and the images, between the two rows of
    /// images, and before the colour bar, in pixels.
    pub gap: u32,
    /// The value range of the colour scale; `None` takes the smallest and largest finite value
    /// over all maps of the panel, so equal colours mean equal values across columns.
    pub range: Option<ValueRange>,
}

impl Default for PanelStyle {
    fn default() -> Self {
        Self {
            alpha: 0.5,
            min_image_height: 200,
            text_scale: 2,
            margin: 12,
            gap: 12,
            range: None,
        }
    }
}

/// Where everything of a panel goes, computed once so [`panel_size`] and [`panel`] agree.
struct Layout {
    /// Integer enlargement factor of each image.
    factors: Vec<u32>,
    /// Width of each column: its enlarged image or its caption, whichever is wider.
    column_widths: Vec<u32>,
    /// Height of each row of images: the tallest enlarged image.
    row_height: u32,
    /// Top of the row of original images.
    originals_top: u32,
    /// Top of the row of overlays.
    overlays_top: u32,
    /// Left edge of the colour-bar image.
    colorbar_left: u32,
    /// Top of the colour-bar image; the bar itself starts `colorbar_padding` lower, level with
    /// the overlays.
    colorbar_top: u32,
    /// The shared value range of all maps.
    range: ValueRange,
    /// Size of the whole figure.
    width: u32,
    /// Height of the whole figure.
    height: u32,
}

/// Validates the items and computes the [`Layout`]; the single place of the size arithmetic.
fn layout(items: &[PanelItem<'_>], style: &PanelStyle) -> Result<Layout, RenderError> {
    if !(1..=4).contains(&items.len()) {
        return Err(RenderError::PanelCount(items.len()));
    }
    let item_error = |index: usize, source: RenderError| RenderError::PanelItem {
        index,
        caption: items[index].caption.to_owned(),
        source: Box::new(source),
    };
    let scale = style.text_scale.max(1);
    let mut factors = Vec::with_capacity(items.len());
    let mut column_widths = Vec::with_capacity(items.len());
    let mut row_height = 0_u32;
    for (index, item) in items.iter().enumerate() {
        let (w, h) = item.image.dimensions();
        if w == 0 || h == 0 {
            let shape = RenderError::EmptyShape {
                what: "image",
                h: h as usize,
                w: w as usize,
            };
            return Err(item_error(index, shape));
        }
        if item.map.len() != item.map_h * item.map_w {
            let shape = RenderError::MapLength {
                len: item.map.len(),
                h: item.map_h,
                w: item.map_w,
            };
            return Err(item_error(index, shape));
        }
        let factor = style.min_image_height.div_ceil(h).max(1);
        let too_large = || {
            item_error(
                index,
                RenderError::TooLarge {
                    what: "enlarged image",
                    h: h as usize,
                    w: w as usize,
                },
            )
        };
        let shown_w = w.checked_mul(factor).ok_or_else(too_large)?;
        let shown_h = h.checked_mul(factor).ok_or_else(too_large)?;
        factors.push(factor);
        column_widths.push(shown_w.max(text_width(item.caption, scale)));
        row_height = row_height.max(shown_h);
    }
    let range = match style.range {
        Some(range) => ValueRange::new(range.min, range.max)?,
        None => ValueRange::of(&items.iter().map(|i| i.map).collect::<Vec<_>>()),
    };
    // The colour bar's width depends only on its labels, so a 2-row stand-in measures it.
    let colorbar_width = colorbar(2, range, scale).width();
    let pad = colorbar_padding(scale);

    let u64_sum: u64 = column_widths.iter().map(|&w| u64::from(w)).sum();
    let columns = u64_sum + u64::from(style.gap) * (items.len() as u64 - 1);
    let colorbar_left = u64::from(style.margin) + columns + u64::from(style.gap);
    let width = colorbar_left + u64::from(colorbar_width) + u64::from(style.margin);
    let originals_top = u64::from(style.margin) + u64::from(text_height(scale)) + u64::from(style.gap);
    let overlays_top = originals_top + u64::from(row_height) + u64::from(style.gap);
    // The bar's end labels reach `pad` rows beyond the overlays, so the bottom border is at
    // least that deep.
    let height = overlays_top + u64::from(row_height) + u64::from(style.margin.max(pad));
    let to_u32 = |v: u64| {
        u32::try_from(v).map_err(|_| RenderError::TooLarge {
            what: "panel",
            h: height as usize,
            w: width as usize,
        })
    };
    Ok(Layout {
        factors,
        column_widths,
        row_height,
        originals_top: to_u32(originals_top)?,
        overlays_top: to_u32(overlays_top)?,
        colorbar_left: to_u32(colorbar_left)?,
        colorbar_top: to_u32(overlays_top - u64::from(pad))?,
        range,
        width: to_u32(width)?,
        height: to_u32(height)?,
    })
}

/// The `(width, height)` in pixels of the figure [`panel`] draws for these items and style,
/// without drawing it. Same errors as [`panel`].
///
/// Width: `margin + Σ column widths + (n - 1) * gap + gap + colour-bar width + margin`, where a
/// column is as wide as its enlarged image or its caption. Height: `margin + caption line +
/// gap + row + gap + row + max(margin, colour-bar padding)`, where a row is as tall as the
/// tallest enlarged image.
pub fn panel_size(items: &[PanelItem<'_>], style: &PanelStyle) -> Result<(u32, u32), RenderError> {
    let layout = layout(items, style)?;
    Ok((layout.width, layout.height))
}

/// Draws a figure for 1 to 4 images (e.g. anchor, positive, negative): each column holds its
/// caption, the image enlarged by an integer factor (nearest neighbour; see
/// [`PanelStyle::min_image_height`]), and below it the overlay of its map on the enlarged
/// image; a colour bar with min, mid and max labels of the shared value range stands at the
/// right, level with the overlays. Images of different sizes are centred in their cells.
/// Black on white; the size is [`panel_size`].
///
/// Errors: fewer than 2 or more than 4 items, an empty image, a map whose length is not
/// `map_h * map_w` (named by the item's index and caption), an invalid alpha or range.
pub fn panel(items: &[PanelItem<'_>], style: &PanelStyle) -> Result<RgbImage, RenderError> {
    let layout = layout(items, style)?;
    let scale = style.text_scale.max(1);
    let mut figure = RgbImage::from_pixel(layout.width, layout.height, WHITE);
    let mut left = style.margin;
    for (index, item) in items.iter().enumerate() {
        let column_w = layout.column_widths[index];
        let caption_w = text_width(item.caption, scale);
        let caption_x = left + (column_w - caption_w) / 2;
        draw_text(
            &mut figure,
            i64::from(caption_x),
            i64::from(style.margin),
            item.caption,
            scale,
            BLACK,
        );

        let factor = layout.factors[index];
        let (w, h) = item.image.dimensions();
        let shown = RgbImage::from_fn(w * factor, h * factor, |x, y| {
            *item.image.get_pixel(x / factor, y / factor)
        });
        let normalised = layout.range.normalise_all(item.map);
        let heat = overlay(&shown, &normalised, item.map_h, item.map_w, style.alpha).map_err(|source| {
            RenderError::PanelItem {
                index,
                caption: item.caption.to_owned(),
                source: Box::new(source),
            }
        })?;
        let x = left + (column_w - shown.width()) / 2;
        let dy = (layout.row_height - shown.height()) / 2;
        imageops::replace(&mut figure, &shown, i64::from(x), i64::from(layout.originals_top + dy));
        imageops::replace(&mut figure, &heat, i64::from(x), i64::from(layout.overlays_top + dy));
        left += column_w + style.gap;
    }
    let bar = colorbar(layout.row_height, layout.range, scale);
    imageops::replace(
        &mut figure,
        &bar,
        i64::from(layout.colorbar_left),
        i64::from(layout.colorbar_top),
    );
    Ok(figure)
}

#[cfg(test)]
mod tests {
    use super::super::colormap::colormap;
    use super::*;

    fn item<'a>(image: &'a RgbImage, map: &'a [f32], caption: &'a str) -> PanelItem<'a> {
        PanelItem {
            image,
            map,
            map_h: 2,
            map_w: 2,
            caption,
        }
    }

    #[test]
    fn size_arithmetic_for_three_small_images() {
        let image = RgbImage::from_pixel(48, 48, Rgb([90, 90, 90]));
        let map = [0.0, 0.25, 0.5, 1.0];
        let items = [
            item(&image, &map, "anchor"),
            item(&image, &map, "positive  s=0.731"),
            item(&image, &map, "neg"),
        ];
        let style = PanelStyle::default();
        let (w, h) = panel_size(&items, &style).unwrap();
        // 48 px enlarged by ceil(200 / 48) = 5 gives 240 px cells; the second caption
        // (17 glyphs, 12 * 17 - 2 = 202 px) is narrower, so every column is 240 wide.
        let bar_w = colorbar(2, ValueRange::new(0.0, 1.0).unwrap(), 2).width();
        assert_eq!(w, 12 + 3 * 240 + 2 * 12 + 12 + bar_w + 12);
        // Margin, caption line (9 * 2), gap, 240, gap, 240, margin (12 >= padding 8).
        assert_eq!(h, 12 + 18 + 12 + 240 + 12 + 240 + 12);
        let figure = panel(&items, &style).unwrap();
        assert_eq!(figure.dimensions(), (w, h));
        // The top-left pixel of the first original is the image's colour, and the colour bar's
        // top row (level with the overlays' first row) is dark red for the range's max.
        assert_eq!(*figure.get_pixel(12, 12 + 18 + 12), Rgb([90, 90, 90]));
        let overlays_top = 12 + 18 + 12 + 240 + 12;
        assert_eq!(
            *figure.get_pixel(12 + 3 * 240 + 2 * 12 + 12 + 3, overlays_top),
            colormap(1.0)
        );
    }

    #[test]
    fn long_captions_widen_their_column() {
        let image = RgbImage::from_pixel(10, 100, Rgb([0, 0, 0]));
        let map = [0.0; 4];
        let style = PanelStyle {
            min_image_height: 50,
            ..PanelStyle::default()
        };
        let items = [item(&image, &map, "abcdefghij"), item(&image, &map, "a")];
        let (w, h) = panel_size(&items, &style).unwrap();
        let bar_w = colorbar(2, ValueRange::new(0.0, 0.0).unwrap(), 2).width();
        assert_eq!(w, 12 + (10 * 12 - 2) + 12 + 10 + 12 + bar_w + 12);
        assert_eq!(h, 12 + 18 + 12 + 100 + 12 + 100 + 12);
    }

    #[test]
    fn bad_counts_and_maps_are_errors_naming_the_item() {
        let image = RgbImage::from_pixel(8, 8, Rgb([0, 0, 0]));
        let map = [0.0; 4];
        let style = PanelStyle::default();
        let one = [item(&image, &map, "a")];
        assert!(
            panel(&one, &style).is_ok(),
            "a single image with its overlay and colour bar"
        );
        assert!(matches!(panel(&[], &style), Err(RenderError::PanelCount(0))));
        let five = [
            item(&image, &map, "a"),
            item(&image, &map, "b"),
            item(&image, &map, "c"),
            item(&image, &map, "d"),
            item(&image, &map, "e"),
        ];
        assert!(matches!(panel(&five, &style), Err(RenderError::PanelCount(5))));
        let short = [0.0; 3];
        let items = [item(&image, &map, "anchor"), item(&image, &short, "positive")];
        let err = panel(&items, &style).unwrap_err();
        assert_eq!(
            err.to_string(),
            "panel image 1 (caption \"positive\"): map has 3 values but its shape [2, 2] needs 4"
        );
    }
}
