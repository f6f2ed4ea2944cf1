//! Per-image min-max normalisation of attention maps.

use burn::tensor::Tensor;

/// `(M − min M) / (max M − min M)` per image over `h × w`, for maps `[N, h, w]`; the result
/// lies in `[0, 1]`. The range is floored at `1e-12`, so a constant map (for example one the
/// ReLU zeroed entirely) becomes zeros instead of NaN. Normalising before bilinear upsampling
/// equals normalising after it with the raw map's extrema, because bilinear interpolation is
/// an affine combination with non-negative weights.
pub fn min_max_normalize(maps: Tensor<3>) -> Tensor<3> {
    let [n, h, w] = maps.dims();
    let flat = maps.reshape([n, h * w]);
    let min = flat.clone().min_dim(1);
    let max = flat.clone().max_dim(1);
    let range = (max - min.clone()).clamp_min(1e-12);
    ((flat - min) / range).reshape([n, h, w])
}
