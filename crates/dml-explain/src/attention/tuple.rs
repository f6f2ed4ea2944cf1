//! The tuples a similarity model explains and their weight vectors (Zheng et al., Sec. 3.1).

use burn::tensor::Tensor;
use dml_ot::l2_normalize;

use crate::error::ExplainError;

/// The kind of tuple whose similarity is explained, with its images in a fixed order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TupleKind {
    /// Two images of the same class: `w = 1 − |f¹ − f²|`.
    SiameseSame,
    /// Two images of different classes: `w = |f¹ − f²|`.
    SiameseDifferent,
    /// Anchor, positive, negative: `w = (1 − |fᵃ − fᵖ|) ⊙ |fᵃ − fⁿ|`.
    Triplet,
    /// Anchor, positive, two negatives: the triplet vector `⊙ |fᵃ − fⁿ²|`.
    Quadruplet,
}

impl TupleKind {
    /// The names accepted by [`TupleKind::from_name`].
    pub const NAMES: [&'static str; 4] = ["siamese_same", "siamese_different", "triplet", "quadruplet"];

    /// The kind called `name` (one of [`TupleKind::NAMES`]).
    pub fn from_name(name: &str) -> Result<Self, ExplainError> {
        match name {
            "siamese_same" => Ok(Self::SiameseSame),
            "siamese_different" => Ok(Self::SiameseDifferent),
            "triplet" => Ok(Self::Triplet),
            "quadruplet" => Ok(Self::Quadruplet),
            other => Err(ExplainError::Config(format!(
                "unknown tuple kind {other:?}; expected one of {:?}",
                Self::NAMES
            ))),
        }
    }

    /// The number of images of a tuple of this kind.
    pub fn size(self) -> usize {
        self.roles().len()
    }

    /// What each image of a tuple is, in order (for captions and JSON output).
    pub fn roles(self) -> &'static [&'static str] {
        match self {
            Self::SiameseSame | Self::SiameseDifferent => &["x1", "x2"],
            Self::Triplet => &["anchor", "positive", "negative"],
            Self::Quadruplet => &["anchor", "positive", "negative1", "negative2"],
        }
    }
}

/// The weight vectors `w` `[T, D]` of `T` tuples from their embeddings `[T, n, D]` (`n` =
/// [`TupleKind::size`], images in the kind's order): the embeddings are L2-normalised and
/// detached first, so `w` is a constant for every gradient, as in the paper, where `w` only
/// selects which embedding dimensions the score `s = wᵀf` measures.
///
/// Siamese same-class `1 − |f¹ − f²|`, different-class `|f¹ − f²|`; triplet
/// `(1 − |fᵃ − fᵖ|) ⊙ |fᵃ − fⁿ|`; quadruplet `(1 − |fᵃ − fᵖ|) ⊙ |fᵃ − fⁿ¹| ⊙ |fᵃ − fⁿ²|`.
pub fn weight_vectors(embeddings: Tensor<3>, kind: TupleKind) -> Result<Tensor<2>, ExplainError> {
    let [t, n, d] = embeddings.dims();
    if n != kind.size() || t == 0 || d == 0 {
        return Err(ExplainError::Shape {
            what: "tuple embeddings",
            message: format!(
                "[{t}, {n}, {d}] given; a {kind:?} tuple needs [T >= 1, {}, D >= 1]",
                kind.size()
            ),
        });
    }
    let f = l2_normalize(embeddings.detach());
    let image = |i: usize| f.clone().narrow(1, i, 1).squeeze_dim::<2>(1);
    let gap = |i: usize| (image(0) - image(i)).abs();
    let w = match kind {
        TupleKind::SiameseSame => gap(1).neg().add_scalar(1.0),
        TupleKind::SiameseDifferent => gap(1),
        TupleKind::Triplet => gap(1).neg().add_scalar(1.0) * gap(2),
        TupleKind::Quadruplet => gap(1).neg().add_scalar(1.0) * gap(2) * gap(3),
    };
    Ok(w.detach())
}
