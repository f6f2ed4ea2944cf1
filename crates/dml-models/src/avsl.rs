//! AVSL's multi-level embedder (Zhang et al., "Attributable Visual Similarity Learning", CVPR
//! 2022, Sec. 3.4, Eq. 15–21): an `r`-dimensional embedding and its class-activation map at each
//! of several backbone stages.
//!
//! At level `l` the stage map `z` `[B, c, h, w]` is projected by a 1×1 convolution `W` `[r, c]`,
//! `b` `[r]`:
//!
//! - embedding `e = W (avgpool z + maxpool z) + b` (Eq. 15–16);
//! - CAM `u = W (z + g̃(z)) + b` per location, with `g̃(z)` = `h·w·z` at each channel's first
//!   maximum (row-major) and 0 elsewhere (Eq. 19–21), the "linearised" max pooling whose spatial
//!   mean is the max pool, so that the CAM's spatial mean equals the embedding exactly (the CAM
//!   includes the bias, as the authors' code).

use burn::module::{Module, Param};
use burn::nn::{Linear, LinearConfig};
use burn::tensor::{Device, Tensor};

use crate::error::ModelError;

/// One level of the embedder: the 1×1 convolution of a stage map.
#[derive(Module, Debug)]
pub struct AvslLevel {
    projection: Linear,
}

/// What one level produces for a batch.
#[derive(Debug, Clone)]
pub struct AvslLevelOutput {
    /// The embedding `e` `[B, r]` (Eq. 16), not normalised.
    pub embedding: Tensor<2>,
    /// The class-activation map `u` `[B, r, h, w]` (Eq. 21), whose spatial mean is `e`.
    pub cam: Tensor<4>,
}

impl AvslLevel {
    /// A level with fresh weights for `channels` input channels and `dim` (`r`) outputs.
    pub fn new(channels: usize, dim: usize, device: &Device) -> Result<Self, ModelError> {
        if channels == 0 || dim == 0 {
            return Err(ModelError::Config(format!(
                "an AVSL level needs positive sizes (channels {channels}, dim {dim})"
            )));
        }
        Ok(Self {
            projection: LinearConfig::new(channels, dim).init(device),
        })
    }

    /// A level with the given 1×1 convolution: `weight` `[r, c]` (PyTorch's `Conv2d` weight
    /// without its 1×1 kernel dimensions) and `bias` `[r]`; sizes that do not fit are an error
    /// naming both shapes.
    pub fn from_weights(weight: Tensor<2>, bias: Tensor<1>) -> Result<Self, ModelError> {
        let [r, c] = weight.dims();
        let [rb] = bias.dims();
        if r != rb || r == 0 || c == 0 {
            return Err(ModelError::Config(format!(
                "AVSL 1x1 convolution weight [{r}, {c}] and bias [{rb}] do not fit (want [r, c] and [r])"
            )));
        }
        let mut projection = LinearConfig::new(c, r).init(&weight.device());
        // Burn stores a linear layer's weight as [in, out], the transpose of the convolution's.
        projection.weight = Param::from_tensor(weight.transpose());
        projection.bias = Some(Param::from_tensor(bias));
        Ok(Self { projection })
    }

    /// The embedding and CAM of the stage map `z` `[B, c, h, w]` (see the module documentation).
    pub fn forward(&self, z: Tensor<4>) -> AvslLevelOutput {
        let [b, c, h, w] = z.dims();
        let flat = z.clone().reshape([b, c, h * w]);
        let pooled = flat.clone().mean_dim(2) + flat.clone().max_dim(2);
        let embedding = self.projection.forward(pooled.reshape([b, c]));
        // g̃(z): h·w·z at the first maximum of each channel, so that its spatial mean is the max pool.
        let at_max = crate::head::first_max_mask(z).reshape([b, c, h * w]);
        let linearised = flat.clone() + at_max * flat.mul_scalar((h * w) as f64);
        // The 1×1 convolution is the linear layer applied at every location: [B, hw, c] → [B, hw, r].
        let per_location = self.projection.forward(linearised.swap_dims(1, 2));
        let r = per_location.dims()[2];
        let cam = per_location.swap_dims(1, 2).reshape([b, r, h, w]);
        AvslLevelOutput { embedding, cam }
    }
}

dml_config::config! {
    /// Which backbone stages AVSL embeds and into how many dimensions (Zhang et al., Sec. 4.1:
    /// ResNet `layer2`–`layer4`).
    #[derive(Debug, Clone, PartialEq)]
    pub struct AvslEmbedderConfig {
        /// Stage names, low to high (see `Backbone::stage_names`); empty: the backbone's last three
        /// stages (`layer2`–`layer4` of a ResNet, `stage2`–`stage4` of the small CNN,
        /// `inception_3b`, `inception_4d`, `inception_5b` of BN-Inception).
        pub stages: Vec<String> = Vec::new(),
        /// Dimensions `r` of every level's embedding.
        pub dim: usize = 128,
    }
}

/// AVSL's embedder: one [`AvslLevel`] per chosen backbone stage.
#[derive(Module, Debug)]
pub struct AvslEmbedder {
    /// The levels, low to high.
    pub levels: Vec<AvslLevel>,
    /// The backbone stage index of each level.
    #[module(skip)]
    pub stages: Vec<usize>,
}

impl AvslEmbedderConfig {
    /// Builds the embedder for `backbone`: the stages are resolved by name (an unknown one is an
    /// error listing the backbone's) and their channel counts read from one forward pass of a
    /// 64 × 64 image, so that every backbone and any stage choice work alike.
    pub fn init(&self, backbone: &crate::Backbone, device: &Device) -> Result<AvslEmbedder, ModelError> {
        let names = backbone.stage_names();
        let stages: Vec<usize> = if self.stages.is_empty() {
            (names.len().saturating_sub(3)..names.len()).collect()
        } else {
            self.stages
                .iter()
                .map(|s| backbone.stage_index(s))
                .collect::<Result<_, _>>()?
        };
        if stages.len() < 2 || stages.windows(2).any(|w| w[0] >= w[1]) {
            return Err(ModelError::Config(format!(
                "AVSL needs at least two stages in increasing order, got {:?}",
                stages.iter().map(|&s| names[s]).collect::<Vec<_>>()
            )));
        }
        // The probe runs on the inference copy: in training mode it would fold a batch of zeros
        // into batch norm's running statistics (which a resumed run would not see).
        let probe = backbone
            .valid()
            .forward_features(Tensor::zeros([1, 3, 64, 64], &device.clone().without_autodiff()));
        let levels = stages
            .iter()
            .map(|&s| AvslLevel::new(probe.stages[s].dims()[1], self.dim, device))
            .collect::<Result<_, _>>()?;
        Ok(AvslEmbedder { levels, stages })
    }
}

impl AvslEmbedder {
    /// Every level's embedding and CAM from the backbone's stage maps.
    pub fn forward(&self, maps: &crate::FeatureMaps) -> Vec<AvslLevelOutput> {
        self.levels
            .iter()
            .zip(&self.stages)
            .map(|(level, &s)| level.forward(maps.stages[s].clone()))
            .collect()
    }
}
