//! A tiny built-in bitmap font for captions and tick labels, so figures need no font files.
//!
//! Glyphs are 5 pixels wide. Digits, capitals and most punctuation are 5x7 (rows 0-6 of the
//! cell); lowercase letters have a 5-row x-height (rows 2-6) with ascenders from row 0, and the
//! descenders of `g j p q y` and the tail of `,` use two extra rows (7-8), so the cell is 5x9.
//! Covered: `0-9`, `a-z`, `A-Z`, space and `. , : ; - + = _ ( ) [ ] / % ? ! ' " # * < > |`.
//! Any other character is drawn as a hollow box (the usual "missing glyph"), never a panic.

use image::{Rgb, RgbImage};

/// Width of a glyph in font pixels (before scaling).
pub const GLYPH_WIDTH: u32 = 5;
/// Height of the glyph cell in font pixels: 7 rows of capital height plus 2 descender rows.
pub const GLYPH_CELL_HEIGHT: u32 = 9;
/// Horizontal distance from one glyph to the next in font pixels (one column of spacing).
pub const GLYPH_ADVANCE: u32 = 6;

/// The bitmap of `c`: 9 rows, top first; in each row bit 4 is the leftmost of the 5 columns.
/// `None` for characters the font does not cover.
pub fn glyph(c: char) -> Option<[u8; 9]> {
    // Written as binary literals so that each glyph can be read (and fixed) by eye.
    let rows: [u8; 9] = match c {
        ' ' => [0; 9],
        '0' => [0b01110, 0b10001, 0b10011, 0b10101, 0b11001, 0b10001, 0b01110, 0, 0],
        '1' => [0b00100, 0b01100, 0b00100, 0b00100, 0b00100, 0b00100, 0b01110, 0, 0],
        '2' => [0b01110, 0b10001, 0b00001, 0b00010, 0b00100, 0b01000, 0b11111, 0, 0],
        '3' => [0b11111, 0b00010, 0b00100, 0b00010, 0b00001, 0b10001, 0b01110, 0, 0],
        '4' => [0b00010, 0b00110, 0b01010, 0b10010, 0b11111, 0b00010, 0b00010, 0, 0],
        '5' => [0b11111, 0b10000, 0b11110, 0b00001, 0b00001, 0b10001, 0b01110, 0, 0],
        '6' => [0b00110, 0b01000, 0b10000, 0b11110, 0b10001, 0b10001, 0b01110, 0, 0],
        '7' => [0b11111, 0b00001, 0b00010, 0b00100, 0b01000, 0b01000, 0b01000, 0, 0],
        '8' => [0b01110, 0b10001, 0b10001, 0b01110, 0b10001, 0b10001, 0b01110, 0, 0],
        '9' => [0b01110, 0b10001, 0b10001, 0b01111, 0b00001, 0b00010, 0b01100, 0, 0],
        '.' => [0, 0, 0, 0, 0, 0b01100, 0b01100, 0, 0],
        ',' => [0, 0, 0, 0, 0, 0b01100, 0b01100, 0b00100, 0b01000],
        ':' => [0, 0b01100, 0b01100, 0, 0b01100, 0b01100, 0, 0, 0],
        ';' => [0, 0b01100, 0b01100, 0, 0b01100, 0b01100, 0b00100, 0b01000, 0],
        '-' => [0, 0, 0, 0b11111, 0, 0, 0, 0, 0],
        '+' => [0, 0b00100, 0b00100, 0b11111, 0b00100, 0b00100, 0, 0, 0],
        '=' => [0, 0, 0b11111, 0, 0b11111, 0, 0, 0, 0],
        '_' => [0, 0, 0, 0, 0, 0, 0, 0b11111, 0],
        '(' => [0b00010, 0b00100, 0b01000, 0b01000, 0b01000, 0b00100, 0b00010, 0, 0],
        ')' => [0b01000, 0b00100, 0b00010, 0b00010, 0b00010, 0b00100, 0b01000, 0, 0],
        '[' => [0b01110, 0b01000, 0b01000, 0b01000, 0b01000, 0b01000, 0b01110, 0, 0],
        ']' => [0b01110, 0b00010, 0b00010, 0b00010, 0b00010, 0b00010, 0b01110, 0, 0],
        '/' => [0, 0b00001, 0b00010, 0b00100, 0b01000, 0b10000, 0, 0, 0],
        '%' => [0b11000, 0b11001, 0b00010, 0b00100, 0b01000, 0b10011, 0b00011, 0, 0],
        '?' => [0b01110, 0b10001, 0b00001, 0b00010, 0b00100, 0, 0b00100, 0, 0],
        '!' => [0b00100, 0b00100, 0b00100, 0b00100, 0b00100, 0, 0b00100, 0, 0],
        '\'' => [0b00100, 0b00100, 0b01000, 0, 0, 0, 0, 0, 0],
        '"' => [0b01010, 0b01010, 0b01010, 0, 0, 0, 0, 0, 0],
        '#' => [0b01010, 0b01010, 0b11111, 0b01010, 0b11111, 0b01010, 0b01010, 0, 0],
        '*' => [0, 0b00100, 0b10101, 0b01110, 0b10101, 0b00100, 0, 0, 0],
        '<' => [0b00010, 0b00100, 0b01000, 0b10000, 0b01000, 0b00100, 0b00010, 0, 0],
        '>' => [0b01000, 0b00100, 0b00010, 0b00001, 0b00010, 0b00100, 0b01000, 0, 0],
        '|' => [0b00100, 0b00100, 0b00100, 0b00100, 0b00100, 0b00100, 0b00100, 0, 0],
        'A' => [0b01110, 0b10001, 0b10001, 0b11111, 0b10001, 0b10001, 0b10001, 0, 0],
        'B' => [0b11110, 0b10001, 0b10001, 0b11110, 0b10001, 0b10001, 0b11110, 0, 0],
        'C' => [0b01110, 0b10001, 0b10000, 0b10000, 0b10000, 0b10001, 0b01110, 0, 0],
        'D' => [0b11100, 0b10010, 0b10001, 0b10001, 0b10001, 0b10010, 0b11100, 0, 0],
        'E' => [0b11111, 0b10000, 0b10000, 0b11110, 0b10000, 0b10000, 0b11111, 0, 0],
        'F' => [0b11111, 0b10000, 0b10000, 0b11110, 0b10000, 0b10000, 0b10000, 0, 0],
        'G' => [0b01110, 0b10001, 0b10000, 0b10111, 0b10001, 0b10001, 0b01111, 0, 0],
        'H' => [0b10001, 0b10001, 0b10001, 0b11111, 0b10001, 0b10001, 0b10001, 0, 0],
        'I' => [0b01110, 0b00100, 0b00100, 0b00100, 0b00100, 0b00100, 0b01110, 0, 0],
        'J' => [0b00111, 0b00010, 0b00010, 0b00010, 0b00010, 0b10010, 0b01100, 0, 0],
        'K' => [0b10001, 0b10010, 0b10100, 0b11000, 0b10100, 0b10010, 0b10001, 0, 0],
        'L' => [0b10000, 0b10000, 0b10000, 0b10000, 0b10000, 0b10000, 0b11111, 0, 0],
        'M' => [0b10001, 0b11011, 0b10101, 0b10101, 0b10001, 0b10001, 0b10001, 0, 0],
        'N' => [0b10001, 0b10001, 0b11001, 0b10101, 0b10011, 0b10001, 0b10001, 0, 0],
        'O' => [0b01110, 0b10001, 0b10001, 0b10001, 0b10001, 0b10001, 0b01110, 0, 0],
        'P' => [0b11110, 0b10001, 0b10001, 0b11110, 0b10000, 0b10000, 0b10000, 0, 0],
        'Q' => [0b01110, 0b10001, 0b10001, 0b10001, 0b10101, 0b10010, 0b01101, 0, 0],
        'R' => [0b11110, 0b10001, 0b10001, 0b11110, 0b10100, 0b10010, 0b10001, 0, 0],
        'S' => [0b01111, 0b10000, 0b10000, 0b01110, 0b00001, 0b00001, 0b11110, 0, 0],
        'T' => [0b11111, 0b00100, 0b00100, 0b00100, 0b00100, 0b00100, 0b00100, 0, 0],
        'U' => [0b10001, 0b10001, 0b10001, 0b10001, 0b10001, 0b10001, 0b01110, 0, 0],
        'V' => [0b10001, 0b10001, 0b10001, 0b10001, 0b10001, 0b01010, 0b00100, 0, 0],
        'W' => [0b10001, 0b10001, 0b10001, 0b10101, 0b10101, 0b10101, 0b01010, 0, 0],
        'X' => [0b10001, 0b10001, 0b01010, 0b00100, 0b01010, 0b10001, 0b10001, 0, 0],
        'Y' => [0b10001, 0b10001, 0b10001, 0b01010, 0b00100, 0b00100, 0b00100, 0, 0],
        'Z' => [0b11111, 0b00001, 0b00010, 0b00100, 0b01000, 0b10000, 0b11111, 0, 0],
        'a' => [0, 0, 0b01110, 0b00001, 0b01111, 0b10001, 0b01111, 0, 0],
        'b' => [0b10000, 0b10000, 0b10110, 0b11001, 0b10001, 0b10001, 0b11110, 0, 0],
        'c' => [0, 0, 0b01110, 0b10000, 0b10000, 0b10001, 0b01110, 0, 0],
        'd' => [0b00001, 0b00001, 0b01101, 0b10011, 0b10001, 0b10001, 0b01111, 0, 0],
        'e' => [0, 0, 0b01110, 0b10001, 0b11111, 0b10000, 0b01110, 0, 0],
        'f' => [0b00110, 0b01001, 0b01000, 0b11100, 0b01000, 0b01000, 0b01000, 0, 0],
        'g' => [0, 0, 0b01111, 0b10001, 0b10001, 0b10001, 0b01111, 0b00001, 0b01110],
        'h' => [0b10000, 0b10000, 0b10110, 0b11001, 0b10001, 0b10001, 0b10001, 0, 0],
        'i' => [0b00100, 0, 0b01100, 0b00100, 0b00100, 0b00100, 0b01110, 0, 0],
        'j' => [
            0b00010, 0, 0b00110, 0b00010, 0b00010, 0b00010, 0b00010, 0b10010, 0b01100,
        ],
        'k' => [0b10000, 0b10000, 0b10010, 0b10100, 0b11000, 0b10100, 0b10010, 0, 0],
        'l' => [0b01100, 0b00100, 0b00100, 0b00100, 0b00100, 0b00100, 0b01110, 0, 0],
        'm' => [0, 0, 0b11010, 0b10101, 0b10101, 0b10001, 0b10001, 0, 0],
        'n' => [0, 0, 0b10110, 0b11001, 0b10001, 0b10001, 0b10001, 0, 0],
        'o' => [0, 0, 0b01110, 0b10001, 0b10001, 0b10001, 0b01110, 0, 0],
        'p' => [0, 0, 0b11110, 0b10001, 0b10001, 0b10001, 0b11110, 0b10000, 0b10000],
        'q' => [0, 0, 0b01111, 0b10001, 0b10001, 0b10001, 0b01111, 0b00001, 0b00001],
        'r' => [0, 0, 0b10110, 0b11001, 0b10000, 0b10000, 0b10000, 0, 0],
        's' => [0, 0, 0b01111, 0b10000, 0b01110, 0b00001, 0b11110, 0, 0],
        't' => [0b01000, 0b01000, 0b11100, 0b01000, 0b01000, 0b01001, 0b00110, 0, 0],
        'u' => [0, 0, 0b10001, 0b10001, 0b10001, 0b10011, 0b01101, 0, 0],
        'v' => [0, 0, 0b10001, 0b10001, 0b10001, 0b01010, 0b00100, 0, 0],
        'w' => [0, 0, 0b10001, 0b10001, 0b10101, 0b10101, 0b01010, 0, 0],
        'x' => [0, 0, 0b10001, 0b01010, 0b00100, 0b01010, 0b10001, 0, 0],
        'y' => [0, 0, 0b10001, 0b10001, 0b10001, 0b10001, 0b01111, 0b00001, 0b01110],
        'z' => [0, 0, 0b11111, 0b00010, 0b00100, 0b01000, 0b11111, 0, 0],
        _ => return None,
    };
    Some(rows)
}

/// The hollow box drawn for characters the font does not cover.
const MISSING: [u8; 9] = [0b11111, 0b10001, 0b10001, 0b10001, 0b10001, 0b10001, 0b11111, 0, 0];

/// Width in image pixels of `text` drawn at `scale`: `GLYPH_ADVANCE * scale` per character,
/// minus the trailing spacing column; 0 for empty text.
pub fn text_width(text: &str, scale: u32) -> u32 {
    let n = text.chars().count() as u32;
    if n == 0 { 0 } else { (n * GLYPH_ADVANCE - 1) * scale }
}

/// Height in image pixels of a line of text at `scale`: the whole cell including the descender
/// rows (`GLYPH_CELL_HEIGHT * scale`), so lines never overlap whatever letters they hold.
pub fn text_height(scale: u32) -> u32 {
    GLYPH_CELL_HEIGHT * scale
}

/// Draws `text` into `image` with the top-left corner of its first cell at `(x, y)`; each font
/// pixel becomes a `scale x scale` square of `colour`. Pixels outside the image are clipped
/// (so `x`, `y` may be negative), a `scale` of 0 draws nothing, and characters outside the
/// font draw a hollow box. Returns the width drawn, as [`text_width`].
pub fn draw_text(image: &mut RgbImage, x: i64, y: i64, text: &str, scale: u32, colour: Rgb<u8>) -> u32 {
    let (width, height) = (i64::from(image.width()), i64::from(image.height()));
    let s = i64::from(scale);
    for (i, c) in text.chars().enumerate() {
        let rows = glyph(c).unwrap_or(MISSING);
        let left = x + i as i64 * i64::from(GLYPH_ADVANCE) * s;
        for (row, bits) in rows.iter().enumerate() {
            for col in 0..GLYPH_WIDTH as i64 {
                if bits & (1 << (GLYPH_WIDTH as i64 - 1 - col)) == 0 {
                    continue;
                }
                let (px, py) = (left + col * s, y + row as i64 * s);
                for dy in 0..s {
                    for dx in 0..s {
                        let (qx, qy) = (px + dx, py + dy);
                        if (0..width).contains(&qx) && (0..height).contains(&qy) {
                            image.put_pixel(qx as u32, qy as u32, colour);
                        }
                    }
                }
            }
        }
    }
    text_width(text, scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    const WHITE: Rgb<u8> = Rgb([255, 255, 255]);
    const BLACK: Rgb<u8> = Rgb([0, 0, 0]);

    fn inked(image: &RgbImage) -> usize {
        image.pixels().filter(|p| **p == BLACK).count()
    }

    #[test]
    fn every_covered_glyph_has_ink_within_five_columns() {
        let covered = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.,:;-+=_()[]/%?!'\"#*<>|";
        for c in covered.chars() {
            let rows = glyph(c).unwrap_or_else(|| panic!("{c:?} is not covered"));
            assert!(rows.iter().any(|&r| r != 0), "{c:?} is blank");
            assert!(rows.iter().all(|&r| r < 32), "{c:?} is wider than 5 columns");
        }
        assert_eq!(glyph(' '), Some([0; 9]));
    }

    #[test]
    fn a_glyph_renders_scaled_ink_and_text_width_is_exact() {
        let mut image = RgbImage::from_pixel(40, 30, WHITE);
        let width = draw_text(&mut image, 1, 1, "1", 2, BLACK);
        assert_eq!(width, 10);
        // '1' has 10 font pixels (rows of 1, 2, 1, 1, 1, 1 and 3), each drawn 2x2.
        assert_eq!(inked(&image), 10 * 4);
        assert_eq!(text_width("s=0.731", 1), 7 * 6 - 1);
        assert_eq!(text_width("", 3), 0);
        assert_eq!(text_height(3), 27);
    }

    #[test]
    fn unknown_characters_and_clipping_do_not_panic() {
        let mut image = RgbImage::from_pixel(8, 8, WHITE);
        draw_text(&mut image, -3, -4, "€é\u{1F600}x", 3, BLACK);
        draw_text(&mut image, 100, 100, "far away", 1, BLACK);
        draw_text(&mut image, 0, 0, "zero scale", 0, BLACK);
        let mut box_image = RgbImage::from_pixel(8, 10, WHITE);
        draw_text(&mut box_image, 0, 0, "\u{2603}", 1, BLACK);
        // The hollow box: 5 + 5 + 2 * 5 font pixels on its outline.
        assert_eq!(inked(&box_image), 20);
    }
}
