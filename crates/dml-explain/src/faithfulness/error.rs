//! Errors of the faithfulness metrics, and the input checks every metric shares.

/// Why a metric could not be computed from its inputs; messages name the input.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FaithError {
    /// A slice does not hold the number of values its shape needs.
    #[error("{what} has {len} values but its shape {shape} needs {expected}")]
    Length {
        /// Which input ("map", "mask", "ranking map", "image").
        what: &'static str,
        /// The slice's length.
        len: usize,
        /// The shape as given, e.g. `[3, 224, 224]`.
        shape: String,
        /// The product of the shape.
        expected: usize,
    },
    /// The shape has a zero side, so no metric is defined.
    #[error("shape [{h}, {w}] has no pixels")]
    EmptyShape {
        /// Height as given.
        h: usize,
        /// Width as given.
        w: usize,
    },
    /// A map holds NaN or an infinity, which has no place in a ranking or a threshold.
    #[error("{what} has the non-finite value {value} at index {index}")]
    NonFinite {
        /// Which input.
        what: &'static str,
        /// Row-major index of the first non-finite value.
        index: usize,
        /// The value.
        value: f32,
    },
    /// The mask marks no pixel as object, so hitting or overlapping the object is undefined.
    #[error("mask of shape [{h}, {w}] marks no object pixel")]
    EmptyMask {
        /// Height.
        h: usize,
        /// Width.
        w: usize,
    },
    /// The mask marks every pixel as object, so no metric that compares the object with the rest
    /// (a ROC AUC) is defined.
    #[error("mask of shape [{h}, {w}] marks every pixel as object")]
    FullMask {
        /// Height.
        h: usize,
        /// Width.
        w: usize,
    },
    /// A metric's parameter is outside its domain.
    #[error("{name} = {value} is invalid: {reason}")]
    Parameter {
        /// The parameter (`k`, `eps`).
        name: &'static str,
        /// Its value.
        value: f64,
        /// The rule it breaks.
        reason: String,
    },
    /// A map is constant (or all zero), so a measure of it is undefined.
    #[error("{what} is constant, so {measure} is undefined")]
    ConstantMap {
        /// Which input.
        what: &'static str,
        /// The measure it cannot give (`the rank correlation`, `its entropy`).
        measure: &'static str,
    },
    /// The IoU threshold is not a fraction in `[0, 1]`.
    #[error("IoU threshold fraction {0} is not in [0, 1]")]
    Threshold(f64),
    /// The deletion fractions are not at least two strictly ascending values in `[0, 1]`.
    #[error("deletion fractions {fractions:?} are invalid: {reason}")]
    Fractions {
        /// The fractions as given.
        fractions: Vec<f64>,
        /// Which rule they break.
        reason: &'static str,
    },
    /// A random deletion curve was asked for with zero repeats.
    #[error("a random deletion curve needs at least one repeat")]
    NoRepeats,
    /// The scorer did not return one score per image of the batch.
    #[error("the scorer returned {got} scores for a batch of {expected} images")]
    ScoreCount {
        /// Images in the batch.
        expected: usize,
        /// Scores returned.
        got: usize,
    },
    /// The scorer returned NaN or an infinity.
    #[error("the scorer returned {score} for the image with fraction {fraction} of its pixels erased")]
    NonFiniteScore {
        /// The fraction of erased pixels of that image.
        fraction: f64,
        /// The score.
        score: f64,
    },
}

/// Error of the deletion curves: an invalid input, or the caller's scorer failing with its own
/// error `E`, passed through unchanged so that the caller can match on it.
#[derive(Debug, thiserror::Error)]
pub enum DeletionError<E> {
    /// The inputs (shapes, fractions, repeats) or the scorer's output are invalid.
    #[error(transparent)]
    Invalid(#[from] FaithError),
    /// The scorer returned an error.
    #[error("the scorer failed: {0}")]
    Score(#[source] E),
}

/// Checks that `len == h * w` (or `channels * h * w` when `channels > 1`) and that the shape
/// is not empty.
pub(crate) fn check_len(what: &'static str, len: usize, channels: usize, h: usize, w: usize) -> Result<(), FaithError> {
    let expected = channels * h * w;
    if len != expected {
        let shape = if channels > 1 {
            format!("[{channels}, {h}, {w}]")
        } else {
            format!("[{h}, {w}]")
        };
        return Err(FaithError::Length {
            what,
            len,
            shape,
            expected,
        });
    }
    if h == 0 || w == 0 {
        return Err(FaithError::EmptyShape { h, w });
    }
    Ok(())
}

/// Checks that every value of a map is finite.
pub(super) fn check_finite(what: &'static str, map: &[f32]) -> Result<(), FaithError> {
    match map.iter().position(|v| !v.is_finite()) {
        Some(index) => Err(FaithError::NonFinite {
            what,
            index,
            value: map[index],
        }),
        None => Ok(()),
    }
}
