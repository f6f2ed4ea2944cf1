//! A vertical colour bar with tick labels, the legend of a figure's heat maps.

use image::{Rgb, RgbImage};

use super::colormap::colormap;
use super::font::{draw_text, text_width};
use super::range::ValueRange;

/// Width of the coloured bar in font pixels (multiplied by the scale).
pub const COLORBAR_BAR_WIDTH: u32 = 8;

/// Length of a tick mark and the gap between it and its label, in font pixels.
const TICK: u32 = 2;

const WHITE: Rgb<u8> = Rgb([255, 255, 255]);
const BLACK: Rgb<u8> = Rgb([0, 0, 0]);

/// Rows of blank space above and below the bar in a [`colorbar`] image of this `scale`, so
/// the labels of the end ticks (centred on them) are not cut off: half a capital's height
/// (7 font pixels) rounded up, i.e. `4 * scale`.
pub fn colorbar_padding(scale: u32) -> u32 {
    4 * scale.max(1)
}

/// Tick labels for `values`: short, and distinct wherever the values are.
///
/// Values whose largest magnitude lies in `[0.01, 10000)` (or that are all zero) get fixed
/// notation with the fewest decimals from 2 up to 6 that keeps distinct values apart
/// (`"0.00"`, `"0.50"`, `"1.00"`); other scales get scientific notation with 1 to 4 mantissa
/// decimals (`"-1.2e-3"`, `"3.4e5"`). A label that reads as zero drops its minus sign, and
/// non-finite values are `"nan"`, `"inf"`, `"-inf"`. Returns one label per value, in order.
pub fn format_ticks(values: &[f32]) -> Vec<String> {
    let largest = values
        .iter()
        .filter(|v| v.is_finite())
        .fold(0.0_f32, |m, v| m.max(v.abs()));
    let fixed = largest == 0.0 || (1e-2..1e4).contains(&largest);
    let render = |decimals: usize| -> Vec<String> {
        values
            .iter()
            .map(|&v| {
                if v.is_nan() {
                    "nan".to_owned()
                } else if v.is_infinite() {
                    if v > 0.0 { "inf".to_owned() } else { "-inf".to_owned() }
                } else if v == 0.0 && !fixed {
                    // Exactly zero reads best as itself, not as "0.0e0" on a scientific bar.
                    "0".to_owned()
                } else {
                    let s = if fixed {
                        format!("{v:.decimals$}")
                    } else {
                        format!("{v:.decimals$e}")
                    };
                    // A rounded-to-zero label such as "-0.00" would suggest a sign it cannot show.
                    match s.strip_prefix('-') {
                        Some(rest) if rest.parse::<f64>() == Ok(0.0) => rest.to_owned(),
                        _ => s,
                    }
                }
            })
            .collect()
    };
    let decimals = if fixed { 2..=6 } else { 1..=4 };
    let last = *decimals.end();
    for d in decimals {
        let labels = render(d);
        let distinct = (0..values.len()).all(|i| (0..i).all(|j| values[i] == values[j] || labels[i] != labels[j]));
        if distinct || d == last {
            return labels;
        }
    }
    unreachable!("the loop returns at its last precision")
}

/// A vertical colour bar for `range`: the colormap from `range.max` (top, dark red) down to
/// `range.min` (bottom, dark blue), framed in black, with ticks and labels at max, midpoint and
/// min on its right, black on white.
///
/// The bar is `bar_h` pixels tall (at least 2) and `COLORBAR_BAR_WIDTH * scale` wide; labels are
/// drawn with the built-in font at `scale` (0 counts as 1). The returned image is
/// `bar_h + 2 * colorbar_padding(scale)` tall: the bar's first row is row
/// `colorbar_padding(scale)`, so a caller aligns the bar with a map by placing the image that
/// many rows above the map's top. Its width is the frame, bar, tick, gap and the widest label.
pub fn colorbar(bar_h: u32, range: ValueRange, scale: u32) -> RgbImage {
    let s = scale.max(1);
    let bar_h = bar_h.max(2);
    let pad = colorbar_padding(s);
    let bar_w = COLORBAR_BAR_WIDTH * s;
    let values = [range.max, (range.min + range.max) / 2.0, range.min];
    let labels = format_ticks(&values);
    let label_w = labels.iter().map(|l| text_width(l, s)).max().unwrap_or(0);
    // Frame column, bar, frame column, tick, gap, label.
    let tick_x = bar_w + 2;
    let label_x = tick_x + 2 * TICK * s;
    let width = label_x + label_w;
    let height = bar_h + 2 * pad;
    let mut image = RgbImage::from_pixel(width, height, WHITE);

    // The bar itself: row r shows the value at fraction 1 - r / (bar_h - 1) of the range, so
    // the top row is exactly max and the bottom row exactly min.
    for r in 0..bar_h {
        let colour = colormap(1.0 - r as f32 / (bar_h - 1) as f32);
        for x in 1..=bar_w {
            image.put_pixel(x, pad + r, colour);
        }
    }
    // A one-pixel frame just outside the bar, so its dark-blue and dark-red ends read as the
    // ends of the scale against the white page.
    for x in 0..bar_w + 2 {
        image.put_pixel(x, pad - 1, BLACK);
        image.put_pixel(x, pad + bar_h, BLACK);
    }
    for y in pad - 1..=pad + bar_h {
        image.put_pixel(0, y, BLACK);
        image.put_pixel(bar_w + 1, y, BLACK);
    }

    let tick_rows = [pad, pad + (bar_h - 1) / 2, pad + bar_h - 1];
    // Labels are centred on their tick by the capital height (7 font pixels), which is where
    // digits sit in the cell; the tick mark is `s` rows thick, centred the same way.
    for (&row, label) in tick_rows.iter().zip(&labels) {
        let top = row as i64 - i64::from(s / 2);
        for dy in 0..s as i64 {
            for x in tick_x..tick_x + TICK * s {
                let y = top + dy;
                if (0..i64::from(height)).contains(&y) {
                    image.put_pixel(x, y as u32, BLACK);
                }
            }
        }
        let text_top = row as i64 - i64::from(7 * s) / 2;
        draw_text(&mut image, i64::from(label_x), text_top, label, s, BLACK);
    }
    image
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tick_labels_are_short_and_distinct() {
        assert_eq!(format_ticks(&[0.0, 0.5, 1.0]), ["0.00", "0.50", "1.00"]);
        assert_eq!(format_ticks(&[-1.2e-3, 0.0, 1.2e-3]), ["-1.2e-3", "0", "1.2e-3"]);
        assert_eq!(format_ticks(&[0.501, 0.502, 0.503]), ["0.501", "0.502", "0.503"]);
        assert_eq!(format_ticks(&[-0.001, 0.5]), ["0.00", "0.50"]);
        assert_eq!(format_ticks(&[2.0, 2.0]), ["2.00", "2.00"]);
        assert_eq!(format_ticks(&[f32::NAN, f32::NEG_INFINITY]), ["nan", "-inf"]);
        assert_eq!(format_ticks(&[12345.0]), ["1.2e4"]);
    }

    #[test]
    fn bar_runs_from_red_at_the_top_to_blue_at_the_bottom() {
        let range = ValueRange::new(0.0, 1.0).unwrap();
        let bar = colorbar(100, range, 2);
        let pad = colorbar_padding(2);
        assert_eq!(bar.height(), 100 + 2 * pad);
        assert_eq!(*bar.get_pixel(5, pad), colormap(1.0));
        assert_eq!(*bar.get_pixel(5, pad + 99), colormap(0.0));
        // Frame, 16-pixel bar, frame, tick and gap (8), then the widest label "0.00" (4 glyphs).
        assert_eq!(bar.width(), 18 + 8 + text_width("0.00", 2));
    }

    #[test]
    fn degenerate_inputs_do_not_panic() {
        let range = ValueRange::new(-3.0, -3.0).unwrap();
        let bar = colorbar(0, range, 0);
        assert_eq!(bar.height(), 2 + 2 * colorbar_padding(1));
    }
}
