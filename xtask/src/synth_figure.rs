//! The parts set's figure for the docs (`cargo xtask synth --parts --figure FILE.png`): sibling
//! classes side by side, one image with its part mask, and the same image with each slot
//! removed.

use dml_datasets::synth::parts::labels::{LABEL_BODY, LABEL_DISTRACTOR, SLOT_LABELS};
use dml_datasets::synth::parts::{Edit, PartType, PartsConfig, Slot, TRAIN_CLASSES, plan, render};
use image::{GrayImage, Rgb, RgbImage};

/// Side of one tile in pixels.
pub const TILE: u32 = 96;
/// Tiles per row.
const COLUMNS: u32 = 8;

/// Colour of each label in the figure's part mask: background black, distractors grey, body
/// white, crest red, front green, sides blue, tail yellow.
fn palette(label: u8) -> Rgb<u8> {
    match label {
        LABEL_DISTRACTOR => Rgb([110, 110, 110]),
        LABEL_BODY => Rgb([235, 235, 235]),
        l if l == SLOT_LABELS[0] => Rgb([220, 50, 47]),
        l if l == SLOT_LABELS[1] => Rgb([60, 180, 75]),
        l if l == SLOT_LABELS[2] => Rgb([40, 110, 230]),
        l if l == SLOT_LABELS[3] => Rgb([240, 200, 30]),
        _ => Rgb([0, 0, 0]),
    }
}

fn coloured(labels: &GrayImage) -> RgbImage {
    RgbImage::from_fn(labels.width(), labels.height(), |x, y| {
        palette(labels.get_pixel(x, y).0[0])
    })
}

/// The figure of the set `config` describes (its seed and count; tiles are rendered at
/// [`TILE`] pixels). Row 1: the first image of four sibling pairs of test classes (each pair
/// differs in one slot). Row 2: the first image with every slot filled and a distractor, its
/// part mask, the image with each slot removed, and with its crest swapped.
pub fn figure(config: &PartsConfig) -> anyhow::Result<RgbImage> {
    config.validate()?;
    let params = plan(config.seed, config.n);
    let mut tiles: Vec<RgbImage> = Vec::new();
    for class in (TRAIN_CLASSES..TRAIN_CLASSES + 8).step_by(2) {
        for sibling in [class, class + 1] {
            let p = params
                .iter()
                .find(|p| p.class == sibling)
                .ok_or_else(|| anyhow::anyhow!("class {sibling} has no image in the set"))?;
            tiles.push(render(p, TILE).0);
        }
    }
    let full = params
        .iter()
        .find(|p| p.parts.iter().all(|&t| t != PartType::None) && !p.distractors.is_empty())
        .ok_or_else(|| anyhow::anyhow!("no image with every slot filled and a distractor"))?;
    let (image, labels) = render(full, TILE);
    tiles.push(image);
    tiles.push(coloured(&labels));
    for slot in Slot::ALL {
        tiles.push(render(&Edit::Remove(slot).apply(full), TILE).0);
    }
    let swap = PartType::SHAPES
        .into_iter()
        .find(|&t| t != full.parts[Slot::Crest.index()])
        .unwrap_or(PartType::Cone);
    tiles.push(render(&Edit::Swap(Slot::Crest, swap).apply(full), TILE).0);
    let rows = (tiles.len() as u32).div_ceil(COLUMNS);
    let gap = 4;
    let mut canvas = RgbImage::from_pixel(
        COLUMNS * (TILE + gap) - gap,
        rows * (TILE + gap) - gap,
        Rgb([255, 255, 255]),
    );
    for (i, tile) in tiles.iter().enumerate() {
        let (col, row) = (i as u32 % COLUMNS, i as u32 / COLUMNS);
        image::imageops::replace(
            &mut canvas,
            tile,
            (col * (TILE + gap)) as i64,
            (row * (TILE + gap)) as i64,
        );
    }
    Ok(canvas)
}
