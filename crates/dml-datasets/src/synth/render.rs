//! The shapes set's scene: one shape floating above the ground, traced by [`Tracer`].
//!
//! The object mask of an image is the tracer's label image with two labels: [`MASK_OBJECT`]
//! where the primary ray through the pixel centre hits the shape, [`MASK_BACKGROUND`]
//! elsewhere ([`render_with_mask`]).

use image::{GrayImage, RgbImage};

use super::scene::{SceneParams, TILT_DEGREES};
use super::shapes::{BOUNDING_RADIUS, Shape};
use super::tracer::{Geometry, Tracer, View, sphere_interval, srgb_to_linear};
use super::vec3::{Mat3, Vec3, v3};

/// Height of the object's centre above the ground; the gap below the bounding sphere
/// keeps tilted shapes from cutting into the ground.
pub const OBJECT_HEIGHT: f32 = BOUNDING_RADIUS + 0.15;

/// One shape in world coordinates, prepared for fast tracing.
struct ShapeGeometry {
    shape: Shape,
    /// World → object rotation (the inverse of the object's orientation).
    to_object: Mat3,
    centre: Vec3,
    /// Linear-light object albedo.
    albedo: Vec3,
}

impl Geometry for ShapeGeometry {
    fn distance(&self, p: Vec3) -> f32 {
        self.shape.distance(self.to_object.apply(p - self.centre))
    }

    fn bounded_distance(&self, p: Vec3) -> f32 {
        let d = (p - self.centre).length() - BOUNDING_RADIUS;
        if d > 0.5 { d } else { self.distance(p) }
    }

    fn interval(&self, origin: Vec3, dir: Vec3) -> Option<(f32, f32)> {
        sphere_interval(origin, dir, self.centre, BOUNDING_RADIUS)
    }

    fn top(&self) -> f32 {
        OBJECT_HEIGHT + BOUNDING_RADIUS + 0.5
    }

    fn material(&self, _: Vec3) -> (Vec3, u8) {
        (self.albedo, MASK_OBJECT)
    }
}

/// The geometry and the view of one image.
fn scene(params: &SceneParams) -> (ShapeGeometry, View) {
    let orientation = Mat3::rotation_y(params.yaw()).mul(&Mat3::rotation_z(TILT_DEGREES.to_radians()));
    let (elevation, distance) = params.camera_pose();
    // Looking a little below the object's centre keeps part of the ground shadow in
    // frame; with this offset every shape, in every pose and from every camera height,
    // stays at least 6 pixels (of 64) inside the top and the sides of the image.
    let target = v3(0.0, OBJECT_HEIGHT - 0.2, 0.0);
    let geometry = ShapeGeometry {
        shape: params.shape,
        to_object: orientation.transpose(),
        centre: v3(0.0, OBJECT_HEIGHT, 0.0),
        albedo: srgb_to_linear(params.object.srgb()),
    };
    let view = View::new(
        target,
        elevation,
        distance,
        params.light_elevation_radians(),
        params.light_azimuth_radians(),
        srgb_to_linear(params.background.srgb()),
    );
    (geometry, view)
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
/// where it sees the ground, the sky or a shadow (the label image of [`Tracer::render`]).
pub fn render_with_mask(params: &SceneParams, size: u32) -> (RgbImage, GrayImage) {
    let (geometry, view) = scene(params);
    Tracer {
        geometry: &geometry,
        view: &view,
    }
    .render(size, MASK_BACKGROUND)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::plan;
    use crate::synth::tracer::SUB_SAMPLES;

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
            let (geometry, view) = scene(&params);
            let tracer = Tracer {
                geometry: &geometry,
                view: &view,
            };
            let s = size as f32;
            for (x, y, m) in mask.enumerate_pixels() {
                let hit = tracer.trace(view.ray(x as f32 + 0.5, y as f32 + 0.5, s)).is_some();
                let expected = if hit { MASK_OBJECT } else { MASK_BACKGROUND };
                assert_eq!(m.0[0], expected, "{:?}: pixel ({x}, {y})", params.shape);
                let sub_hits = SUB_SAMPLES
                    .iter()
                    .filter(|(dx, dy)| tracer.trace(view.ray(x as f32 + dx, y as f32 + dy, s)).is_some())
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
