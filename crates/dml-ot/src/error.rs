//! The errors of this crate: invalid solver settings and invalid host-side inputs.

use thiserror::Error;

/// What can be wrong with the settings or host-side inputs of the solvers, the structural
/// similarity and the re-ranker. Every message names the offending input.
///
/// Shape misuse of tensors inside the batched (hot) code paths is an `assert!` with the shapes in
/// the message instead, as `ARCHITECTURE.md` prescribes.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum OtError {
    /// The entropic regularisation is not a finite positive number.
    #[error("sinkhorn eps must be finite and > 0, got {0}")]
    Eps(f64),
    /// The iteration cap is zero.
    #[error("sinkhorn max_iters must be >= 1, got 0")]
    ZeroIterations,
    /// The stopping tolerance is negative or not finite.
    #[error("sinkhorn tolerance must be finite and >= 0, got {0}")]
    Tolerance(f64),
    /// A marginal has a negative or non-finite entry.
    #[error("{input}: entry {index} of item {item} is {value}; marginals must be finite and >= 0")]
    MarginalEntry {
        /// The marginal (`a` or `b`).
        input: &'static str,
        /// The batch item.
        item: usize,
        /// The location.
        index: usize,
        /// The bad value.
        value: f64,
    },
    /// A marginal has no mass at all, so there is nothing to transport.
    #[error("{input}: item {item} has zero total mass")]
    ZeroMass {
        /// The marginal (`a` or `b`).
        input: &'static str,
        /// The batch item.
        item: usize,
    },
    /// The two marginals of an item carry different total mass, so no plan can satisfy both.
    #[error("item {item}: marginal a has mass {mass_a} but b has mass {mass_b} (relative difference above 1e-4)")]
    MassMismatch {
        /// The batch item.
        item: usize,
        /// Total mass of `a`.
        mass_a: f64,
        /// Total mass of `b`.
        mass_b: f64,
    },
    /// A host-side array does not have the length its declared shape implies.
    #[error("{input}: expected {expected} values ({shape}), got {got}")]
    Length {
        /// The array.
        input: &'static str,
        /// The declared shape, in words.
        shape: String,
        /// The expected number of values.
        expected: usize,
        /// The actual number of values.
        got: usize,
    },
    /// A size or count that must be positive is zero.
    #[error("{input} must be >= 1, got 0")]
    Zero {
        /// The offending size.
        input: &'static str,
    },
    /// Two inputs disagree on a dimension they must share.
    #[error("{input}: {what} is {got}, but {other} has {expected}")]
    Mismatch {
        /// The offending input.
        input: &'static str,
        /// The dimension.
        what: &'static str,
        /// Its value in `input`.
        got: usize,
        /// The input it must agree with.
        other: &'static str,
        /// The value there.
        expected: usize,
    },
    /// A host-side input holds a NaN or an infinity.
    #[error("{input}: value {value} at flat index {index} is not finite")]
    NotFinite {
        /// The offending input.
        input: &'static str,
        /// Flat index of the first bad value.
        index: usize,
        /// The bad value.
        value: f64,
    },
    /// An index lies outside the set it refers to.
    #[error("{input}: index {index} is out of range for {len} rows")]
    Index {
        /// The offending input.
        input: &'static str,
        /// The index.
        index: usize,
        /// Number of rows available.
        len: usize,
    },
}
