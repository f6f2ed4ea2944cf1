/// Errors of the loss library; each message names the input at fault.
#[derive(Debug, thiserror::Error)]
pub enum LossError {
    /// An embedding (or a learnable parameter) holds NaN or an infinity. A NaN loss would
    /// silently poison every parameter of the model at the next optimiser step, so the batch
    /// is rejected instead.
    #[error("{what} row {row} holds a non-finite value ({value})")]
    NonFinite {
        /// Which input: `"embeddings"` or the name of a learnable parameter.
        what: String,
        /// The first offending row.
        row: usize,
        /// The first offending value in that row.
        value: f64,
    },
    /// A configuration value is invalid (unknown name, out-of-range parameter, a distance
    /// that the loss or miner cannot work with).
    #[error("invalid loss configuration: {0}")]
    Config(String),
    /// The inputs disagree in shape (embeddings vs labels, matrix vs labels, parameters).
    #[error("shape mismatch: {0}")]
    Shape(String),
    /// A label is outside the range that the loss was built for (proxy and classifier losses
    /// have one row of state per class).
    #[error("label {label} at row {row} is out of range for {num_classes} classes")]
    Label {
        /// The row of the offending label.
        row: usize,
        /// The label.
        label: u32,
        /// The number of classes the loss was built with.
        num_classes: usize,
    },
    /// The loss needs something that the call did not provide (for example a loss that is
    /// not pair-based called through [`crate::MetricLoss::forward_with_matrix`]).
    #[error("unsupported: {0}")]
    Unsupported(String),
}
