//! Rendering of explanation maps as PNG figures, on the host and without Burn.
//!
//! Every map here is a row-major `&[f32]` of `h * w` values (one value per pixel of a map of
//! `h` rows and `w` columns); every image is an [`image::RgbImage`]. The pieces build on each
//! other in this order:
//!
//! - [`colormap()`]: OpenCV's `COLORMAP_JET` (the colormap pytorch-grad-cam uses), value in
//!   `[0, 1]` to RGB;
//! - [`resize_bilinear`]: maps at feature resolution resampled to image resolution;
//! - [`overlay()`]: `(1 - alpha) * image + alpha * jet(map)`;
//! - [`draw_text`] and the built-in bitmap font, [`colorbar()`] with tick labels;
//! - [`panel()`]: a figure of 1 to 4 images (original above, overlay below, a caption above
//!   each column, one shared colour bar);
//! - [`flow_figure`]: two images side by side with lines between grid cells (transport flows);
//! - [`matrix_heatmap`]: a labelled matrix (e.g. model-to-model correlations) with its values;
//! - [`map_grid`]: images in rows, one overlay per model in columns;
//! - [`denormalize()`]: a normalised `[3, H, W]` network input back to an image;
//! - [`save_png_atomic`]: writing a figure so that readers never see a half-written file.

mod colorbar;
mod colormap;
mod denormalize;
mod error;
mod flows;
mod font;
mod grid;
mod heatmap;
mod overlay;
mod panel;
mod range;
mod resample;
mod save;

pub use colorbar::{COLORBAR_BAR_WIDTH, colorbar, colorbar_padding, format_ticks};
pub use colormap::{NAN_COLOUR, colormap};
pub use denormalize::{IMAGENET_MEAN, IMAGENET_STD, denormalize};
pub use error::RenderError;
pub use flows::{FlowLine, FlowStyle, flow_figure};
pub use font::{GLYPH_ADVANCE, GLYPH_CELL_HEIGHT, GLYPH_WIDTH, draw_text, glyph, text_height, text_width};
pub use grid::{GridRow, map_grid};
pub use heatmap::matrix_heatmap;
pub use overlay::overlay;
pub use panel::{PanelItem, PanelStyle, panel, panel_size};
pub use range::ValueRange;
pub use resample::resize_bilinear;
pub use save::save_png_atomic;
