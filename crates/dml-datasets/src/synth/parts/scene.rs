//! The independently drawn properties of one parts image, and the manifest columns that list
//! them.
//!
//! The class fixes the part type of every slot; everything else — the pose and place of the
//! object, its colours, the light, the background and the loose parts lying around — is drawn
//! uniformly and independently of the class (and of each other, except that the parts' hue keeps
//! 90°–270° away from the body's), so that no nuisance carries class information and each can be
//! used as a ground-truth grouping for NR-Precision.

use rand::Rng;
use rand::seq::index::sample;

use super::classes::{Combination, class_table};
use super::vocabulary::{PartType, Slot};
use crate::synth::scene::{CONTROL_LEVELS, ColourLevels, Property};

/// Yaw levels: the object faces right (levels 0–3) or left (4–7), turned by −30°, −10°, 10°
/// or 30° out of the profile view.
pub const YAWS: u32 = 8;
/// Tilt levels: the nose pitched −15°, 0° or 15°.
pub const TILTS: u32 = 3;
/// Scale levels: 0.85, 0.95 or 1.05 times the reference size.
pub const SCALES: u32 = 3;
/// Horizontal position levels: the object's centre at −0.24, −0.12, 0, 0.12 or 0.24 units from
/// the middle of the view (the frame's half width is 1.47 units there).
pub const POSITIONS_X: u32 = 5;
/// Height levels: the object's centre 0.9, 1.05 or 1.2 units above the ground.
pub const HEIGHTS: u32 = 3;
/// Light elevation levels: 25°, 45°, 65° above the ground.
pub const LIGHT_ELEVATIONS: u32 = 3;
/// Light azimuth levels: 45°·level, 0 = from behind the camera.
pub const LIGHT_AZIMUTHS: u32 = 8;
/// Distractor levels: 0, 1 or 2 loose parts on the ground.
pub const DISTRACTOR_COUNTS: u32 = 3;
/// Places on the ground where a distractor can lie, in front of the object (`x`, `z`).
pub const DISTRACTOR_SPOTS: [(f32, f32); 10] = [
    (-1.2, 0.7),
    (-0.6, 0.7),
    (0.0, 0.7),
    (0.6, 0.7),
    (1.2, 0.7),
    (-1.0, 1.2),
    (-0.5, 1.2),
    (0.0, 1.2),
    (0.5, 1.2),
    (1.0, 1.2),
];

/// One loose part lying on the ground, belonging to no object.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Distractor {
    /// Its type (never [`PartType::None`]).
    pub part: PartType,
    /// Index into [`DISTRACTOR_SPOTS`].
    pub spot: usize,
    /// Its yaw on the ground, radians.
    pub yaw: f32,
}

/// Everything that determines one image of the parts set.
#[derive(Debug, Clone, PartialEq)]
pub struct PartsParams {
    /// The class id (index into [`class_table`]).
    pub class: usize,
    /// The part type in every slot; the class's combination unless a counterfactual changed it.
    pub parts: Combination,
    /// Yaw level, `0..YAWS`.
    pub yaw: u32,
    /// Tilt level, `0..TILTS`.
    pub tilt: u32,
    /// Scale level, `0..SCALES`.
    pub scale: u32,
    /// Horizontal position level, `0..POSITIONS_X`.
    pub position_x: u32,
    /// Height level, `0..HEIGHTS`.
    pub height: u32,
    /// Body colour.
    pub body: ColourLevels,
    /// Colour of the attached parts and of the distractors.
    pub part_colour: ColourLevels,
    /// Ground and sky colour.
    pub background: ColourLevels,
    /// Light elevation level, `0..LIGHT_ELEVATIONS`.
    pub light_elevation: u32,
    /// Light azimuth level, `0..LIGHT_AZIMUTHS`.
    pub light_azimuth: u32,
    /// The loose parts on the ground (`0..DISTRACTOR_COUNTS` of them).
    pub distractors: Vec<Distractor>,
    /// Control level, `0..CONTROL_LEVELS`: never read by the renderer.
    pub control: u32,
}

/// Every property column of the parts manifest, in order: the nuisances, the slots (their part
/// type's level in [`PartType::ALL`]), and the invisible `control`.
pub const PROPERTIES: [Property; 21] = [
    prop(
        "yaw",
        YAWS,
        "facing right (0-3) or left (4-7), turned -30°, -10°, 10°, 30° out of profile",
    ),
    prop("tilt", TILTS, "nose pitched -15°, 0°, 15°"),
    prop("scale", SCALES, "object size 0.85, 0.95, 1.05"),
    prop(
        "position_x",
        POSITIONS_X,
        "object centre at x = -0.5, -0.25, 0, 0.25, 0.5",
    ),
    prop("height", HEIGHTS, "object centre 0.9, 1.05, 1.2 above the ground"),
    prop("body_hue", 8, "body hue 45°·level"),
    prop("body_saturation", 3, "body HSV saturation 0.25, 0.55, 0.85"),
    prop("body_value", 3, "body HSV value 0.5, 0.72, 0.94"),
    prop(
        "part_hue",
        8,
        "hue of the parts and distractors 45°·level, 90°-270° from the body hue",
    ),
    prop("part_saturation", 3, "HSV saturation of the parts 0.25, 0.55, 0.85"),
    prop("part_value", 3, "HSV value of the parts 0.5, 0.72, 0.94"),
    prop("background_hue", 8, "background hue 45°·level"),
    prop("background_saturation", 3, "background HSV saturation 0.25, 0.55, 0.85"),
    prop("background_value", 3, "background HSV value 0.5, 0.72, 0.94"),
    prop("light_elevation", LIGHT_ELEVATIONS, "sun elevation 25°, 45°, 65°"),
    prop(
        "light_azimuth",
        LIGHT_AZIMUTHS,
        "sun azimuth 45°·level, 0 = behind the camera",
    ),
    prop("distractors", DISTRACTOR_COUNTS, "loose parts lying on the ground"),
    prop("crest", 5, "crest type: 0 none, 1 cone, 2 ball, 3 plate, 4 ring"),
    prop("front", 5, "front piece type: 0 none, 1 cone, 2 ball, 3 plate, 4 ring"),
    prop("sides", 5, "side pieces' type: 0 none, 1 cone, 2 ball, 3 plate, 4 ring"),
    prop("tail", 5, "tail type: 0 none, 1 cone, 2 ball, 3 plate, 4 ring"),
];

/// The invisible control column, appended after [`PROPERTIES`].
pub const CONTROL: Property = prop(
    "control",
    CONTROL_LEVELS,
    "nothing: a negative control the renderer never reads (NR-Precision ≈ 0)",
);

const fn prop(name: &'static str, levels: u32, meaning: &'static str) -> Property {
    Property { name, levels, meaning }
}

/// The names of every manifest column: [`PROPERTIES`] then [`CONTROL`].
pub fn property_names() -> Vec<String> {
    PROPERTIES
        .iter()
        .chain([&CONTROL])
        .map(|p| p.name.to_string())
        .collect()
}

impl PartsParams {
    /// Draws every property but the class uniformly, independently of the class: the visible ones from
    /// `rng` (their order is part of the output format) and the control from `control_rng`.
    pub fn sample(class: usize, rng: &mut impl Rng, control_rng: &mut impl Rng) -> Self {
        let yaw = rng.random_range(0..YAWS);
        let tilt = rng.random_range(0..TILTS);
        let scale = rng.random_range(0..SCALES);
        let position_x = rng.random_range(0..POSITIONS_X);
        let height = rng.random_range(0..HEIGHTS);
        let body = ColourLevels::sample(rng);
        // The parts' hue is 90° to 270° away from the body's (2 to 6 steps of 45°), so that a
        // part always contrasts with the body it sits on; it is still uniform over the wheel
        // and independent of the class.
        let mut part_colour = ColourLevels::sample(rng);
        part_colour.hue = (body.hue + rng.random_range(2..=6)) % 8;
        let background = ColourLevels::sample(rng);
        let light_elevation = rng.random_range(0..LIGHT_ELEVATIONS);
        let light_azimuth = rng.random_range(0..LIGHT_AZIMUTHS);
        let count = rng.random_range(0..DISTRACTOR_COUNTS) as usize;
        let spots = sample(rng, DISTRACTOR_SPOTS.len(), count);
        let distractors = spots
            .iter()
            .map(|spot| Distractor {
                part: PartType::SHAPES[rng.random_range(0..PartType::SHAPES.len())],
                spot,
                yaw: rng.random_range(0.0..std::f32::consts::TAU),
            })
            .collect();
        Self {
            class,
            parts: class_table()[class],
            yaw,
            tilt,
            scale,
            position_x,
            height,
            body,
            part_colour,
            background,
            light_elevation,
            light_azimuth,
            distractors,
            control: control_rng.random_range(0..CONTROL_LEVELS),
        }
    }

    /// The level of every column of [`property_names`].
    pub fn levels(&self) -> Vec<u32> {
        let mut levels = vec![
            self.yaw,
            self.tilt,
            self.scale,
            self.position_x,
            self.height,
            self.body.hue,
            self.body.saturation,
            self.body.value,
            self.part_colour.hue,
            self.part_colour.saturation,
            self.part_colour.value,
            self.background.hue,
            self.background.saturation,
            self.background.value,
            self.light_elevation,
            self.light_azimuth,
            self.distractors.len() as u32,
        ];
        levels.extend(Slot::ALL.iter().map(|s| self.parts[s.index()].level()));
        levels.push(self.control);
        levels
    }

    /// Object yaw in radians about the vertical: 0 faces right (`+x`).
    pub fn yaw_radians(&self) -> f32 {
        const TURNS: [f32; 4] = [-30.0, -10.0, 10.0, 30.0];
        let facing = if self.yaw < 4 { 0.0 } else { 180.0 };
        (facing + TURNS[self.yaw as usize % 4]).to_radians()
    }

    /// Nose pitch in radians.
    pub fn tilt_radians(&self) -> f32 {
        (-15.0 + 15.0 * self.tilt as f32).to_radians()
    }

    /// Object scale factor.
    pub fn scale_factor(&self) -> f32 {
        0.85 + 0.1 * self.scale as f32
    }

    /// The object's centre in world coordinates.
    pub fn centre(&self) -> (f32, f32) {
        (-0.24 + 0.12 * self.position_x as f32, 0.9 + 0.15 * self.height as f32)
    }

    /// Light elevation in radians.
    pub fn light_elevation_radians(&self) -> f32 {
        (25.0 + 20.0 * self.light_elevation as f32).to_radians()
    }

    /// Light azimuth in radians, 0 = from behind the camera.
    pub fn light_azimuth_radians(&self) -> f32 {
        (self.light_azimuth as f32 * 360.0 / LIGHT_AZIMUTHS as f32).to_radians()
    }
}
