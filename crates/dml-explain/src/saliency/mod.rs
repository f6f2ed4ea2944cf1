//! Saliency of an embedding (Kobs et al., "Do Different Deep Metric Learning Losses Lead to
//! Similar Learned Features?", ICCV 2021, Sec. 3.1, Eq. 1–2): where the input must change to move
//! the embedding away from that of a black image, under the distance the model was trained with,
//! smoothed over noisy copies (SmoothGrad).

pub mod normalize;
pub mod smoothgrad;
