//! The geometry of a 2-D convolution, shared by the routes that compute one: [`crate::conv`],
//! which chooses the route and runs the im2col products, and the Winograd transforms, which so
//! need nothing from the module that dispatches to them.

/// The geometry of one convolution: input `[batch, channels, height, width]`, weight
/// `[out_channels, channels, kernel[0], kernel[1]]`, and per spatial axis the stride and the
/// padding before and after.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv2dShape {
    /// B.
    pub batch: usize,
    /// C.
    pub channels: usize,
    /// H.
    pub height: usize,
    /// W.
    pub width: usize,
    /// O.
    pub out_channels: usize,
    /// `[kh, kw]`.
    pub kernel: [usize; 2],
    /// `[sh, sw]`.
    pub stride: [usize; 2],
    /// `[(top, bottom), (left, right)]`.
    pub padding: [(usize, usize); 2],
}

impl Conv2dShape {
    /// `[Ho, Wo]`, or an error naming the axis when the kernel does not fit the padded input
    /// or a stride or kernel size is zero.
    pub fn output_size(&self) -> Result<[usize; 2], String> {
        let sizes = [self.height, self.width];
        let mut out = [0; 2];
        for axis in 0..2 {
            let (before, after) = self.padding[axis];
            let padded = sizes[axis] + before + after;
            if self.stride[axis] == 0 || self.kernel[axis] == 0 {
                return Err(format!(
                    "convolution axis {axis}: stride and kernel size must be positive"
                ));
            }
            if self.kernel[axis] > padded {
                return Err(format!(
                    "convolution axis {axis}: kernel {} is larger than the padded input {padded}",
                    self.kernel[axis]
                ));
            }
            out[axis] = (padded - self.kernel[axis]) / self.stride[axis] + 1;
        }
        Ok(out)
    }

    /// Rows of the unfolded input, `K = C·kh·kw`.
    pub(crate) fn depth(&self) -> usize {
        self.channels * self.kernel[0] * self.kernel[1]
    }

    /// `Ho·Wo` (the shape must have been checked by [`Self::output_size`]).
    pub(crate) fn out_plane(&self) -> usize {
        let [ho, wo] = self.output_size().expect("a checked convolution shape");
        ho * wo
    }

    pub(crate) fn input_len(&self) -> usize {
        self.batch * self.channels * self.height * self.width
    }

    /// A 1 × 1 convolution of stride 1 without padding (most of a ResNet-50's): per image a
    /// plain product with the input as it lies, `Y_b [O, H·W] = W [O, C] · X_b [C, H·W]`, so
    /// there is nothing to unfold or fold back.
    pub(crate) fn pointwise(&self) -> bool {
        self.kernel == [1, 1] && self.stride == [1, 1] && self.padding == [(0, 0); 2]
    }

    pub(crate) fn weight_len(&self) -> usize {
        self.out_channels * self.depth()
    }

    pub(crate) fn output_len(&self) -> usize {
        self.batch * self.out_channels * self.out_plane()
    }

    /// Checks the geometry and the lengths of the given buffers.
    pub(crate) fn check(&self, x: usize, w: usize, dy: Option<usize>) -> Result<(), String> {
        self.output_size()?;
        if x != self.input_len() || w != self.weight_len() || dy.is_some_and(|d| d != self.output_len()) {
            return Err(format!(
                "convolution {self:?}: buffers of {x} input, {w} weight and {dy:?} output-gradient values \
                 do not match (expected {}, {} and {})",
                self.input_len(),
                self.weight_len(),
                self.output_len()
            ));
        }
        Ok(())
    }
}

/// The convolution by its definition, in `f64` (the tests' reference).
#[cfg(test)]
pub(crate) fn naive(s: &Conv2dShape, x: &[f32], w: &[f32], bias: Option<&[f32]>) -> Vec<f64> {
    let [ho, wo] = s.output_size().unwrap();
    let [kh, kw] = s.kernel;
    let mut out = vec![0.0; s.batch * s.out_channels * ho * wo];
    for b in 0..s.batch {
        for o in 0..s.out_channels {
            for y in 0..ho {
                for xx in 0..wo {
                    let mut acc = bias.map_or(0.0, |bb| bb[o] as f64);
                    for c in 0..s.channels {
                        for i in 0..kh {
                            for j in 0..kw {
                                let iy = (y * s.stride[0] + i) as isize - s.padding[0].0 as isize;
                                let ix = (xx * s.stride[1] + j) as isize - s.padding[1].0 as isize;
                                if iy < 0 || ix < 0 || iy >= s.height as isize || ix >= s.width as isize {
                                    continue;
                                }
                                let xv = x[((b * s.channels + c) * s.height + iy as usize) * s.width + ix as usize];
                                let wv = w[((o * s.channels + c) * kh + i) * kw + j];
                                acc += xv as f64 * wv as f64;
                            }
                        }
                    }
                    out[((b * s.out_channels + o) * ho + y) * wo + xx] = acc;
                }
            }
        }
    }
    out
}
