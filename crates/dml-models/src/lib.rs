//! Backbones for deep metric learning that return every stage's feature map, and
//! embedding heads.
//!
//! DIML matches the last feature map, AVSL builds its graph from layers 2–4, and Grad-CAM
//! can explain any stage, so [`ResNet::forward_features`] returns the stem and all four
//! layer outputs. Weights in torchvision's `state_dict` layout (`.pth`) load through
//! [`ResNet::load_torchvision`], which reports missing and unused keys and fails on a
//! shape mismatch naming the key and both shapes.
#![warn(missing_docs)]

mod error;
mod head;
mod host_bn;
mod host_conv;
mod host_data;
mod model;
mod resnet;
pub mod runtime;
mod small_cnn;

pub use error::ModelError;
pub use head::{EmbeddingHead, EmbeddingHeadConfig, Pooling};
pub use model::{Backbone, BackboneConfig, EmbeddingModel, EmbeddingModelConfig};
pub use resnet::{BlockKind, FeatureMaps, LoadReport, ResNet, ResNetConfig};
pub use small_cnn::{SmallCnn, SmallCnnConfig};
