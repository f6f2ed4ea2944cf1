//! The parts an object is assembled from: the slots of the body and the interchangeable part
//! types, as signed distance functions.
//!
//! A part type is defined once, in a frame of its own whose origin is the part's base and
//! whose `+y` axis points outward (away from the body); a slot says where on the body that base
//! sits and where outward points. The same types fill every slot, so what tells two classes
//! apart is *which* type sits *where*, as a beak tells two birds apart only on the head.

use std::fmt;

use crate::synth::shapes::{capped_cone, cylinder, ellipsoid, round_box};
use crate::synth::vec3::{Mat3, Vec3, v3};

/// Radius of a sphere around a part's [`PART_CENTRE`] that contains every part type.
pub const PART_RADIUS: f32 = 0.4;
/// The centre of every part type's bounding sphere, in the part's own frame.
pub const PART_CENTRE: Vec3 = v3(0.0, 0.3, 0.0);
/// Semi-axes of the body, an ellipsoid elongated along the object's `x` (front) axis.
pub const BODY_AXES: Vec3 = v3(0.55, 0.35, 0.35);
/// Radius of a sphere around the object's origin that contains the body and every part in
/// every slot.
pub const OBJECT_RADIUS: f32 = 1.2;

/// A place on the body where a part can sit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Slot {
    /// On top of the body, a little forward of its middle; points up.
    Crest,
    /// At the front end of the body; points forward (`+x`).
    Front,
    /// A pair, one on each flank (`±z`), behind the middle, raised 50° above the horizontal:
    /// wing-like. Both sides always carry the same type.
    Sides,
    /// At the back end of the body; points backward (`−x`).
    Tail,
}

impl Slot {
    /// Every slot, in manifest column order (the class name lists the types in this order).
    pub const ALL: [Slot; 4] = [Slot::Crest, Slot::Front, Slot::Sides, Slot::Tail];

    /// The manifest column and command-line name of the slot.
    pub fn name(self) -> &'static str {
        match self {
            Slot::Crest => "crest",
            Slot::Front => "front",
            Slot::Sides => "sides",
            Slot::Tail => "tail",
        }
    }

    /// The slot's index in [`Slot::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// The slot named `name`, if any.
    pub fn parse(name: &str) -> Option<Slot> {
        Slot::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Where the parts of this slot sit: for each (one, or two for [`Slot::Sides`]) the base
    /// point in the object frame and the rotation from the part's frame to the object frame.
    pub fn attachments(self) -> &'static [(Vec3, Mat3)] {
        // Built once: rotations are not `const fn`.
        static ATTACHMENTS: std::sync::OnceLock<[Vec<(Vec3, Mat3)>; 4]> = std::sync::OnceLock::new();
        let all = ATTACHMENTS.get_or_init(|| {
            let quarter = std::f32::consts::FRAC_PI_2;
            let wing = 40f32.to_radians();
            [
                vec![(v3(0.1, 0.29, 0.0), Mat3::rotation_z(0.0))],
                vec![(v3(0.47, 0.05, 0.0), Mat3::rotation_z(-quarter))],
                vec![
                    (v3(-0.14, 0.09, 0.26), Mat3::rotation_x(wing)),
                    (v3(-0.14, 0.09, -0.26), Mat3::rotation_x(-wing)),
                ],
                vec![(v3(-0.47, 0.05, 0.0), Mat3::rotation_z(quarter))],
            ]
        });
        &all[self.index()]
    }
}

impl fmt::Display for Slot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What fills a slot: nothing, or one of four part shapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PartType {
    /// The slot is empty.
    None,
    /// A cone, base radius 0.22 and length 0.6: a spike, a beak, a horn.
    Cone,
    /// A ball of radius 0.2 on a short stalk: a knob.
    Ball,
    /// A thin plate 0.52 wide, 0.5 long and 0.1 thick with rounded edges: a fin.
    Plate,
    /// A ring of radius 0.2 and tube 0.065 standing on the base: a loop.
    Ring,
}

impl PartType {
    /// Every type, indexed by its level in the manifest's slot columns.
    pub const ALL: [PartType; 5] = [
        PartType::None,
        PartType::Cone,
        PartType::Ball,
        PartType::Plate,
        PartType::Ring,
    ];

    /// The types that draw something (every type but [`PartType::None`]).
    pub const SHAPES: [PartType; 4] = [PartType::Cone, PartType::Ball, PartType::Plate, PartType::Ring];

    /// The name in class names, slot columns' documentation and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            PartType::None => "none",
            PartType::Cone => "cone",
            PartType::Ball => "ball",
            PartType::Plate => "plate",
            PartType::Ring => "ring",
        }
    }

    /// The level written to the slot's manifest column: the index in [`PartType::ALL`].
    pub fn level(self) -> u32 {
        self as u32
    }

    /// The type named `name`, if any.
    pub fn parse(name: &str) -> Option<PartType> {
        PartType::ALL.into_iter().find(|t| t.name() == name)
    }

    /// Signed distance (or a lower bound) from `p`, in the part's own frame (base at the
    /// origin, outward along `+y`), to the part; `+∞` for [`PartType::None`]. Every part lies
    /// within [`PART_RADIUS`] of [`PART_CENTRE`].
    pub fn distance(self, p: Vec3) -> f32 {
        match self {
            PartType::None => f32::INFINITY,
            PartType::Cone => capped_cone(p - v3(0.0, 0.3, 0.0), 0.3, 0.22, 0.0),
            PartType::Ball => {
                let ball = (p - v3(0.0, 0.38, 0.0)).length() - 0.2;
                let stalk = cylinder(p - v3(0.0, 0.1, 0.0), 0.07, 0.12);
                ball.min(stalk)
            }
            PartType::Plate => round_box(p - v3(0.0, 0.27, 0.0), v3(0.24, 0.23, 0.03), 0.02),
            PartType::Ring => {
                // A torus in the part's xy plane (axis along z), touching the base.
                let q = p - v3(0.0, 0.27, 0.0);
                (q.x.hypot(q.y) - 0.2).hypot(q.z) - 0.065
            }
        }
    }
}

impl fmt::Display for PartType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Signed distance from `p` (object frame) to the body.
pub fn body_distance(p: Vec3) -> f32 {
    ellipsoid(p, BODY_AXES)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Points on a spiral over the sphere of radius `r` around `centre`.
    fn sphere_points(centre: Vec3, r: f32) -> impl Iterator<Item = Vec3> {
        (0..2000).map(move |i| {
            let z = 1.0 - 2.0 * (i as f32 + 0.5) / 2000.0;
            let ring = (1.0 - z * z).sqrt();
            let a = i as f32 * 2.399_963;
            centre + v3(ring * a.cos(), z, ring * a.sin()) * r
        })
    }

    /// The tracer skips parts by their bounding spheres: a part reaching outside its sphere,
    /// or an attached part outside the object's, would be clipped.
    #[test]
    fn parts_fit_their_bounding_spheres() {
        for part in PartType::SHAPES {
            assert!(part.distance(PART_CENTRE) < 0.15, "{part}: no material near its centre");
            for p in sphere_points(PART_CENTRE, PART_RADIUS) {
                assert!(part.distance(p) > 0.0, "{part} reaches outside its sphere at {p:?}");
            }
        }
        for slot in Slot::ALL {
            for &(base, rotation) in slot.attachments() {
                let centre = base + rotation.apply(PART_CENTRE);
                assert!(
                    centre.length() + PART_RADIUS <= OBJECT_RADIUS,
                    "{slot}: parts reach {} from the origin",
                    centre.length() + PART_RADIUS
                );
                // The base touches the body, so a part is attached, not floating.
                assert!(body_distance(base) < 0.05, "{slot}: base {base:?} off the body");
            }
        }
    }

    #[test]
    fn names_round_trip() {
        for slot in Slot::ALL {
            assert_eq!(Slot::parse(slot.name()), Some(slot));
        }
        for part in PartType::ALL {
            assert_eq!(PartType::parse(part.name()), Some(part));
            assert_eq!(PartType::ALL[part.level() as usize], part);
        }
        assert_eq!(Slot::parse("wing"), None);
        assert_eq!(PartType::parse("Cone"), None);
    }
}
