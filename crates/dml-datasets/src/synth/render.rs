//! A small sphere tracer for one object floating above a ground plane.
//!
//! The scene is a shape (a signed distance function) centred [`OBJECT_HEIGHT`] above an
//! infinite ground plane, lit by one directional "sun" plus a sky/ground ambient term.
//! The ground and the sky share the background colour, so every background pixel that
//! is neither in shadow nor occluded has exactly that colour; the soft shadow and a
//! contact darkening under the object make the object look like it sits in space.
//!
//! Primary rays are traced once per pixel; pixels on the silhouette (where the hit/miss
//! status differs from a neighbour) are re-traced with four sub-samples, which removes
//! staircase edges at a fraction of the cost of full supersampling.
//!
//! The hit/miss status of the pixel centres is also the object mask
//! ([`render_with_mask`]): it is known anyway, so the mask costs no extra ray.

use image::{GrayImage, RgbImage};

use super::scene::{SceneParams, TILT_DEGREES};
use super::shapes::{BOUNDING_RADIUS, Shape};
use super::vec3::{Mat3, Vec3, v3};

/// Height of the object's centre above the ground; the gap below the bounding sphere
/// keeps tilted shapes from cutting into the ground.
pub const OBJECT_HEIGHT: f32 = BOUNDING_RADIUS + 0.15;

/// Tangent of half the vertical field of view (about 35° in total).
const TAN_HALF_FOV: f32 = 0.32;

/// Maximum sphere-tracing steps for primary rays.
const MAX_STEPS: usize = 96;

/// Maximum steps of a shadow ray.
const MAX_SHADOW_STEPS: usize = 48;

/// Penumbra sharpness: larger values give harder shadows.
const PENUMBRA: f32 = 10.0;

/// The scene of one image in world coordinates, prepared for fast tracing.
struct Scene {
    shape: Shape,
    /// World → object rotation (the inverse of the object's orientation).
    to_object: Mat3,
    centre: Vec3,
    camera: Vec3,
    forward: Vec3,
    right: Vec3,
    up: Vec3,
    /// Unit vector towards the sun.
    light: Vec3,
    /// Linear-light object albedo.
    albedo: Vec3,
    /// Linear-light background colour.
    background: Vec3,
}

impl Scene {
    fn new(params: &SceneParams) -> Self {
        let orientation = Mat3::rotation_y(params.yaw()).mul(&Mat3::rotation_z(TILT_DEGREES.to_radians()));
        let centre = v3(0.0, OBJECT_HEIGHT, 0.0);
        let (elevation, distance) = params.camera_pose();
        // Looking a little below the object's centre keeps part of the ground shadow in
        // frame; with this offset every shape, in every pose and from every camera height,
        // stays at least 6 pixels (of 64) inside the top and the sides of the image.
        let target = v3(0.0, OBJECT_HEIGHT - 0.2, 0.0);
        let camera = target + v3(0.0, elevation.sin(), elevation.cos()) * distance;
        let forward = (target - camera).normalize();
        let right = forward.cross(v3(0.0, 1.0, 0.0)).normalize();
        let up = right.cross(forward);
        let (le, la) = (params.light_elevation_radians(), params.light_azimuth_radians());
        // Azimuth 0 points at the camera (which sits on +z), so the sun is behind it.
        let light = v3(le.cos() * la.sin(), le.sin(), le.cos() * la.cos());
        Self {
            shape: params.shape,
            to_object: orientation.transpose(),
            centre,
            camera,
            forward,
            right,
            up,
            light,
            albedo: srgb_to_linear(params.object.srgb()),
            background: srgb_to_linear(params.background.srgb()),
        }
    }

    /// Exact signed distance to the object (or a lower bound of it).
    fn object_distance(&self, p: Vec3) -> f32 {
        self.shape.distance(self.to_object.apply(p - self.centre))
    }

    /// A cheap lower bound far from the object, the shape's distance near it: far-away
    /// points only need to know that the object is not close.
    fn bounded_distance(&self, p: Vec3) -> f32 {
        let d = (p - self.centre).length() - BOUNDING_RADIUS;
        if d > 0.5 { d } else { self.object_distance(p) }
    }

    /// Traces a primary ray; returns the hit distance, if it hits the object.
    fn trace(&self, dir: Vec3) -> Option<f32> {
        let (t0, t1) = sphere_interval(self.camera, dir, self.centre, BOUNDING_RADIUS)?;
        let mut t = t0.max(0.0);
        for _ in 0..MAX_STEPS {
            let d = self.object_distance(self.camera + dir * t);
            if d < 2e-4 * t {
                return Some(t);
            }
            t += d;
            if t > t1 {
                return None;
            }
        }
        None
    }

    /// Surface normal by central differences on a tetrahedron (four distance calls).
    fn normal(&self, p: Vec3) -> Vec3 {
        const E: f32 = 1e-3;
        let k = [
            v3(1.0, -1.0, -1.0),
            v3(-1.0, -1.0, 1.0),
            v3(-1.0, 1.0, -1.0),
            v3(1.0, 1.0, 1.0),
        ];
        let mut n = v3(0.0, 0.0, 0.0);
        for k in k {
            n = n + k * self.object_distance(p + k * E);
        }
        n.normalize()
    }

    /// Soft shadow towards the sun from `origin`: 1 fully lit, 0 fully shadowed.
    fn soft_shadow(&self, origin: Vec3, start: f32) -> f32 {
        let mut res: f32 = 1.0;
        let mut t = start;
        let top = OBJECT_HEIGHT + BOUNDING_RADIUS + 0.5;
        for _ in 0..MAX_SHADOW_STEPS {
            let p = origin + self.light * t;
            if p.y > top {
                break;
            }
            let h = self.bounded_distance(p);
            res = res.min(PENUMBRA * h / t);
            if res < 1e-3 {
                return 0.0;
            }
            // Small steps near the object sample the penumbra well; far away the bound is
            // a plain sphere distance, so full steps are safe and cheap.
            t += if h > 0.5 { h } else { h.clamp(0.01, 0.12) };
        }
        let res = res.clamp(0.0, 1.0);
        res * res * (3.0 - 2.0 * res)
    }

    /// Ambient occlusion of a surface point from a few samples along its normal.
    fn occlusion(&self, p: Vec3, n: Vec3) -> f32 {
        let mut occ = 0.0;
        let mut weight = 1.0;
        for i in 1..=4 {
            let h = 0.06 * i as f32;
            occ += (h - self.bounded_distance(p + n * h)).max(0.0) * weight;
            weight *= 0.7;
        }
        (1.0 - 2.5 * occ).clamp(0.0, 1.0)
    }

    /// The linear-light colour seen along `dir`, and whether the ray hit the object.
    fn shade(&self, dir: Vec3) -> (Vec3, bool) {
        if let Some(t) = self.trace(dir) {
            let p = self.camera + dir * t;
            let n = self.normal(p);
            let n_dot_l = n.dot(self.light);
            let direct = if n_dot_l > 0.0 {
                n_dot_l * self.soft_shadow(p + n * 2e-3, 0.02)
            } else {
                0.0
            };
            let ao = self.occlusion(p, n);
            // Sky light from above, light bounced off the coloured ground from below.
            let sky = 0.22 * (0.6 + 0.4 * n.y) * ao;
            let bounce = self.background * (0.18 * (-n.y).max(0.0) * ao);
            let half = (self.light - dir).normalize();
            let specular = 0.35 * n.dot(half).max(0.0).powi(40) * direct;
            let colour =
                self.albedo.hadamard(v3(1.0, 1.0, 1.0) * (0.85 * direct + sky) + bounce) + v3(1.0, 1.0, 1.0) * specular;
            return (colour, true);
        }
        if dir.y >= 0.0 {
            return (self.background, false);
        }
        let t = -self.camera.y / dir.y;
        let p = self.camera + dir * t;
        let shadow = self.soft_shadow(p, 0.05);
        // Contact darkening: the ground right under the object sees less of the sky. The
        // exact distance is used (one call) because the cheap bound would draw a ring.
        let h = self.object_distance(p + v3(0.0, 0.35, 0.0));
        let ao = (h / 0.9).clamp(0.0, 1.0);
        // Written as 1 − losses so that an unoccluded, lit point gets exactly the
        // background colour: the background is then a single colour a test can detect.
        let factor = 1.0 - 0.65 * (1.0 - shadow) - 0.25 * (1.0 - ao);
        (self.background * factor.max(0.0), false)
    }

    /// The direction of the ray through image position (`x`, `y`) in pixels.
    fn ray(&self, x: f32, y: f32, size: f32) -> Vec3 {
        let u = (2.0 * x / size - 1.0) * TAN_HALF_FOV;
        let v = (1.0 - 2.0 * y / size) * TAN_HALF_FOV;
        (self.forward + self.right * u + self.up * v).normalize()
    }
}

/// Mask value of a pixel whose centre sees the object.
pub const MASK_OBJECT: u8 = 255;
/// Mask value of a pixel whose centre sees the background (ground, sky or shadow).
pub const MASK_BACKGROUND: u8 = 0;

/// Renders one square RGB image of `size`×`size` pixels.
///
/// The same image as [`render_with_mask`] returns, without the mask.
pub fn render(params: &SceneParams, size: u32) -> RgbImage {
    render_with_mask(params, size).0
}

/// Renders one square RGB image of `size`×`size` pixels and its object mask.
///
/// The mask is an 8-bit grayscale image of the same size, [`MASK_OBJECT`] (255) where the
/// primary ray through the pixel's *centre* hits the object and [`MASK_BACKGROUND`] (0)
/// where it sees the ground, the sky or a shadow. The anti-aliasing sub-samples of
/// silhouette pixels do not enter it: the centre sample is the one sample every pixel
/// has, so the mask is exactly the hit/miss status that decides which pixels get
/// sub-sampled (a pixel is re-sampled when its mask value differs from a 4-neighbour's),
/// and a pixel whose mask agrees with its four neighbours shows the unblended colour of
/// what the mask says it sees.
pub fn render_with_mask(params: &SceneParams, size: u32) -> (RgbImage, GrayImage) {
    let scene = Scene::new(params);
    let n = size as usize;
    let s = size as f32;
    let mut colours = Vec::with_capacity(n * n);
    let mut hits = Vec::with_capacity(n * n);
    for y in 0..n {
        for x in 0..n {
            let (c, hit) = scene.shade(scene.ray(x as f32 + 0.5, y as f32 + 0.5, s));
            colours.push(c);
            hits.push(hit);
        }
    }
    // Sub-samples on a rotated grid resolve near-horizontal and near-vertical edges
    // better than an axis-aligned 2×2 grid.
    const OFFSETS: [(f32, f32); 4] = [(0.375, 0.125), (0.875, 0.375), (0.625, 0.875), (0.125, 0.625)];
    let mut image = RgbImage::new(size, size);
    for y in 0..n {
        for x in 0..n {
            let i = y * n + x;
            let edge = (x > 0 && hits[i - 1] != hits[i])
                || (x + 1 < n && hits[i + 1] != hits[i])
                || (y > 0 && hits[i - n] != hits[i])
                || (y + 1 < n && hits[i + n] != hits[i]);
            let colour = if edge {
                let mut sum = v3(0.0, 0.0, 0.0);
                for (dx, dy) in OFFSETS {
                    sum = sum + scene.shade(scene.ray(x as f32 + dx, y as f32 + dy, s)).0;
                }
                sum * 0.25
            } else {
                colours[i]
            };
            image.put_pixel(x as u32, y as u32, image::Rgb(linear_to_srgb8(colour)));
        }
    }
    let mask = hits
        .iter()
        .map(|&hit| if hit { MASK_OBJECT } else { MASK_BACKGROUND })
        .collect();
    // The buffer holds exactly `size`×`size` values, one per pixel in row order.
    let mask = GrayImage::from_raw(size, size, mask).expect("one mask value per pixel");
    (image, mask)
}

/// The entry and exit distances of a ray through a sphere, if it meets the sphere in
/// front of the origin.
fn sphere_interval(origin: Vec3, dir: Vec3, centre: Vec3, radius: f32) -> Option<(f32, f32)> {
    let oc = origin - centre;
    let b = oc.dot(dir);
    let c = oc.dot(oc) - radius * radius;
    let disc = b * b - c;
    if disc < 0.0 {
        return None;
    }
    let root = disc.sqrt();
    let (t0, t1) = (-b - root, -b + root);
    (t1 > 0.0).then_some((t0, t1))
}

/// sRGB-encoded `[0, 1]` channels to linear light.
fn srgb_to_linear(c: [f32; 3]) -> Vec3 {
    let f = |c: f32| {
        if c <= 0.04045 {
            c / 12.92
        } else {
            ((c + 0.055) / 1.055).powf(2.4)
        }
    };
    v3(f(c[0]), f(c[1]), f(c[2]))
}

/// Linear light to 8-bit sRGB, clamping overexposed highlights.
fn linear_to_srgb8(c: Vec3) -> [u8; 3] {
    let f = |c: f32| {
        let c = c.clamp(0.0, 1.0);
        let s = if c <= 0.003_130_8 {
            c * 12.92
        } else {
            1.055 * c.powf(1.0 / 2.4) - 0.055
        };
        (s * 255.0 + 0.5) as u8
    };
    [f(c.x), f(c.y), f(c.z)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::plan;

    /// The mask is defined by the pixel centre's primary ray alone: it must equal an
    /// independent trace of that ray, also on silhouette pixels, where the image blends
    /// four sub-samples and a majority-of-samples mask could differ.
    #[test]
    fn mask_is_the_pixel_centre_hit() {
        let size = 24;
        let mut silhouette_pixels = 0;
        for params in plan(3, 10) {
            let (image, mask) = render_with_mask(&params, size);
            assert_eq!(image.dimensions(), mask.dimensions());
            let scene = Scene::new(&params);
            let s = size as f32;
            for (x, y, m) in mask.enumerate_pixels() {
                let hit = scene.trace(scene.ray(x as f32 + 0.5, y as f32 + 0.5, s)).is_some();
                let expected = if hit { MASK_OBJECT } else { MASK_BACKGROUND };
                assert_eq!(m.0[0], expected, "{:?}: pixel ({x}, {y})", params.shape);
                let sub_hits = [(0.375, 0.125), (0.875, 0.375), (0.625, 0.875), (0.125, 0.625)]
                    .iter()
                    .filter(|(dx, dy)| scene.trace(scene.ray(x as f32 + dx, y as f32 + dy, s)).is_some())
                    .count();
                if sub_hits != 0 && sub_hits != 4 {
                    silhouette_pixels += 1;
                }
            }
        }
        // The check above must have covered partly covered pixels, or it proves nothing
        // about the choice of the centre sample.
        assert!(silhouette_pixels > 100, "only {silhouette_pixels} silhouette pixels");
    }
}
