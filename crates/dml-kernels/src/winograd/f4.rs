//! F(4 × 4, 3 × 3): 4 × 4 output tiles from 6 × 6 input patches (Lavin & Gray 2016, section 4.2
//! and its matrices, interpolation points 0, 1, −1, 2, −2 and ∞). 36 products per tile where
//! the direct convolution needs 144: 4 times fewer, against F(2 × 2, 3 × 3)'s 2.25, and the
//! transformed input is 36 values per 16 outputs instead of 16 per 4. The transforms multiply
//! by small integers and by `G`'s fractions, so the rounding error is a few times F(2 × 2)'s
//! (the tests bound it against the f64 definition).

use super::{Lane, Minimal, Point};

/// The F(4 × 4, 3 × 3) algorithm.
pub(crate) struct F4;

/// `G`'s recurring fraction.
const SIXTH: f32 = 1.0 / 6.0;

impl Minimal for F4 {
    const M: usize = 4;
    #[cfg(test)]
    #[rustfmt::skip]
    const BT: &'static [f64] = &[
        4.0, 0.0, -5.0, 0.0, 1.0, 0.0,
        0.0, -4.0, -4.0, 1.0, 1.0, 0.0,
        0.0, 4.0, -4.0, -1.0, 1.0, 0.0,
        0.0, -2.0, -1.0, 2.0, 1.0, 0.0,
        0.0, 2.0, -1.0, -2.0, 1.0, 0.0,
        0.0, 4.0, 0.0, -5.0, 0.0, 1.0,
    ];
    #[cfg(test)]
    #[rustfmt::skip]
    const G: &'static [f64] = &[
        1.0 / 4.0, 0.0, 0.0,
        -1.0 / 6.0, -1.0 / 6.0, -1.0 / 6.0,
        -1.0 / 6.0, 1.0 / 6.0, -1.0 / 6.0,
        1.0 / 24.0, 1.0 / 12.0, 1.0 / 6.0,
        1.0 / 24.0, -1.0 / 12.0, 1.0 / 6.0,
        0.0, 0.0, 1.0,
    ];
    #[cfg(test)]
    #[rustfmt::skip]
    const AT: &'static [f64] = &[
        1.0, 1.0, 1.0, 1.0, 1.0, 0.0,
        0.0, 1.0, -1.0, 2.0, -2.0, 0.0,
        0.0, 1.0, 1.0, 4.0, 4.0, 0.0,
        0.0, 1.0, -1.0, 8.0, -8.0, 1.0,
    ];

    #[inline(always)]
    fn input<V: Lane>([d0, d1, d2, d3, d4, d5]: Point<V>) -> Point<V> {
        // The shared sums first: rows 1 and 2, and 3 and 4, differ in the sign of one term.
        let (odd4, even4) = (d3 - d1 * 4.0, d4 - d2 * 4.0);
        let (odd2, even2) = ((d3 - d1) * 2.0, d4 - d2);
        [
            d0 * 4.0 - d2 * 5.0 + d4,
            even4 + odd4,
            even4 - odd4,
            even2 + odd2,
            even2 - odd2,
            d1 * 4.0 - d3 * 5.0 + d5,
        ]
    }

    #[inline(always)]
    fn input_adjoint<V: Lane>([v0, v1, v2, v3, v4, v5]: Point<V>) -> Point<V> {
        [
            v0 * 4.0,
            (v2 - v1 + v5) * 4.0 + (v4 - v3) * 2.0,
            -(v0 * 5.0) - (v1 + v2) * 4.0 - (v3 + v4),
            v1 - v2 + (v3 - v4) * 2.0 - v5 * 5.0,
            v0 + v1 + v2 + v3 + v4,
            v5,
        ]
    }

    #[inline(always)]
    fn weight<V: Lane>([g0, g1, g2, ..]: Point<V>) -> Point<V> {
        let (outer, inner) = (g0 / 24.0 + g2 * SIXTH, g1 / 12.0);
        [
            g0 * 0.25,
            (g0 + g1 + g2) * -SIXTH,
            (g0 - g1 + g2) * -SIXTH,
            outer + inner,
            outer - inner,
            g2,
        ]
    }

    #[inline(always)]
    fn weight_adjoint<V: Lane>([u0, u1, u2, u3, u4, u5]: Point<V>) -> Point<V> {
        let z = V::default();
        [
            u0 * 0.25 - (u1 + u2) * SIXTH + (u3 + u4) / 24.0,
            (u2 - u1) * SIXTH + (u3 - u4) / 12.0,
            ((u3 + u4) - (u1 + u2)) * SIXTH + u5,
            z,
            z,
            z,
        ]
    }

    #[inline(always)]
    fn output<V: Lane>([m0, m1, m2, m3, m4, m5]: Point<V>) -> Point<V> {
        let z = V::default();
        let (sum, difference) = (m1 + m2, m1 - m2);
        let (sum_far, difference_far) = (m3 + m4, m3 - m4);
        [
            m0 + sum + sum_far,
            difference + difference_far * 2.0,
            sum + sum_far * 4.0,
            difference + difference_far * 8.0 + m5,
            z,
            z,
        ]
    }

    #[inline(always)]
    fn output_adjoint<V: Lane>([g0, g1, g2, g3, ..]: Point<V>) -> Point<V> {
        let (even, odd) = (g0 + g2, g1 + g3);
        let (even_far, odd_far) = (g0 + g2 * 4.0, (g1 + g3 * 4.0) * 2.0);
        [g0, even + odd, even - odd, even_far + odd_far, even_far - odd_far, g3]
    }
}
