//! A small sphere tracer for objects above a ground plane, shared by the shapes set and the
//! parts set.
//!
//! A scene is a [`Geometry`] (a signed distance function with a material per surface point)
//! above an infinite ground plane, lit by one directional "sun" plus a sky/ground ambient term.
//! The ground and the sky share the background colour, so every background pixel that is
//! neither in shadow nor occluded has exactly that colour; the soft shadow and a contact
//! darkening under the geometry make it look like it sits in space.
//!
//! Primary rays are traced once per pixel; pixels on a label boundary (where the label of the
//! pixel centre differs from a 4-neighbour's) are re-traced with four sub-samples, which
//! removes staircase edges at a fraction of the cost of full supersampling.
//!
//! The label of every pixel centre is known anyway, so the label image costs no extra ray:
//! it is the object mask of the shapes set and the part mask of the parts set.

use image::{GrayImage, RgbImage};

use super::vec3::{Vec3, v3};

/// Tangent of half the vertical field of view (about 35° in total).
pub(crate) const TAN_HALF_FOV: f32 = 0.32;

/// Maximum sphere-tracing steps for primary rays.
const MAX_STEPS: usize = 96;

/// Maximum steps of a shadow ray.
const MAX_SHADOW_STEPS: usize = 48;

/// Penumbra sharpness: larger values give harder shadows.
const PENUMBRA: f32 = 10.0;

/// Sub-sample offsets of boundary pixels, on a rotated grid, which resolves near-horizontal
/// and near-vertical edges better than an axis-aligned 2×2 grid.
pub(crate) const SUB_SAMPLES: [(f32, f32); 4] = [(0.375, 0.125), (0.875, 0.375), (0.625, 0.875), (0.125, 0.625)];

/// What a scene holds above the ground, as the tracer sees it.
pub(crate) trait Geometry {
    /// Signed distance from `p` (world coordinates) to the nearest surface, or a lower bound
    /// of it.
    fn distance(&self, p: Vec3) -> f32;
    /// A cheap lower bound of [`Geometry::distance`] far from every surface, the distance
    /// itself near one.
    fn bounded_distance(&self, p: Vec3) -> f32;
    /// The interval of ray parameters `t` in which the ray `origin + t·dir` can hit the
    /// geometry (entry, exit), or `None` when it cannot.
    fn interval(&self, origin: Vec3, dir: Vec3) -> Option<(f32, f32)>;
    /// A height above which nothing casts a shadow: shadow rays stop there.
    fn top(&self) -> f32;
    /// The linear-light albedo and the label of the surface at `p`.
    fn material(&self, p: Vec3) -> (Vec3, u8);
}

/// The camera, the sun and the background of one image.
pub(crate) struct View {
    /// Camera position.
    pub camera: Vec3,
    /// Unit viewing direction.
    pub forward: Vec3,
    /// Unit vector to the right of the image.
    pub right: Vec3,
    /// Unit vector to the top of the image.
    pub up: Vec3,
    /// Unit vector towards the sun.
    pub light: Vec3,
    /// Linear-light background colour.
    pub background: Vec3,
}

impl View {
    /// A camera at `elevation` (radians above the horizontal) and `distance` from `target`,
    /// on the `+z` side, looking at it; the sun at `light_elevation` and `light_azimuth`
    /// (radians, counter-clockwise seen from above, 0 = from behind the camera).
    pub fn new(
        target: Vec3,
        elevation: f32,
        distance: f32,
        light_elevation: f32,
        light_azimuth: f32,
        background: Vec3,
    ) -> Self {
        let camera = target + v3(0.0, elevation.sin(), elevation.cos()) * distance;
        let forward = (target - camera).normalize();
        let right = forward.cross(v3(0.0, 1.0, 0.0)).normalize();
        let up = right.cross(forward);
        let (le, la) = (light_elevation, light_azimuth);
        // Azimuth 0 points at the camera (which sits on +z), so the sun is behind it.
        let light = v3(le.cos() * la.sin(), le.sin(), le.cos() * la.cos());
        Self {
            camera,
            forward,
            right,
            up,
            light,
            background,
        }
    }

    /// The direction of the ray through image position (`x`, `y`) in pixels.
    pub fn ray(&self, x: f32, y: f32, size: f32) -> Vec3 {
        let u = (2.0 * x / size - 1.0) * TAN_HALF_FOV;
        let v = (1.0 - 2.0 * y / size) * TAN_HALF_FOV;
        (self.forward + self.right * u + self.up * v).normalize()
    }
}

/// A geometry seen from a view: the tracer proper.
pub(crate) struct Tracer<'a, G> {
    /// What is traced.
    pub geometry: &'a G,
    /// From where, under which light.
    pub view: &'a View,
}

impl<G: Geometry> Tracer<'_, G> {
    /// Traces a primary ray; returns the hit distance, if it hits the geometry.
    pub fn trace(&self, dir: Vec3) -> Option<f32> {
        let camera = self.view.camera;
        let (t0, t1) = self.geometry.interval(camera, dir)?;
        let mut t = t0.max(0.0);
        for _ in 0..MAX_STEPS {
            let d = self.geometry.distance(camera + dir * t);
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
            n = n + k * self.geometry.distance(p + k * E);
        }
        n.normalize()
    }

    /// Soft shadow towards the sun from `origin`: 1 fully lit, 0 fully shadowed.
    fn soft_shadow(&self, origin: Vec3, start: f32) -> f32 {
        let mut res: f32 = 1.0;
        let mut t = start;
        let top = self.geometry.top();
        let light = self.view.light;
        for _ in 0..MAX_SHADOW_STEPS {
            let p = origin + light * t;
            if p.y > top {
                break;
            }
            let h = self.geometry.bounded_distance(p);
            res = res.min(PENUMBRA * h / t);
            if res < 1e-3 {
                return 0.0;
            }
            // Small steps near the geometry sample the penumbra well; far away the bound
            // is a plain sphere distance, so full steps are safe and cheap.
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
            occ += (h - self.geometry.bounded_distance(p + n * h)).max(0.0) * weight;
            weight *= 0.7;
        }
        (1.0 - 2.5 * occ).clamp(0.0, 1.0)
    }

    /// The linear-light colour seen along `dir`, and the label of what it hits
    /// (`background` for the ground and the sky).
    pub fn shade(&self, dir: Vec3, background: u8) -> (Vec3, u8) {
        let (camera, light) = (self.view.camera, self.view.light);
        if let Some(t) = self.trace(dir) {
            let p = camera + dir * t;
            let n = self.normal(p);
            let n_dot_l = n.dot(light);
            let direct = if n_dot_l > 0.0 {
                n_dot_l * self.soft_shadow(p + n * 2e-3, 0.02)
            } else {
                0.0
            };
            let ao = self.occlusion(p, n);
            let (albedo, label) = self.geometry.material(p);
            // Sky light from above, light bounced off the coloured ground from below.
            let sky = 0.22 * (0.6 + 0.4 * n.y) * ao;
            let bounce = self.view.background * (0.18 * (-n.y).max(0.0) * ao);
            let half = (light - dir).normalize();
            let specular = 0.35 * n.dot(half).max(0.0).powi(40) * direct;
            let colour =
                albedo.hadamard(v3(1.0, 1.0, 1.0) * (0.85 * direct + sky) + bounce) + v3(1.0, 1.0, 1.0) * specular;
            return (colour, label);
        }
        if dir.y >= 0.0 {
            return (self.view.background, background);
        }
        let t = -camera.y / dir.y;
        let p = camera + dir * t;
        let shadow = self.soft_shadow(p, 0.05);
        // Contact darkening: the ground right under the geometry sees less of the sky. The
        // exact distance is used (one call) because the cheap bound would draw a ring.
        let h = self.geometry.distance(p + v3(0.0, 0.35, 0.0));
        let ao = (h / 0.9).clamp(0.0, 1.0);
        // Written as 1 − losses so that an unoccluded, lit point gets exactly the
        // background colour: the background is then a single colour a test can detect.
        let factor = 1.0 - 0.65 * (1.0 - shadow) - 0.25 * (1.0 - ao);
        (self.view.background * factor.max(0.0), background)
    }

    /// Renders one square RGB image of `size`×`size` pixels and its label image: the label
    /// of what the primary ray through each pixel's *centre* hits, `background` where it
    /// sees the ground, the sky or a shadow.
    ///
    /// The anti-aliasing sub-samples of boundary pixels do not enter the labels: the centre
    /// sample is the one sample every pixel has, so the labels are exactly what decides which
    /// pixels get sub-sampled (a pixel is re-sampled when its label differs from a
    /// 4-neighbour's), and a pixel whose label agrees with its four neighbours shows the
    /// unblended colour of what its label says it sees.
    pub fn render(&self, size: u32, background: u8) -> (RgbImage, GrayImage) {
        let n = size as usize;
        let s = size as f32;
        let mut colours = Vec::with_capacity(n * n);
        let mut labels = Vec::with_capacity(n * n);
        for y in 0..n {
            for x in 0..n {
                let (c, label) = self.shade(self.view.ray(x as f32 + 0.5, y as f32 + 0.5, s), background);
                colours.push(c);
                labels.push(label);
            }
        }
        let mut image = RgbImage::new(size, size);
        for y in 0..n {
            for x in 0..n {
                let i = y * n + x;
                let edge = (x > 0 && labels[i - 1] != labels[i])
                    || (x + 1 < n && labels[i + 1] != labels[i])
                    || (y > 0 && labels[i - n] != labels[i])
                    || (y + 1 < n && labels[i + n] != labels[i]);
                let colour = if edge {
                    let mut sum = v3(0.0, 0.0, 0.0);
                    for (dx, dy) in SUB_SAMPLES {
                        sum = sum + self.shade(self.view.ray(x as f32 + dx, y as f32 + dy, s), background).0;
                    }
                    sum * 0.25
                } else {
                    colours[i]
                };
                image.put_pixel(x as u32, y as u32, image::Rgb(linear_to_srgb8(colour)));
            }
        }
        // The buffer holds exactly `size`×`size` values, one per pixel in row order.
        let labels = GrayImage::from_raw(size, size, labels).expect("one label per pixel");
        (image, labels)
    }
}

/// The entry and exit distances of a ray through a sphere, if it meets the sphere in
/// front of the origin.
pub(crate) fn sphere_interval(origin: Vec3, dir: Vec3, centre: Vec3, radius: f32) -> Option<(f32, f32)> {
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
pub(crate) fn srgb_to_linear(c: [f32; 3]) -> Vec3 {
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
