//! A minimal 3-vector for the renderer.

use std::ops::{Add, Mul, Neg, Sub};

/// A point or direction in 3-D space.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Vec3 {
    /// The x coordinate (to the right of the default camera).
    pub x: f32,
    /// The y coordinate (up).
    pub y: f32,
    /// The z coordinate (towards the default camera).
    pub z: f32,
}

/// Shorthand constructor.
pub const fn v3(x: f32, y: f32, z: f32) -> Vec3 {
    Vec3 { x, y, z }
}

impl Vec3 {
    /// Dot product.
    pub fn dot(self, o: Vec3) -> f32 {
        self.x * o.x + self.y * o.y + self.z * o.z
    }

    /// Cross product.
    pub fn cross(self, o: Vec3) -> Vec3 {
        v3(
            self.y * o.z - self.z * o.y,
            self.z * o.x - self.x * o.z,
            self.x * o.y - self.y * o.x,
        )
    }

    /// Euclidean length.
    pub fn length(self) -> f32 {
        self.dot(self).sqrt()
    }

    /// The unit vector in the same direction.
    pub fn normalize(self) -> Vec3 {
        self * (1.0 / self.length())
    }

    /// Component-wise absolute value.
    pub fn abs(self) -> Vec3 {
        v3(self.x.abs(), self.y.abs(), self.z.abs())
    }

    /// Component-wise maximum with a scalar.
    pub fn max(self, m: f32) -> Vec3 {
        v3(self.x.max(m), self.y.max(m), self.z.max(m))
    }

    /// Component-wise product.
    pub fn hadamard(self, o: Vec3) -> Vec3 {
        v3(self.x * o.x, self.y * o.y, self.z * o.z)
    }
}

impl Add for Vec3 {
    type Output = Vec3;
    fn add(self, o: Vec3) -> Vec3 {
        v3(self.x + o.x, self.y + o.y, self.z + o.z)
    }
}

impl Sub for Vec3 {
    type Output = Vec3;
    fn sub(self, o: Vec3) -> Vec3 {
        v3(self.x - o.x, self.y - o.y, self.z - o.z)
    }
}

impl Sub<f32> for Vec3 {
    type Output = Vec3;
    fn sub(self, s: f32) -> Vec3 {
        v3(self.x - s, self.y - s, self.z - s)
    }
}

impl Mul<f32> for Vec3 {
    type Output = Vec3;
    fn mul(self, s: f32) -> Vec3 {
        v3(self.x * s, self.y * s, self.z * s)
    }
}

impl Neg for Vec3 {
    type Output = Vec3;
    fn neg(self) -> Vec3 {
        v3(-self.x, -self.y, -self.z)
    }
}

/// A 3×3 matrix stored as rows, used for the object rotation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Mat3 {
    /// The three rows.
    pub rows: [Vec3; 3],
}

impl Mat3 {
    /// Rotation by `angle` radians about the vertical y axis.
    pub fn rotation_y(angle: f32) -> Mat3 {
        let (s, c) = angle.sin_cos();
        Mat3 {
            rows: [v3(c, 0.0, s), v3(0.0, 1.0, 0.0), v3(-s, 0.0, c)],
        }
    }

    /// Rotation by `angle` radians about the x axis.
    pub fn rotation_x(angle: f32) -> Mat3 {
        let (s, c) = angle.sin_cos();
        Mat3 {
            rows: [v3(1.0, 0.0, 0.0), v3(0.0, c, -s), v3(0.0, s, c)],
        }
    }

    /// Rotation by `angle` radians about the z axis.
    pub fn rotation_z(angle: f32) -> Mat3 {
        let (s, c) = angle.sin_cos();
        Mat3 {
            rows: [v3(c, -s, 0.0), v3(s, c, 0.0), v3(0.0, 0.0, 1.0)],
        }
    }

    /// Matrix–vector product.
    pub fn apply(&self, v: Vec3) -> Vec3 {
        v3(self.rows[0].dot(v), self.rows[1].dot(v), self.rows[2].dot(v))
    }

    /// Matrix product `self · o`.
    pub fn mul(&self, o: &Mat3) -> Mat3 {
        let t = o.transpose();
        Mat3 {
            rows: self
                .rows
                .map(|r| v3(r.dot(t.rows[0]), r.dot(t.rows[1]), r.dot(t.rows[2]))),
        }
    }

    /// The transpose, which is the inverse of a rotation.
    pub fn transpose(&self) -> Mat3 {
        let [a, b, c] = self.rows;
        Mat3 {
            rows: [v3(a.x, b.x, c.x), v3(a.y, b.y, c.y), v3(a.z, b.z, c.z)],
        }
    }
}
