//! A small CNN for CPU tests and the default demo.

use burn::module::Module;
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::pool::{MaxPool2d, MaxPool2dConfig};
use burn::nn::{BatchNorm, BatchNormConfig, PaddingConfig2d};
use burn::tensor::{Device, Tensor};

use crate::error::ModelError;
use crate::host_conv_bn::conv_bn;
use crate::host_pool::max_pool2d;
use crate::resnet::FeatureMaps;

dml_config::config! {
    /// Four conv(3×3)-BN-ReLU stages; every stage after the first halves the resolution
    /// with a 2×2 max-pool first (28² → 28, 14, 7, 3).
    #[derive(Debug, Clone, PartialEq)]
    pub struct SmallCnnConfig {
        /// Input channels (3 for RGB).
        pub in_channels: usize = 3,
        /// Output channels of the four stages.
        pub widths: [usize; 4] = [32, 64, 128, 256],
    }
}

impl SmallCnnConfig {
    /// Channels of the last feature map.
    pub fn out_channels(&self) -> usize {
        self.widths[3]
    }

    /// Builds the network with fresh weights on `device`.
    pub fn init(&self, device: &Device) -> Result<SmallCnn, ModelError> {
        if self.in_channels == 0 || self.widths.contains(&0) {
            return Err(ModelError::Config(format!(
                "small CNN channels must be positive (in {}, widths {:?})",
                self.in_channels, self.widths
            )));
        }
        let mut input = self.in_channels;
        let stages = self
            .widths
            .iter()
            .map(|&w| {
                let stage = ConvBnRelu {
                    conv: Conv2dConfig::new([input, w], [3, 3])
                        .with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1))
                        .with_bias(false)
                        .init(device),
                    bn: BatchNormConfig::new(w).init(device),
                };
                input = w;
                stage
            })
            .collect();
        Ok(SmallCnn {
            stages,
            pool: MaxPool2dConfig::new([2, 2]).init(),
        })
    }
}

/// One conv-BN-ReLU stage.
#[derive(Module, Debug)]
pub struct ConvBnRelu {
    conv: Conv2d,
    bn: BatchNorm,
}

/// The small CNN of [`SmallCnnConfig`].
#[derive(Module, Debug)]
pub struct SmallCnn {
    stages: Vec<ConvBnRelu>,
    pool: MaxPool2d,
}

impl SmallCnn {
    /// Freezes every batch-norm layer (running statistics used and not updated, affine
    /// parameters without gradient).
    pub fn freeze_batchnorm(self) -> Self {
        Self {
            stages: self
                .stages
                .into_iter()
                .map(|s| ConvBnRelu {
                    conv: s.conv,
                    bn: s.bn.freeze(),
                })
                .collect(),
            pool: self.pool,
        }
    }

    /// The names of the stages [`SmallCnn::forward_features`] returns, in order.
    pub const STAGE_NAMES: [&'static str; 4] = ["stage1", "stage2", "stage3", "stage4"];

    /// Runs the stages after `stage` (0-based) on `map`, that stage's output, and returns the
    /// last stage's map (`map` itself when `stage` is the last), for Grad-CAM at an inner stage.
    ///
    /// # Panics
    /// When `stage` is not below [`Self::STAGE_NAMES`]`.len()`.
    pub fn forward_from(&self, stage: usize, map: Tensor<4>) -> Tensor<4> {
        assert!(stage < self.stages.len(), "the small CNN has no stage {stage}");
        self.stages[stage + 1..]
            .iter()
            .fold(map, |x, s| conv_bn(&s.conv, &s.bn, max_pool2d(&self.pool, x), true))
    }

    /// `self` with stage `stage` (its convolution and batch norm) taken from `other`, a network of
    /// the same widths: one step of a cascading parameter randomisation (Adebayo et al., *Sanity
    /// Checks for Saliency Maps*, NeurIPS 2018) when `other` holds fresh weights.
    ///
    /// # Panics
    /// When `stage` is not below [`Self::STAGE_NAMES`]`.len()`.
    pub fn with_stage_from(mut self, stage: usize, other: &Self) -> Self {
        assert!(stage < self.stages.len(), "the small CNN has no stage {stage}");
        self.stages[stage] = other.stages[stage].clone();
        self
    }

    /// `[B, C, H, W]` → the four stage outputs, `[B, widths[s], H/2^s, W/2^s]`
    /// (floor division).
    pub fn forward_features(&self, images: Tensor<4>) -> FeatureMaps {
        let mut x = images;
        let mut stages = Vec::with_capacity(4);
        for (s, stage) in self.stages.iter().enumerate() {
            if s > 0 {
                x = max_pool2d(&self.pool, x);
            }
            x = conv_bn(&stage.conv, &stage.bn, x, true);
            stages.push(x.clone());
        }
        FeatureMaps { stages }
    }
}
