//! Errors of the explanation methods; each names the input at fault.

/// What can go wrong when explaining a tuple of images.
#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    /// The images, embeddings or maps do not have the shape the method needs.
    #[error("{what}: {message}")]
    Shape {
        /// Which input (e.g. `images`, `tuples`).
        what: &'static str,
        /// The shapes involved.
        message: String,
    },
    /// A configuration value is invalid; the message names the key.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The method needs gradients, but the model lives on a device without autodiff.
    #[error("{0} needs gradients: put the model and images on an autodiff device (`device.autodiff()`)")]
    NotAutodiff(&'static str),
    /// The model rejected the request (e.g. an unknown stage name).
    #[error(transparent)]
    Model(#[from] dml_models::ModelError),
}
