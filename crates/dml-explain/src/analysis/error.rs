//! Errors of the feature-comparison statistics; each names the input at fault and its shape.
//!
//! This is the leaf module of `analysis`: it imports nothing else of the crate, so every
//! statistic can use it without creating a cycle.

/// What can go wrong when comparing saliency maps, measuring NR-Precision or testing two
/// samples against each other.
///
/// `what` always names the offending input as the caller passed it (for example `maps_a[3]`,
/// `model 2, image 5` or `properties[1]`), so that a message points at the data, not at the code.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AnalysisError {
    /// An input has no elements, so no statistic over it is defined.
    #[error("{what} is empty")]
    Empty {
        /// Which input.
        what: String,
    },
    /// Inputs that must agree in size do not (or a flat buffer is not a whole number of rows).
    #[error("{what}: {message}")]
    Shape {
        /// Which input.
        what: String,
        /// The sizes involved.
        message: String,
    },
    /// A value is NaN or infinite, or lies outside the range the statistic accepts.
    #[error("{what}[{index}] = {value}: {reason}")]
    InvalidValue {
        /// Which input.
        what: String,
        /// The flat index of the first offending value.
        index: usize,
        /// The offending value.
        value: f64,
        /// Why it is rejected (e.g. "not finite", "negative").
        reason: &'static str,
    },
    /// A map has zero variance, so its Pearson correlation with any map is undefined (`0 / 0`;
    /// `np.corrcoef` returns NaN with a warning).
    #[error("{what} is constant (all {len} values equal {value}): its Pearson correlation is undefined")]
    ConstantMap {
        /// Which map.
        what: String,
        /// Number of values in the map.
        len: usize,
        /// The value every element has.
        value: f64,
    },
    /// A map sums to zero, so it cannot be divided by its sum to become a probability
    /// distribution for the Jensen–Shannon divergence.
    #[error("{what} sums to 0 over {len} values: it cannot be normalised to a distribution for the JSD")]
    ZeroSum {
        /// Which map.
        what: String,
        /// Number of values in the map.
        len: usize,
    },
    /// A property takes one value on every item: `p = 1`, so the binomial standard deviation
    /// `sqrt(R p (1 - p))` of NR-Precision (Eq. 5) is 0 for every query.
    #[error("{what} takes the single value {value} on all {n} items: NR-Precision is undefined (p = 1)")]
    ConstantProperty {
        /// Which property.
        what: String,
        /// The value every item has.
        value: u32,
        /// Number of items.
        n: usize,
    },
    /// Every value of a property occurs exactly once: every query has `R = 0`, so neither
    /// R-Precision nor NR-Precision has a query to average over.
    #[error("{what}: every one of the {n} values occurs only once (R = 0 for every query)")]
    NoValidQuery {
        /// Which property.
        what: String,
        /// Number of items.
        n: usize,
    },
}
