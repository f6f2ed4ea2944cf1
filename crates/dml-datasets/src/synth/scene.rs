//! The independently chosen properties of one synthetic image and their physical meaning.
//!
//! Every property is a small set of levels (stored in the manifest as the level index
//! `0..levels`); the functions here turn a level into the angle, colour or distance the
//! renderer uses. Because each level is drawn uniformly and independently of the class
//! and of every other property, the manifest columns can be used as ground-truth
//! groupings for Normalized R-Precision (Kobs et al., ICCV 2021, section 4.1): a model
//! that clusters images by, say, `light_azimuth` has picked up the lighting direction.
//!
//! The last column, `control`, is a negative control: it is drawn like the others but
//! from a random stream of its own, and the renderer never reads it, so it changes no
//! pixel. No embedding can cluster by it, and its NR-Precision must come out ≈ 0; a
//! property analysis that reports more for it is measuring its own noise or a bug.

use rand::Rng;

use super::shapes::Shape;

/// One property column of the synthetic manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Property {
    /// The manifest column name.
    pub name: &'static str,
    /// The number of levels; values are `0..levels`.
    pub levels: u32,
    /// What the levels mean physically, for humans reading the code and reports.
    pub meaning: &'static str,
}

/// Number of object rotations: yaw in steps of 45°.
pub const ROTATIONS: u32 = 8;
/// Number of hues: steps of 45° on the colour wheel.
pub const HUES: u32 = 8;
/// Number of saturation levels.
pub const SATURATIONS: u32 = 3;
/// Number of brightness (HSV value) levels.
pub const VALUES: u32 = 3;
/// Number of light elevations.
pub const LIGHT_ELEVATIONS: u32 = 3;
/// Number of light azimuths: steps of 45°.
pub const LIGHT_AZIMUTHS: u32 = 8;
/// Number of camera heights.
pub const CAMERA_HEIGHTS: u32 = 4;
/// Number of levels of the invisible `control` property: as many as the rotation, the
/// hues and the light azimuth have, so that the control's groups are as large as those
/// of the visible 8-level properties it is compared with.
pub const CONTROL_LEVELS: u32 = 8;

/// The fixed tilt (degrees, about the camera's viewing axis before the yaw) that makes
/// the yaw visible on shapes that are symmetric about their own axis (cylinder, cone,
/// capsule, torus): after the tilt, yawing swings the axis around the vertical.
pub const TILT_DEGREES: f32 = 25.0;

/// Every property column, in manifest order.
pub const PROPERTIES: [Property; 11] = [
    Property {
        name: "rotation",
        levels: ROTATIONS,
        meaning: "object yaw 45°·level about the vertical, applied after a fixed 25° sideways tilt",
    },
    Property {
        name: "object_hue",
        levels: HUES,
        meaning: "object hue 45°·level (0 red, 1 orange, 2 yellow-green, 3 green, 4 cyan, 5 blue, 6 violet, 7 pink)",
    },
    Property {
        name: "object_saturation",
        levels: SATURATIONS,
        meaning: "object HSV saturation 0.25, 0.55, 0.85",
    },
    Property {
        name: "object_value",
        levels: VALUES,
        meaning: "object HSV value (brightness) 0.5, 0.72, 0.94",
    },
    Property {
        name: "background_hue",
        levels: HUES,
        meaning: "background hue 45°·level, same wheel as object_hue",
    },
    Property {
        name: "background_saturation",
        levels: SATURATIONS,
        meaning: "background HSV saturation 0.25, 0.55, 0.85",
    },
    Property {
        name: "background_value",
        levels: VALUES,
        meaning: "background HSV value 0.5, 0.72, 0.94",
    },
    Property {
        name: "light_elevation",
        levels: LIGHT_ELEVATIONS,
        meaning: "sun elevation above the ground 25°, 45°, 65°",
    },
    Property {
        name: "light_azimuth",
        levels: LIGHT_AZIMUTHS,
        meaning: "sun azimuth 45°·level counter-clockwise seen from above; 0 = behind the camera, 4 = behind the object",
    },
    Property {
        name: "camera_height",
        levels: CAMERA_HEIGHTS,
        meaning: "camera elevation 8°, 18°, 28°, 38° at distance 4.6, 5.0, 5.4, 5.8 (higher, farther, smaller object)",
    },
    Property {
        name: "control",
        levels: CONTROL_LEVELS,
        meaning: "nothing: a negative control drawn from its own stream that the renderer never reads (NR-Precision ≈ 0)",
    },
];

/// The names of the property columns, in manifest order.
pub fn property_names() -> Vec<String> {
    PROPERTIES.iter().map(|p| p.name.to_string()).collect()
}

/// An HSV colour given as level indices; see [`PROPERTIES`] for the levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ColourLevels {
    /// Hue level, `0..HUES`: hue 45°·level.
    pub hue: u32,
    /// Saturation level, `0..SATURATIONS`: saturation 0.25, 0.55 or 0.85.
    pub saturation: u32,
    /// Value level, `0..VALUES`: value 0.5, 0.72 or 0.94.
    pub value: u32,
}

impl ColourLevels {
    /// Draws each channel uniformly and independently.
    pub(crate) fn sample(rng: &mut impl Rng) -> Self {
        Self {
            hue: rng.random_range(0..HUES),
            saturation: rng.random_range(0..SATURATIONS),
            value: rng.random_range(0..VALUES),
        }
    }

    /// The colour in sRGB, each channel in `[0, 1]`.
    pub fn srgb(self) -> [f32; 3] {
        // Saturation and value never reach 0 or 1 so that even the palest colour keeps a
        // visible hue and the brightest one leaves headroom for the specular highlight.
        const SATURATION: [f32; SATURATIONS as usize] = [0.25, 0.55, 0.85];
        const VALUE: [f32; VALUES as usize] = [0.5, 0.72, 0.94];
        let s = SATURATION[self.saturation as usize % SATURATIONS as usize];
        let v = VALUE[self.value as usize % VALUES as usize];
        hsv_to_rgb(self.hue as f32 * 360.0 / HUES as f32, s, v)
    }
}

/// Everything that determines one image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SceneParams {
    /// The object class.
    pub shape: Shape,
    /// Rotation level, `0..ROTATIONS`: the object is tilted by [`TILT_DEGREES`] about the
    /// camera's viewing axis and then yawed by 45°·level about the vertical.
    pub rotation: u32,
    /// The object's base colour.
    pub object: ColourLevels,
    /// The colour of the ground and backdrop.
    pub background: ColourLevels,
    /// Light elevation level, `0..LIGHT_ELEVATIONS`: 25°, 45° or 65° above the ground;
    /// low light gives long shadows and dark tops, high light short shadows.
    pub light_elevation: u32,
    /// Light azimuth level, `0..LIGHT_AZIMUTHS`: 45°·level counter-clockwise seen from
    /// above, 0 meaning the light comes from behind the camera (front lighting) and 4 from
    /// behind the object (back lighting).
    pub light_azimuth: u32,
    /// Camera height level, `0..CAMERA_HEIGHTS`: elevation 8° + 10°·level and distance
    /// 4.6 + 0.4·level, so higher cameras look down more and see a smaller object.
    pub camera_height: u32,
    /// Control level, `0..CONTROL_LEVELS`: a property that changes no pixel. The renderer
    /// never reads it, so scenes that differ only here render to identical images and
    /// masks, and an embedding's NR-Precision for it measures chance alone.
    pub control: u32,
}

impl SceneParams {
    /// Draws every property except the class uniformly and independently: the visible
    /// ones from `rng` and the control from `control_rng`. The order of the draws from
    /// `rng` is part of the output format: changing it changes every dataset. The control
    /// has a generator of its own so that adding it left every visible draw, and with
    /// them every image, as it was; `control_rng` must therefore be independent of `rng`
    /// (in [`plan`](super::plan), a ChaCha8 stream under a key of its own).
    pub fn sample(shape: Shape, rng: &mut impl Rng, control_rng: &mut impl Rng) -> Self {
        let rotation = rng.random_range(0..ROTATIONS);
        let object = ColourLevels::sample(rng);
        let background = ColourLevels::sample(rng);
        let light_elevation = rng.random_range(0..LIGHT_ELEVATIONS);
        let light_azimuth = rng.random_range(0..LIGHT_AZIMUTHS);
        let camera_height = rng.random_range(0..CAMERA_HEIGHTS);
        let control = control_rng.random_range(0..CONTROL_LEVELS);
        Self {
            shape,
            rotation,
            object,
            background,
            light_elevation,
            light_azimuth,
            camera_height,
            control,
        }
    }

    /// The level of every property, aligned with [`PROPERTIES`].
    pub fn levels(&self) -> [u32; PROPERTIES.len()] {
        [
            self.rotation,
            self.object.hue,
            self.object.saturation,
            self.object.value,
            self.background.hue,
            self.background.saturation,
            self.background.value,
            self.light_elevation,
            self.light_azimuth,
            self.camera_height,
            self.control,
        ]
    }

    /// Object yaw in radians.
    pub fn yaw(&self) -> f32 {
        (self.rotation as f32 * 360.0 / ROTATIONS as f32).to_radians()
    }

    /// Light elevation above the ground in radians.
    pub fn light_elevation_radians(&self) -> f32 {
        (25.0 + 20.0 * self.light_elevation as f32).to_radians()
    }

    /// Light azimuth in radians, 0 = from behind the camera.
    pub fn light_azimuth_radians(&self) -> f32 {
        (self.light_azimuth as f32 * 360.0 / LIGHT_AZIMUTHS as f32).to_radians()
    }

    /// Camera elevation above the horizontal (radians) and distance to the look-at point.
    pub fn camera_pose(&self) -> (f32, f32) {
        let level = self.camera_height as f32;
        ((8.0 + 10.0 * level).to_radians(), 4.6 + 0.4 * level)
    }
}

/// Converts HSV (hue in degrees, saturation and value in `[0, 1]`) to RGB in `[0, 1]`.
pub fn hsv_to_rgb(hue: f32, s: f32, v: f32) -> [f32; 3] {
    let h = hue.rem_euclid(360.0) / 60.0;
    let c = v * s;
    let x = c * (1.0 - (h % 2.0 - 1.0).abs());
    let (r, g, b) = match h as u32 {
        0 => (c, x, 0.0),
        1 => (x, c, 0.0),
        2 => (0.0, c, x),
        3 => (0.0, x, c),
        4 => (x, 0.0, c),
        _ => (c, 0.0, x),
    };
    let m = v - c;
    [r + m, g + m, b + m]
}
