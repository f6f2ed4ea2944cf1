//! The ten object classes as signed distance functions.
//!
//! Every shape is centred at the origin of its own frame, has its main axis along `y` and
//! fits inside [`BOUNDING_RADIUS`], so that the renderer can skip the expensive distance
//! function for rays that cannot come near the object. Sizes are chosen so that the
//! shapes cover similar image areas: apparent size alone should not give the class away.

use super::vec3::{Vec3, v3};

/// Radius of a sphere around the origin that contains every shape.
pub const BOUNDING_RADIUS: f32 = 1.1;

/// The object classes; the class id of a shape is its index in [`Shape::ALL`].
///
/// The first five are the training classes, the last five the test classes. Each test
/// shape has a relative among the training shapes (octahedron–cube, capsule–cylinder,
/// hexagonal prism–cylinder, pyramid–cone, ellipsoid–sphere), so that a zero-shot
/// embedding has to generalise shape cues rather than memorise silhouettes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Shape {
    /// A sphere of radius 0.8.
    Sphere,
    /// A cube with edge length 1.16 and slightly rounded edges.
    Cube,
    /// A cylinder of radius 0.55 and height 1.3 with slightly rounded rims.
    Cylinder,
    /// A cone of base radius 0.7 and height 1.5, apex up in the object frame.
    Cone,
    /// A ring torus with tube centre radius 0.64 and tube radius 0.3.
    Torus,
    /// A regular octahedron whose vertices lie 1.0 from the centre.
    Octahedron,
    /// A capsule: a cylinder of radius 0.42 and length 1.0 capped by hemispheres.
    Capsule,
    /// A hexagonal prism with apothem 0.55 and height 1.2.
    HexagonalPrism,
    /// A square pyramid with base edge 1.35 and height 1.35.
    SquarePyramid,
    /// An ellipsoid with semi-axes 0.95, 0.5 and 0.62.
    Ellipsoid,
}

impl Shape {
    /// Every shape, indexed by class id.
    pub const ALL: [Shape; 10] = [
        Shape::Sphere,
        Shape::Cube,
        Shape::Cylinder,
        Shape::Cone,
        Shape::Torus,
        Shape::Octahedron,
        Shape::Capsule,
        Shape::HexagonalPrism,
        Shape::SquarePyramid,
        Shape::Ellipsoid,
    ];

    /// The class name written to the manifest.
    pub fn name(self) -> &'static str {
        match self {
            Shape::Sphere => "sphere",
            Shape::Cube => "cube",
            Shape::Cylinder => "cylinder",
            Shape::Cone => "cone",
            Shape::Torus => "torus",
            Shape::Octahedron => "octahedron",
            Shape::Capsule => "capsule",
            Shape::HexagonalPrism => "hexagonal_prism",
            Shape::SquarePyramid => "square_pyramid",
            Shape::Ellipsoid => "ellipsoid",
        }
    }

    /// The class id written to the manifest: the index in [`Shape::ALL`].
    pub fn class_id(self) -> u32 {
        self as u32
    }

    /// Signed distance (or a lower bound of it) from `p`, in the object frame, to the
    /// surface: negative inside, positive outside.
    pub fn distance(self, p: Vec3) -> f32 {
        match self {
            Shape::Sphere => p.length() - 0.8,
            Shape::Cube => round_box(p, v3(0.54, 0.54, 0.54), 0.04),
            Shape::Cylinder => cylinder(p, 0.51, 0.61) - 0.04,
            Shape::Cone => capped_cone(p, 0.75, 0.7, 0.0),
            Shape::Torus => {
                let q = (p.x.hypot(p.z) - 0.64, p.y);
                q.0.hypot(q.1) - 0.3
            }
            Shape::Octahedron => octahedron(p, 1.0),
            Shape::Capsule => {
                let y = p.y - p.y.clamp(-0.5, 0.5);
                v3(p.x, y, p.z).length() - 0.42
            }
            // The prism formula has its axis along z; swapping y and z stands it upright.
            Shape::HexagonalPrism => hex_prism(v3(p.x, p.z, p.y), 0.55, 0.6),
            Shape::SquarePyramid => {
                // The unit pyramid has its base at y = 0. Scaled by 1.35, its base is moved
                // 0.338 below the origin, which puts the origin at the centre of the sphere
                // through the apex and the four base corners (radius 1.01): the pyramid then
                // fits the bounding sphere with the least room wasted.
                let s = 1.35;
                let q = v3(p.x, p.y + 0.338, p.z) * (1.0 / s);
                pyramid(q, 1.0) * s
            }
            Shape::Ellipsoid => ellipsoid(p, v3(0.95, 0.5, 0.62)),
        }
    }
}

/// Exact distance to a box with half extents `b` whose edges are rounded by `r`.
pub(crate) fn round_box(p: Vec3, b: Vec3, r: f32) -> f32 {
    let q = p.abs() - b;
    q.max(0.0).length() + q.x.max(q.y.max(q.z)).min(0.0) - r
}

/// Exact distance to an upright cylinder of radius `r` and half height `h`.
pub(crate) fn cylinder(p: Vec3, r: f32, h: f32) -> f32 {
    let dx = p.x.hypot(p.z) - r;
    let dy = p.y.abs() - h;
    dx.max(dy).min(0.0) + dx.max(0.0).hypot(dy.max(0.0))
}

/// Exact distance to an upright truncated cone of half height `h`, bottom radius `r1`
/// and top radius `r2` (after Inigo Quilez's `sdCappedCone`).
pub(crate) fn capped_cone(p: Vec3, h: f32, r1: f32, r2: f32) -> f32 {
    let q = (p.x.hypot(p.z), p.y);
    let k1 = (r2, h);
    let k2 = (r2 - r1, 2.0 * h);
    let ca = (q.0 - q.0.min(if q.1 < 0.0 { r1 } else { r2 }), q.1.abs() - h);
    let along = ((k1.0 - q.0) * k2.0 + (k1.1 - q.1) * k2.1) / (k2.0 * k2.0 + k2.1 * k2.1);
    let t = along.clamp(0.0, 1.0);
    let cb = (q.0 - k1.0 + k2.0 * t, q.1 - k1.1 + k2.1 * t);
    let s = if cb.0 < 0.0 && ca.1 < 0.0 { -1.0 } else { 1.0 };
    s * (ca.0 * ca.0 + ca.1 * ca.1).min(cb.0 * cb.0 + cb.1 * cb.1).sqrt()
}

/// Exact distance to a regular octahedron with vertices at distance `s` on the axes.
fn octahedron(p: Vec3, s: f32) -> f32 {
    let p = p.abs();
    let m = p.x + p.y + p.z - s;
    let q = if 3.0 * p.x < m {
        p
    } else if 3.0 * p.y < m {
        v3(p.y, p.z, p.x)
    } else if 3.0 * p.z < m {
        v3(p.z, p.x, p.y)
    } else {
        return m * 0.577_350_26;
    };
    let k = (0.5 * (q.z - q.y + s)).clamp(0.0, s);
    v3(q.x, q.y - s + k, q.z - k).length()
}

/// Exact distance to a hexagonal prism along z with apothem `h` and half length `len`.
fn hex_prism(p: Vec3, h: f32, len: f32) -> f32 {
    const K: (f32, f32, f32) = (-0.866_025_4, 0.5, 0.577_350_26);
    let mut p = p.abs();
    let fold = 2.0 * (K.0 * p.x + K.1 * p.y).min(0.0);
    p.x -= fold * K.0;
    p.y -= fold * K.1;
    let cx = p.x.clamp(-K.2 * h, K.2 * h);
    let dx = (p.x - cx).hypot(p.y - h) * (p.y - h).signum();
    let dz = p.z - len;
    dx.max(dz).min(0.0) + dx.max(0.0).hypot(dz.max(0.0))
}

/// Exact distance to a square pyramid with unit base centred on the origin in the
/// `y = 0` plane and apex at height `h` (after Inigo Quilez's `sdPyramid`).
fn pyramid(p: Vec3, h: f32) -> f32 {
    let m2 = h * h + 0.25;
    let (mut px, py, mut pz) = (p.x.abs(), p.y, p.z.abs());
    if pz > px {
        std::mem::swap(&mut px, &mut pz);
    }
    px -= 0.5;
    pz -= 0.5;
    let q = v3(pz, h * py - 0.5 * px, h * px + 0.5 * py);
    let s = (-q.x).max(0.0);
    let t = ((q.y - 0.5 * pz) / (m2 + 0.25)).clamp(0.0, 1.0);
    let a = m2 * (q.x + s) * (q.x + s) + q.y * q.y;
    let b = m2 * (q.x + 0.5 * t) * (q.x + 0.5 * t) + (q.y - m2 * t) * (q.y - m2 * t);
    let d2 = if q.y.min(-q.x * m2 - q.y * 0.5) > 0.0 {
        0.0
    } else {
        a.min(b)
    };
    ((d2 + q.z * q.z) / m2).sqrt() * q.z.max(-py).signum()
}

/// A distance bound for an ellipsoid with semi-axes `r`; exact on the surface and good
/// enough for sphere tracing elsewhere.
pub(crate) fn ellipsoid(p: Vec3, r: Vec3) -> f32 {
    let k0 = v3(p.x / r.x, p.y / r.y, p.z / r.z).length();
    let k1 = v3(p.x / (r.x * r.x), p.y / (r.y * r.y), p.z / (r.z * r.z)).length();
    if k1 <= f32::EPSILON {
        // At the very centre the formula is 0/0; any negative value is a valid answer.
        return -r.x.min(r.y).min(r.z);
    }
    k0 * (k0 - 1.0) / k1
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every shape must lie inside the bounding sphere, or the renderer would clip it.
    #[test]
    fn shapes_fit_in_bounding_sphere_and_have_an_inside() {
        for shape in Shape::ALL {
            // The torus has a hole at its centre; its tube passes through x = 0.64.
            let inside = if shape == Shape::Torus {
                v3(0.64, 0.0, 0.0)
            } else {
                v3(0.0, 0.0, 0.0)
            };
            assert!(shape.distance(inside) < 0.0, "{shape:?} does not contain {inside:?}");
            for i in 0..2000 {
                // A deterministic spiral of directions on the sphere.
                let z = 1.0 - 2.0 * (i as f32 + 0.5) / 2000.0;
                let r = (1.0 - z * z).sqrt();
                let a = i as f32 * 2.399_963;
                let dir = v3(r * a.cos(), z, r * a.sin());
                let d = shape.distance(dir * BOUNDING_RADIUS);
                assert!(d > 0.0, "{shape:?} reaches outside the bounding sphere towards {dir:?}");
            }
        }
    }
}
