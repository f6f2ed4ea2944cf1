//! Embedding heads: pooling of the last feature map → linear → optional L2 normalisation.

use burn::module::Module;
use burn::nn::{Linear, LinearConfig};
use burn::tensor::{Device, Tensor};

use crate::error::ModelError;

/// How the last feature map `[B, C, H, W]` is pooled to `[B, C]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pooling {
    /// Global average pooling.
    Avg,
    /// Global max pooling.
    Max,
    /// The sum of global average and global max pooling (as in the DML literature,
    /// e.g. the Proxy-Anchor reference code).
    AvgMax,
}

/// Configuration of an [`EmbeddingHead`].
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct EmbeddingHeadConfig {
    /// Channels of the pooled feature map.
    pub in_channels: usize,
    /// Embedding dimension D.
    pub dim: usize,
    /// Pooling of the feature map.
    pub pooling: Pooling,
    /// L2-normalise the embeddings.
    pub normalize: bool,
}

impl EmbeddingHeadConfig {
    /// Builds the head on `device`.
    pub fn init(&self, device: &Device) -> Result<EmbeddingHead, ModelError> {
        if self.in_channels == 0 || self.dim == 0 {
            return Err(ModelError::Config(format!(
                "embedding head needs positive sizes (in {}, dim {})",
                self.in_channels, self.dim
            )));
        }
        Ok(EmbeddingHead {
            linear: LinearConfig::new(self.in_channels, self.dim).init(device),
            pooling: self.pooling,
            normalize: self.normalize,
        })
    }
}

/// Pooling → linear → optional L2 normalisation.
#[derive(Module, Debug)]
pub struct EmbeddingHead {
    linear: Linear,
    #[module(skip)]
    pooling: Pooling,
    #[module(skip)]
    normalize: bool,
}

impl EmbeddingHead {
    /// `[B, C, H, W]` → `[B, C]` by the configured pooling.
    pub fn pool(&self, features: Tensor<4>) -> Tensor<2> {
        let avg = || features.clone().mean_dim(3).mean_dim(2).flatten::<2>(1, 3);
        let max = || features.clone().max_dim(3).max_dim(2).flatten::<2>(1, 3);
        match self.pooling {
            Pooling::Avg => avg(),
            Pooling::Max => max(),
            Pooling::AvgMax => avg() + max(),
        }
    }

    /// Local embeddings: the head's linear projection applied to every location of
    /// `locations` `[B, L, C]` (one row per location of a feature map, e.g. a `G × G` grid),
    /// giving `[B, L, D]` without normalisation. These are DIML's local features `z^k` (Eq. 2),
    /// whose average-pooled mean is the global embedding before normalisation when the head
    /// average-pools, because the projection is linear.
    pub fn project_locations(&self, locations: Tensor<3>) -> Tensor<3> {
        self.linear.forward(locations)
    }

    /// `[B, C, H, W]` → embeddings `[B, D]`, unit-norm rows when normalising (a zero row
    /// stays zero instead of becoming NaN).
    pub fn forward(&self, features: Tensor<4>) -> Tensor<2> {
        let x = self.linear.forward(self.pool(features));
        if self.normalize {
            let norm = x.clone().square().sum_dim(1).sqrt().clamp_min(1e-12);
            x / norm
        } else {
            x
        }
    }
}
