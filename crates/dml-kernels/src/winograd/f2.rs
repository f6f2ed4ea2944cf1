//! F(2 × 2, 3 × 3): 2 × 2 output tiles from 4 × 4 input patches (Lavin & Gray 2016, eq. 8 and
//! the matrices under it, interpolation points 0, 1, −1 and ∞). 16 products per tile where the
//! direct convolution needs 36, and transforms of additions only (halves in `G`).

use super::{Lane, Minimal, Point};

/// The F(2 × 2, 3 × 3) algorithm.
pub(crate) struct F2;

impl Minimal for F2 {
    const M: usize = 2;
    #[cfg(test)]
    #[rustfmt::skip]
    const BT: &'static [f64] = &[
        1.0, 0.0, -1.0, 0.0,
        0.0, 1.0, 1.0, 0.0,
        0.0, -1.0, 1.0, 0.0,
        0.0, 1.0, 0.0, -1.0,
    ];
    #[cfg(test)]
    #[rustfmt::skip]
    const G: &'static [f64] = &[
        1.0, 0.0, 0.0,
        0.5, 0.5, 0.5,
        0.5, -0.5, 0.5,
        0.0, 0.0, 1.0,
    ];
    #[cfg(test)]
    #[rustfmt::skip]
    const AT: &'static [f64] = &[
        1.0, 1.0, 1.0, 0.0,
        0.0, 1.0, -1.0, -1.0,
    ];

    #[inline(always)]
    fn input<V: Lane>([d0, d1, d2, d3, ..]: Point<V>) -> Point<V> {
        let z = V::default();
        [d0 - d2, d1 + d2, d2 - d1, d1 - d3, z, z]
    }

    #[inline(always)]
    fn input_adjoint<V: Lane>([v0, v1, v2, v3, ..]: Point<V>) -> Point<V> {
        let z = V::default();
        [v0, v1 - v2 + v3, v1 + v2 - v0, -v3, z, z]
    }

    #[inline(always)]
    fn weight<V: Lane>([g0, g1, g2, ..]: Point<V>) -> Point<V> {
        let z = V::default();
        [g0, (g0 + g1 + g2) * 0.5, (g0 - g1 + g2) * 0.5, g2, z, z]
    }

    #[inline(always)]
    fn weight_adjoint<V: Lane>([u0, u1, u2, u3, ..]: Point<V>) -> Point<V> {
        let z = V::default();
        [u0 + (u1 + u2) * 0.5, (u1 - u2) * 0.5, (u1 + u2) * 0.5 + u3, z, z, z]
    }

    #[inline(always)]
    fn output<V: Lane>([m0, m1, m2, m3, ..]: Point<V>) -> Point<V> {
        let z = V::default();
        [m0 + m1 + m2, m1 - m2 - m3, z, z, z, z]
    }

    #[inline(always)]
    fn output_adjoint<V: Lane>([g0, g1, ..]: Point<V>) -> Point<V> {
        let z = V::default();
        [g0, g0 + g1, g0 - g1, -g1, z, z]
    }
}
