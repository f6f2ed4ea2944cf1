//! The sections of a run's configuration other than the loss, the miner and the method sections.

use std::path::PathBuf;

use dml_models::Pooling;
use serde::{Deserialize, Serialize};

dml_config::config! {
    /// Dataset and input pipeline.
    #[derive(Debug, Clone)]
    pub struct DataConfig {
        /// `synth`, `synth-parts`, `fashion-mnist`, a set prepared under `root`, or the path of a
        /// `manifest.csv`.
        pub dataset: String = "synth".into(),
        /// Directory of the named datasets.
        pub root: PathBuf = "data".into(),
        /// Network input side in pixels.
        pub image_size: u32 = 48,
        /// Evaluation: the side the shorter image side is resized to before the centre crop of
        /// `image_size` (0: `image_size` itself, no margin). PyTorch's usual evaluation transform
        /// (pytorch-metric-learning's, torchvision's) resizes to `round(image_size · 256 / 224)`.
        pub eval_resize: u32 = 0,
        /// Random-resized-crop and flip for training.
        pub augment: bool = true,
        /// Hold out the last N training classes as `val` (0: keep the manifest's splits).
        pub val_classes: usize = 0,
        /// Decoding threads (0: one per core).
        pub threads: usize = 0,
        /// Images generated for the synthetic set.
        pub synth_images: usize = 4000,
        /// Side of the generated synthetic images.
        pub synth_size: u32 = 64,
        /// Per-channel (RGB) mean subtracted from pixels scaled to [0, 1]: ImageNet's suit
        /// torchvision's weights (and runs written before the key existed); Cadene's
        /// BN-Inception weights want `[128, 117, 104]/255`.
        pub mean: [f32; 3] = dml_data::transform::IMAGENET_MEAN,
        /// Per-channel (RGB) standard deviation divided by after the mean: ImageNet's suit
        /// torchvision's weights; Cadene's BN-Inception weights, trained on pixels in
        /// [0, 255], want `1/255`.
        pub std: [f32; 3] = dml_data::transform::IMAGENET_STD,
    }
}

dml_config::config! {
    /// Backbone and embedding head.
    #[derive(Debug, Clone)]
    pub struct ModelConfig {
        /// `small_cnn`, `resnet18`, `resnet50` or `bn_inception`.
        pub backbone: String = "small_cnn".into(),
        /// Pretrained weights (`.pth` / `.safetensors`): torchvision's for a ResNet, Cadene's
        /// `bninception` for BN-Inception; empty for none.
        pub pretrained: String = String::new(),
        /// Embedding dimension D.
        pub embedding_dim: usize = 64,
        /// Widths of linear layers between the pooled features and the projection to D (an
        /// imported pytorch-metric-learning embedder of several layers; empty: one linear layer).
        pub embedder_hidden: Vec<usize> = Vec::new(),
        /// A ReLU after each of those layers (`nn.Sequential(Linear, ReLU, Linear)`), or none
        /// (pytorch-metric-learning's `MLP`).
        pub embedder_relu: bool = true,
        /// Pooling of the last feature map.
        pub pooling: Pooling = Pooling::Avg,
        /// L2-normalise the embeddings (and evaluate with cosine similarity).
        pub normalize: bool = true,
        /// Freeze every batch-norm layer of the backbone.
        pub freeze_batchnorm: bool = false,
    }
}

/// The optimiser family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OptimizerKind {
    /// Adam (Kingma & Ba), L2 weight decay added to the gradient.
    Adam,
    /// AdamW (Loshchilov & Hutter), decoupled weight decay.
    Adamw,
    /// SGD with momentum.
    Sgd,
}

dml_config::config! {
    /// Optimiser and per-group learning rates.
    #[derive(Debug, Clone)]
    pub struct OptimizerConfig {
        /// The optimiser.
        pub name: OptimizerKind = OptimizerKind::Adam,
        /// Learning rate of the backbone.
        pub lr_backbone: f64 = 1e-3,
        /// Learning rate of the embedding head.
        pub lr_head: f64 = 1e-3,
        /// Learning rate of the loss's parameters (proxies, class weights, β).
        pub lr_loss: f64 = 1e-2,
        /// Weight decay (L2 for Adam and SGD, decoupled for AdamW).
        pub weight_decay: f64 = 0.0,
        /// SGD momentum.
        pub momentum: f64 = 0.9,
    }
}

dml_config::config! {
    /// Step learning-rate schedule: `lr · gamma^(epoch / step_epochs)`.
    #[derive(Debug, Clone)]
    pub struct ScheduleConfig {
        /// Epochs between decays (0: constant).
        pub step_epochs: usize = 0,
        /// Decay factor.
        pub gamma: f64 = 0.5,
    }
}

impl ScheduleConfig {
    /// The learning-rate factor during (0-based) `epoch`.
    pub fn factor(&self, epoch: usize) -> f64 {
        match epoch.checked_div(self.step_epochs) {
            None => 1.0,
            Some(steps) => self.gamma.powi(steps as i32),
        }
    }
}

dml_config::config! {
    /// Epochs and batches.
    #[derive(Debug, Clone)]
    pub struct LoopConfig {
        /// Training epochs.
        pub epochs: usize = 6,
        /// Images per batch.
        pub batch_size: usize = 40,
        /// Images per class in a batch.
        pub m: usize = 8,
        /// Images per epoch (0: the training split's size).
        pub samples_per_epoch: usize = 0,
    }
}

/// The metric used to pick the best checkpoint on `val`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SelectBy {
    /// Precision@1.
    PrecisionAt1,
    /// R-Precision.
    RPrecision,
    /// MAP@R.
    MapAtR,
}

dml_config::config! {
    /// Evaluation and best-model selection.
    #[derive(Debug, Clone)]
    pub struct EvalConfig {
        /// Evaluate every N epochs (0: only before and after training).
        pub every: usize = 1,
        /// The split whose metrics are reported (`test`, `val`, `train`, …).
        pub split: String = "test".into(),
        /// Best-checkpoint criterion on the `val` split.
        pub select_by: SelectBy = SelectBy::MapAtR,
        /// Images per forward pass when embedding.
        pub batch_size: usize = 128,
    }
}
