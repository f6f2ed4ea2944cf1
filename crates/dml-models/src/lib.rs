//! Backbones for deep metric learning that return every stage's feature map, and
//! embedding heads.
//!
//! DIML matches the last feature map, AVSL builds its graph from layers 2–4, and Grad-CAM
//! can explain any stage, so [`ResNet::forward_features`] returns the stem and all four
//! layer outputs, and [`BnInception::forward_features`] the last map at each of its
//! resolutions. Weights in torchvision's `state_dict` layout load through
//! [`ResNet::load_weights`], those in Cadene's `bninception` layout through
//! [`BnInception::load_weights`] (`.pth` or `.safetensors` for both); each reports missing
//! and unused keys and fails on a shape mismatch naming the key and both shapes.
#![warn(missing_docs)]

mod avsl;
mod bn_inception;
mod cascade;
mod error;
mod head;
mod host_bn;
mod host_conv;
mod host_conv_bn;
mod host_pool;
mod model;
mod resnet;
mod resnet_vjp;
mod small_cnn;
#[cfg(test)]
mod test_support;
mod weights;

pub use avsl::{AvslEmbedder, AvslEmbedderConfig, AvslLevel, AvslLevelOutput};
pub use bn_inception::{BnInception, BnInceptionConfig};
pub use error::ModelError;
pub use head::{EmbeddingHead, EmbeddingHeadConfig, Pooling, first_max_mask};
pub use model::{Backbone, BackboneConfig, EmbeddingModel, EmbeddingModelConfig};
pub use resnet::{BlockKind, FeatureMaps, ResNet, ResNetConfig};
pub use small_cnn::{SmallCnn, SmallCnnConfig};
pub use weights::{LoadReport, read_keys, read_tensors};
