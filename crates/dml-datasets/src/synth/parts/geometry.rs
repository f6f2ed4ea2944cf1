//! The world of one parts image as the tracer sees it: the assembled object (body and attached
//! parts) floating above the ground, and the loose parts lying on it.
//!
//! Every surface point is labelled with what it belongs to ([`labels`](super::labels)): the
//! body, the slot of the attached part, or a distractor; the tracer's label image is then the
//! part mask of the image.

use super::labels::{LABEL_BODY, LABEL_DISTRACTOR, slot_label};
use super::scene::{DISTRACTOR_SPOTS, PartsParams};
use super::vocabulary::{OBJECT_RADIUS, PART_CENTRE, PART_RADIUS, PartType, Slot, body_distance};
use crate::synth::tracer::{Geometry, View, sphere_interval, srgb_to_linear};
use crate::synth::vec3::{Mat3, Vec3, v3};

/// Camera elevation above the horizontal, degrees.
const CAMERA_ELEVATION: f32 = 20.0;
/// Camera distance from the look-at point; the frame's half width there is 1.47 units.
const CAMERA_DISTANCE: f32 = 4.6;
/// The look-at point's height above the ground.
const TARGET_HEIGHT: f32 = 0.85;
/// Height of a distractor's part frame above the ground: every part lying on its side clears
/// the ground.
const DISTRACTOR_HEIGHT: f32 = 0.28;

/// One placed part: a type in a frame of its own.
struct Placed {
    part: PartType,
    /// Object (or world, for a distractor) → part frame rotation.
    to_part: Mat3,
    /// The part's base in object (or world) coordinates.
    base: Vec3,
    /// Its bounding sphere's centre in the same coordinates.
    centre: Vec3,
    label: u8,
}

impl Placed {
    fn new(part: PartType, base: Vec3, rotation: Mat3, label: u8) -> Self {
        Self {
            part,
            to_part: rotation.transpose(),
            base,
            centre: base + rotation.apply(PART_CENTRE),
            label,
        }
    }

    fn distance(&self, p: Vec3) -> f32 {
        self.part.distance(self.to_part.apply(p - self.base))
    }
}

/// The object and the distractors of one image, prepared for tracing.
pub(crate) struct PartsGeometry {
    /// World → object rotation.
    to_object: Mat3,
    /// The object's centre in world coordinates.
    centre: Vec3,
    scale: f32,
    /// The attached parts, in object coordinates (unscaled).
    attached: Vec<Placed>,
    /// The loose parts, in world coordinates scaled like the object.
    loose: Vec<Placed>,
    body_albedo: Vec3,
    part_albedo: Vec3,
}

impl PartsGeometry {
    /// The geometry of `params`, and its view.
    pub fn new(params: &PartsParams) -> (Self, View) {
        let orientation = Mat3::rotation_y(params.yaw_radians()).mul(&Mat3::rotation_z(params.tilt_radians()));
        let (x, height) = params.centre();
        let scale = params.scale_factor();
        let mut attached = Vec::new();
        for slot in Slot::ALL {
            let part = params.parts[slot.index()];
            if part == PartType::None {
                continue;
            }
            for &(base, rotation) in slot.attachments() {
                attached.push(Placed::new(part, base, rotation, slot_label(slot)));
            }
        }
        let loose = params
            .distractors
            .iter()
            .map(|d| {
                let (dx, dz) = DISTRACTOR_SPOTS[d.spot];
                // Lying on its side (outward horizontal), turned by its yaw, and centred on
                // its spot rather than based there.
                let rotation = Mat3::rotation_y(d.yaw).mul(&Mat3::rotation_z(std::f32::consts::FRAC_PI_2));
                let lift = v3(dx, DISTRACTOR_HEIGHT * scale, dz);
                let base = lift - rotation.apply(PART_CENTRE) * scale;
                Placed {
                    centre: lift,
                    ..Placed::new(d.part, base, rotation, LABEL_DISTRACTOR)
                }
            })
            .collect();
        let geometry = Self {
            to_object: orientation.transpose(),
            centre: v3(x, height, 0.0),
            scale,
            attached,
            loose,
            body_albedo: srgb_to_linear(params.body.srgb()),
            part_albedo: srgb_to_linear(params.part_colour.srgb()),
        };
        let view = View::new(
            v3(0.0, TARGET_HEIGHT, 0.0),
            CAMERA_ELEVATION.to_radians(),
            CAMERA_DISTANCE,
            params.light_elevation_radians(),
            params.light_azimuth_radians(),
            srgb_to_linear(params.background.srgb()),
        );
        (geometry, view)
    }

    /// `p` in the object's unscaled frame.
    fn object_point(&self, p: Vec3) -> Vec3 {
        self.to_object.apply(p - self.centre) * (1.0 / self.scale)
    }

    /// A loose part's distance, in world units: its frame is scaled like the object's.
    fn loose_distance(&self, part: &Placed, p: Vec3) -> f32 {
        part.part
            .distance(part.to_part.apply(p - part.base) * (1.0 / self.scale))
            * self.scale
    }

    /// The distance to the object (world units) and the label of its nearest component.
    fn object_distance(&self, p: Vec3) -> (f32, u8) {
        let q = self.object_point(p);
        let mut best = (body_distance(q), LABEL_BODY);
        for part in &self.attached {
            // The bounding sphere is a lower bound: a part that cannot beat the best so far
            // costs no distance evaluation.
            if (q - part.centre).length() - PART_RADIUS < best.0 {
                let d = part.distance(q);
                if d < best.0 {
                    best = (d, part.label);
                }
            }
        }
        (best.0 * self.scale, best.1)
    }

    /// The distance to everything and the label of the nearest component.
    fn nearest(&self, p: Vec3) -> (f32, u8) {
        let mut best = self.object_distance(p);
        for part in &self.loose {
            let d = self.loose_distance(part, p);
            if d < best.0 {
                best = (d, part.label);
            }
        }
        best
    }

    /// Every bounding sphere: the object's, then each loose part's (world units).
    fn spheres(&self) -> impl Iterator<Item = (Vec3, f32)> + '_ {
        std::iter::once((self.centre, OBJECT_RADIUS * self.scale))
            .chain(self.loose.iter().map(|part| (part.centre, PART_RADIUS * self.scale)))
    }
}

impl Geometry for PartsGeometry {
    fn distance(&self, p: Vec3) -> f32 {
        self.nearest(p).0
    }

    fn bounded_distance(&self, p: Vec3) -> f32 {
        let object = (p - self.centre).length() - OBJECT_RADIUS * self.scale;
        let mut d = if object > 0.5 {
            object
        } else {
            self.object_distance(p).0
        };
        for part in &self.loose {
            let bound = (p - part.centre).length() - PART_RADIUS * self.scale;
            d = d.min(if bound > 0.5 {
                bound
            } else {
                self.loose_distance(part, p)
            });
        }
        d
    }

    fn interval(&self, origin: Vec3, dir: Vec3) -> Option<(f32, f32)> {
        self.spheres()
            .filter_map(|(centre, radius)| sphere_interval(origin, dir, centre, radius))
            .reduce(|a, b| (a.0.min(b.0), a.1.max(b.1)))
    }

    fn top(&self) -> f32 {
        self.centre.y + (OBJECT_RADIUS + 0.5) * self.scale
    }

    fn material(&self, p: Vec3) -> (Vec3, u8) {
        let label = self.nearest(p).1;
        let albedo = if label == LABEL_BODY {
            self.body_albedo
        } else {
            self.part_albedo
        };
        (albedo, label)
    }
}
