//! A complete embedding network: a backbone chosen at run time and an embedding head.

use std::path::Path;

use burn::module::Module;
use burn::tensor::{Device, Tensor};

use crate::bn_inception::{BnInception, BnInceptionConfig};
use crate::error::ModelError;
use crate::head::{EmbeddingHead, EmbeddingHeadConfig, Pooling};
use crate::resnet::{FeatureMaps, ResNet, ResNetConfig};
use crate::small_cnn::{SmallCnn, SmallCnnConfig};
use crate::weights::LoadReport;

/// The backbone architectures selectable by name (`small_cnn`, `resnet18`, `resnet50`,
/// `bn_inception`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum BackboneConfig {
    /// The small four-stage CNN.
    SmallCnn(SmallCnnConfig),
    /// A torchvision-layout ResNet (headless: `num_classes` is ignored).
    ResNet(ResNetConfig),
    /// BN-Inception in Cadene's layout (headless: `num_classes` is ignored).
    BnInception(BnInceptionConfig),
}

impl BackboneConfig {
    /// The names accepted by [`BackboneConfig::from_name`].
    pub const NAMES: [&'static str; 4] = ["small_cnn", "resnet18", "resnet50", "bn_inception"];

    /// The standard configuration of a named backbone.
    pub fn from_name(name: &str) -> Result<Self, ModelError> {
        match name {
            "small_cnn" => Ok(Self::SmallCnn(SmallCnnConfig::default())),
            "resnet18" => Ok(Self::ResNet(ResNetConfig::resnet18())),
            "resnet50" => Ok(Self::ResNet(ResNetConfig::resnet50())),
            "bn_inception" => Ok(Self::BnInception(BnInceptionConfig::default())),
            other => Err(ModelError::Config(format!(
                "unknown backbone {other:?}; expected one of {:?}",
                Self::NAMES
            ))),
        }
    }

    /// Channels of the last feature map.
    pub fn out_channels(&self) -> usize {
        match self {
            Self::SmallCnn(c) => c.out_channels(),
            Self::ResNet(c) => c.out_channels(),
            Self::BnInception(c) => c.out_channels(),
        }
    }

    /// Builds the backbone with fresh weights.
    pub fn init(&self, device: &Device) -> Result<Backbone, ModelError> {
        Ok(match self {
            Self::SmallCnn(c) => Backbone::SmallCnn(c.init(device)?),
            Self::ResNet(c) => Backbone::ResNet(
                ResNetConfig {
                    num_classes: None,
                    ..c.clone()
                }
                .init(device)?,
            ),
            Self::BnInception(_) => Backbone::BnInception(BnInceptionConfig { num_classes: None }.init(device)?),
        })
    }
}

/// A backbone of either architecture, behind one `forward_features`.
#[derive(Module, Debug)]
#[allow(clippy::large_enum_variant)]
pub enum Backbone {
    /// The small CNN.
    SmallCnn(SmallCnn),
    /// A ResNet.
    ResNet(ResNet),
    /// BN-Inception.
    BnInception(BnInception),
}

impl Backbone {
    /// `[B, 3, H, W]` → every stage's feature map (4 stages for the small CNN; stem and
    /// layer1–4 for a ResNet; pool1, pool2, inception 3b, 4d and 5b for BN-Inception, see
    /// [`BnInception::forward_features`]).
    pub fn forward_features(&self, images: Tensor<4>) -> FeatureMaps {
        match self {
            Self::SmallCnn(m) => m.forward_features(images),
            Self::ResNet(m) => m.forward_features(images),
            Self::BnInception(m) => m.forward_features(images),
        }
    }

    /// The names of the stages [`Backbone::forward_features`] returns, in order (e.g.
    /// `stem`, `layer1` … `layer4` for a ResNet).
    pub fn stage_names(&self) -> &'static [&'static str] {
        match self {
            Self::SmallCnn(_) => &SmallCnn::STAGE_NAMES,
            Self::ResNet(_) => &ResNet::STAGE_NAMES,
            Self::BnInception(_) => &BnInception::STAGE_NAMES,
        }
    }

    /// The index of the stage called `name` in [`Backbone::forward_features`]; an unknown name
    /// is an error listing the backbone's stages.
    pub fn stage_index(&self, name: &str) -> Result<usize, ModelError> {
        let names = self.stage_names();
        names
            .iter()
            .position(|n| *n == name)
            .ok_or_else(|| ModelError::Config(format!("unknown stage {name:?}; this backbone's stages are {names:?}")))
    }

    /// Runs the stages after `stage` on `map` (that stage's output `[B, C_s, H_s, W_s]`) and
    /// returns the last stage's map, which the embedding head pools. With
    /// `forward_from(s, forward_features(x).stages[s])` equal to `forward_features(x).last()`,
    /// an explanation can detach an inner map, track its gradient and run the rest of the
    /// network (Grad-CAM at any stage).
    ///
    /// # Panics
    /// When `stage` is not a stage of this backbone (see [`Backbone::stage_index`]).
    pub fn forward_from(&self, stage: usize, map: Tensor<4>) -> Tensor<4> {
        match self {
            Self::SmallCnn(m) => m.forward_from(stage, map),
            Self::ResNet(m) => m.forward_from(stage, map),
            Self::BnInception(m) => m.forward_from(stage, map),
        }
    }

    /// The gradient of a function of the last stage with respect to the map of stage `stage`,
    /// as differentiable tensor operations in eval mode (see [`ResNet::backward_from`]): `map` is
    /// that stage's output, `grad` the function's gradient at the last stage. ResNets only; the
    /// last stage itself returns `grad`.
    pub fn backward_from(&self, stage: usize, map: Tensor<4>, grad: Tensor<4>) -> Result<Tensor<4>, ModelError> {
        if stage + 1 == self.stage_names().len() {
            return Ok(grad);
        }
        match self {
            Self::ResNet(m) => m.backward_from(stage, map, grad),
            _ => Err(ModelError::Config(format!(
                "a differentiable gradient at the inner stage {:?} exists for ResNet backbones only",
                self.stage_names().get(stage).copied().unwrap_or("?")
            ))),
        }
    }

    /// Loads a finished model's trunk: the keys under `prefix` (`""` for a trunk saved alone) of a
    /// torchvision-layout file (ResNet) or Cadene's (BN-Inception, whose first convolution is then
    /// turned to RGB input as in [`Backbone::load_pretrained`]). Every parameter must be there;
    /// keys the backbone has no place for (`fc.*`, another prefix) are reported as unused.
    pub fn load_trunk(&mut self, path: &Path, prefix: &str) -> Result<LoadReport, ModelError> {
        match self {
            Self::ResNet(m) => m.load_weights_prefixed(path, prefix, false),
            Self::BnInception(m) => {
                let report = m.load_weights_prefixed(path, prefix, false)?;
                *m = m.clone().swap_input_channels();
                Ok(report)
            }
            Self::SmallCnn(_) => Err(ModelError::Config(format!(
                "trunk {} given for the small CNN, which has no PyTorch layout",
                path.display()
            ))),
        }
    }

    /// Writes the trunk in its PyTorch layout as a safetensors file, the inverse of
    /// [`Backbone::load_trunk`]: torchvision's for a ResNet, Cadene's (BGR input) for BN-Inception.
    pub fn save_trunk(&self, path: &Path) -> Result<(), ModelError> {
        match self {
            Self::ResNet(m) => m.save_torchvision(path),
            Self::BnInception(m) => m.save_cadene(path),
            Self::SmallCnn(_) => Err(ModelError::Config(
                "the small CNN has no PyTorch counterpart to export its weights to".into(),
            )),
        }
    }

    /// Freezes every batch-norm layer (see [`ResNet::freeze_batchnorm`]).
    pub fn freeze_batchnorm(self) -> Self {
        match self {
            Self::SmallCnn(m) => Self::SmallCnn(m.freeze_batchnorm()),
            Self::ResNet(m) => Self::ResNet(m.freeze_batchnorm()),
            Self::BnInception(m) => Self::BnInception(m.freeze_batchnorm()),
        }
    }

    /// Loads pretrained weights (`.pth` or `.safetensors`): torchvision's layout for a
    /// ResNet, Cadene's `bninception` layout for BN-Inception (whose first convolution is then
    /// turned from BGR to RGB input, see [`BnInception::swap_input_channels`]). The classifier of
    /// an ImageNet checkpoint (`fc.*`, `last_linear.*`) is reported as unused. The small CNN has
    /// no pretrained layout.
    pub fn load_pretrained(&mut self, path: &Path) -> Result<LoadReport, ModelError> {
        match self {
            Self::ResNet(m) => m.load_weights(path, false),
            // Cadene's weights expect BGR input; this workspace's images are RGB.
            Self::BnInception(m) => {
                let report = m.load_weights(path, false)?;
                *m = m.clone().swap_input_channels();
                Ok(report)
            }
            Self::SmallCnn(_) => Err(ModelError::Config(format!(
                "pretrained weights {} given for the small CNN, which has no pretrained layout",
                path.display()
            ))),
        }
    }
}

/// Configuration of an [`EmbeddingModel`].
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct EmbeddingModelConfig {
    /// The backbone.
    pub backbone: BackboneConfig,
    /// Embedding dimension D.
    pub dim: usize,
    /// Pooling of the last feature map.
    pub pooling: Pooling,
    /// L2-normalise the embeddings.
    pub normalize: bool,
    /// Freeze every batch-norm layer of the backbone (running statistics and affine).
    pub freeze_batchnorm: bool,
}

impl EmbeddingModelConfig {
    /// Builds the model with fresh weights.
    pub fn init(&self, device: &Device) -> Result<EmbeddingModel, ModelError> {
        let backbone = self.backbone.init(device)?;
        let head = EmbeddingHeadConfig {
            in_channels: self.backbone.out_channels(),
            dim: self.dim,
            pooling: self.pooling,
            normalize: self.normalize,
        }
        .init(device)?;
        let backbone = if self.freeze_batchnorm {
            backbone.freeze_batchnorm()
        } else {
            backbone
        };
        Ok(EmbeddingModel { backbone, head })
    }
}

/// Backbone → last feature map → [`EmbeddingHead`] → embeddings `[B, D]`.
#[derive(Module, Debug)]
pub struct EmbeddingModel {
    /// The feature extractor (its own learning-rate group in training).
    pub backbone: Backbone,
    /// Pooling and projection to D (its own learning-rate group in training).
    pub head: EmbeddingHead,
}

impl EmbeddingModel {
    /// `[B, 3, H, W]` → embeddings `[B, D]`.
    pub fn forward(&self, images: Tensor<4>) -> Tensor<2> {
        self.forward_with_features(images).0
    }

    /// `[B, 3, H, W]` → (embeddings `[B, D]`, every stage's feature map), for methods that
    /// also use the maps (DIML's structural matching, AVSL, Grad-CAM).
    pub fn forward_with_features(&self, images: Tensor<4>) -> (Tensor<2>, FeatureMaps) {
        let maps = self.backbone.forward_features(images);
        let embeddings = self.head.forward(maps.last().clone());
        (embeddings, maps)
    }
}
