//! ResNet-18/50 in torchvision's layout (He et al., 2016; `torchvision.models.resnet`).

use std::path::Path;

use burn::module::Module;
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::pool::{MaxPool2d, MaxPool2dConfig};
use burn::nn::{BatchNorm, BatchNormConfig, Linear, LinearConfig, PaddingConfig2d};
use burn::tensor::activation::relu;
use burn::tensor::{Device, Tensor};

use crate::error::ModelError;
use crate::host_conv_bn::conv_bn;
use crate::host_pool::max_pool2d;
use crate::weights::{self, KeyLayout, LoadReport, WeightFormat};

/// The residual block type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum BlockKind {
    /// Two 3×3 convolutions (ResNet-18/34), expansion 1.
    Basic,
    /// 1×1 → 3×3 (strided) → 1×1 convolutions (ResNet-50/101/152), expansion 4.
    Bottleneck,
}

impl BlockKind {
    /// Output channels per unit of stage width.
    pub fn expansion(self) -> usize {
        match self {
            BlockKind::Basic => 1,
            BlockKind::Bottleneck => 4,
        }
    }
}

/// A ResNet's architecture: block type, blocks per stage and stage widths.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ResNetConfig {
    /// Residual block type.
    pub block: BlockKind,
    /// Blocks in layer1–layer4 (ResNet-18: 2,2,2,2; ResNet-50: 3,4,6,3).
    pub layers: [usize; 4],
    /// Base widths of layer1–layer4 (torchvision: 64,128,256,512); a stage outputs
    /// `width · expansion` channels.
    pub widths: [usize; 4],
    /// Classes of the `fc` layer, or `None` for a headless backbone.
    pub num_classes: Option<usize>,
}

impl ResNetConfig {
    /// torchvision's `resnet18` (without the classifier unless `num_classes` is set).
    pub fn resnet18() -> Self {
        Self {
            block: BlockKind::Basic,
            layers: [2, 2, 2, 2],
            widths: [64, 128, 256, 512],
            num_classes: None,
        }
    }

    /// torchvision's `resnet50` (without the classifier unless `num_classes` is set).
    pub fn resnet50() -> Self {
        Self {
            block: BlockKind::Bottleneck,
            layers: [3, 4, 6, 3],
            widths: [64, 128, 256, 512],
            num_classes: None,
        }
    }

    /// Channels of the last feature map (`widths[3] · expansion`: 512 for ResNet-18,
    /// 2048 for ResNet-50).
    pub fn out_channels(&self) -> usize {
        self.widths[3] * self.block.expansion()
    }

    /// Builds the network with fresh (Kaiming) weights on `device`.
    pub fn init(&self, device: &Device) -> Result<ResNet, ModelError> {
        if self.layers.contains(&0) || self.widths.contains(&0) || self.num_classes == Some(0) {
            return Err(ModelError::Config(format!(
                "every stage needs at least one block and a positive width (layers {:?}, widths {:?}, classes {:?})",
                self.layers, self.widths, self.num_classes
            )));
        }
        let stem = self.widths[0];
        let conv1 = conv(3, stem, 7, 2, 3, device);
        let bn1 = BatchNormConfig::new(stem).init(device);
        let maxpool = MaxPool2dConfig::new([3, 3])
            .with_strides([2, 2])
            .with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1))
            .init();
        let mut in_channels = stem;
        let mut stages: Vec<Vec<Block>> = Vec::with_capacity(4);
        for (stage, (&blocks, &width)) in self.layers.iter().zip(&self.widths).enumerate() {
            let stride = if stage == 0 { 1 } else { 2 };
            let out_channels = width * self.block.expansion();
            let mut layer = Vec::with_capacity(blocks);
            for b in 0..blocks {
                let s = if b == 0 { stride } else { 1 };
                layer.push(Block::new(self.block, in_channels, width, s, device));
                in_channels = out_channels;
            }
            stages.push(layer);
        }
        let fc = self.num_classes.map(|c| LinearConfig::new(in_channels, c).init(device));
        let mut stages = stages.into_iter();
        let mut next = || stages.next().expect("four stages");
        Ok(ResNet {
            conv1,
            bn1,
            maxpool,
            layer1: next(),
            layer2: next(),
            layer3: next(),
            layer4: next(),
            fc,
        })
    }
}

fn conv(inp: usize, out: usize, kernel: usize, stride: usize, pad: usize, device: &Device) -> Conv2d {
    Conv2dConfig::new([inp, out], [kernel, kernel])
        .with_stride([stride, stride])
        .with_padding(PaddingConfig2d::Explicit(pad, pad, pad, pad))
        .with_bias(false)
        .init(device)
}

/// The 1×1 strided projection of a block's shortcut (torchvision's `downsample.0/1`).
#[derive(Module, Debug)]
pub struct Downsample {
    pub(crate) conv: Conv2d,
    pub(crate) bn: BatchNorm,
}

/// A residual block. A basic block has no `conv3`/`bn3`; a bottleneck has both. The
/// field names are torchvision's, so state-dict keys map one to one.
#[derive(Module, Debug)]
pub struct Block {
    pub(crate) conv1: Conv2d,
    pub(crate) bn1: BatchNorm,
    pub(crate) conv2: Conv2d,
    pub(crate) bn2: BatchNorm,
    pub(crate) conv3: Option<Conv2d>,
    pub(crate) bn3: Option<BatchNorm>,
    pub(crate) downsample: Option<Downsample>,
}

impl Block {
    fn new(kind: BlockKind, in_channels: usize, width: usize, stride: usize, device: &Device) -> Self {
        let out_channels = width * kind.expansion();
        let downsample = (stride != 1 || in_channels != out_channels).then(|| Downsample {
            conv: conv(in_channels, out_channels, 1, stride, 0, device),
            bn: BatchNormConfig::new(out_channels).init(device),
        });
        match kind {
            BlockKind::Basic => Self {
                conv1: conv(in_channels, width, 3, stride, 1, device),
                bn1: BatchNormConfig::new(width).init(device),
                conv2: conv(width, width, 3, 1, 1, device),
                bn2: BatchNormConfig::new(width).init(device),
                conv3: None,
                bn3: None,
                downsample,
            },
            // torchvision (ResNet v1.5) strides the 3×3 convolution, not the first 1×1.
            BlockKind::Bottleneck => Self {
                conv1: conv(in_channels, width, 1, 1, 0, device),
                bn1: BatchNormConfig::new(width).init(device),
                conv2: conv(width, width, 3, stride, 1, device),
                bn2: BatchNormConfig::new(width).init(device),
                conv3: Some(conv(width, out_channels, 1, 1, 0, device)),
                bn3: Some(BatchNormConfig::new(out_channels).init(device)),
                downsample,
            },
        }
    }

    fn freeze_batchnorm(self) -> Self {
        Self {
            bn1: self.bn1.freeze(),
            bn2: self.bn2.freeze(),
            bn3: self.bn3.map(Module::freeze),
            downsample: self.downsample.map(|d| Downsample {
                conv: d.conv,
                bn: d.bn.freeze(),
            }),
            ..self
        }
    }

    /// `[B, C_in, H, W]` → `[B, C_out, H/stride, W/stride]`.
    fn forward(&self, x: Tensor<4>) -> Tensor<4> {
        let identity = match &self.downsample {
            Some(d) => conv_bn(&d.conv, &d.bn, x.clone(), false),
            None => x.clone(),
        };
        let mut out = conv_bn(&self.conv1, &self.bn1, x, true);
        // A bottleneck's second block is rectified before its third; a basic block's second
        // block (the last) is rectified after the residual sum.
        let bottleneck = self.conv3.is_some();
        out = conv_bn(&self.conv2, &self.bn2, out, bottleneck);
        if let (Some(conv3), Some(bn3)) = (&self.conv3, &self.bn3) {
            out = conv_bn(conv3, bn3, out, false);
        }
        relu(out + identity)
    }
}

/// A ResNet backbone (and optional classifier) in torchvision's layout.
#[derive(Module, Debug)]
pub struct ResNet {
    conv1: Conv2d,
    bn1: BatchNorm,
    maxpool: MaxPool2d,
    pub(crate) layer1: Vec<Block>,
    pub(crate) layer2: Vec<Block>,
    pub(crate) layer3: Vec<Block>,
    pub(crate) layer4: Vec<Block>,
    fc: Option<Linear>,
}

/// Every stage's output of a backbone.
#[derive(Debug, Clone)]
pub struct FeatureMaps {
    /// The stage outputs from the input side on, each `[B, C_s, H_s, W_s]`. A ResNet gives
    /// `[stem, layer1, layer2, layer3, layer4]` (spatial sizes 56, 56, 28, 14, 7 for a 224²
    /// input), BN-Inception `[pool1, pool2, inception_3b, inception_4d, inception_5b]` (56, 28,
    /// 28, 14, 7; see [`BnInception::forward_features`](crate::BnInception::forward_features)),
    /// the small CNN its four stages.
    pub stages: Vec<Tensor<4>>,
}

impl FeatureMaps {
    /// The last stage (`layer4`, `inception_5b`), the map the embedding head pools.
    pub fn last(&self) -> &Tensor<4> {
        self.stages.last().expect("a backbone has stages")
    }
}

impl ResNet {
    /// The stem and the four stages: `[B, 3, H, W]` → [`FeatureMaps`].
    pub fn forward_features(&self, images: Tensor<4>) -> FeatureMaps {
        let stem = max_pool2d(&self.maxpool, conv_bn(&self.conv1, &self.bn1, images, true));
        let mut stages = vec![stem];
        for layer in [&self.layer1, &self.layer2, &self.layer3, &self.layer4] {
            let x = layer
                .iter()
                .fold(stages.last().expect("stem").clone(), |x, block| block.forward(x));
            stages.push(x);
        }
        FeatureMaps { stages }
    }

    /// The names of the stages [`ResNet::forward_features`] returns, in order.
    pub const STAGE_NAMES: [&'static str; 5] = ["stem", "layer1", "layer2", "layer3", "layer4"];

    /// Runs the stages after `stage` on `map`, the output of stage `stage` (0: the stem,
    /// 4: `layer4`), and returns the last map (`layer4`); `map` itself when `stage` is the last.
    /// Grad-CAM at an inner stage needs the rest of the network as a function of that stage's map.
    ///
    /// # Panics
    /// When `stage` is not below [`Self::STAGE_NAMES`]`.len()`.
    pub fn forward_from(&self, stage: usize, map: Tensor<4>) -> Tensor<4> {
        assert!(stage < Self::STAGE_NAMES.len(), "ResNet has no stage {stage}");
        let layers = [&self.layer1, &self.layer2, &self.layer3, &self.layer4];
        layers[stage..]
            .iter()
            .flat_map(|layer| layer.iter())
            .fold(map, |x, block| block.forward(x))
    }

    /// `self` with stage `stage` (0: the stem's convolution and batch norm, 1–4: `layer1`–`layer4`)
    /// taken from `other`, a ResNet of the same depth: one step of a cascading parameter
    /// randomisation (Adebayo et al., NeurIPS 2018) when `other` holds fresh weights.
    ///
    /// # Panics
    /// When `stage` is not below [`Self::STAGE_NAMES`]`.len()`.
    pub fn with_stage_from(mut self, stage: usize, other: &Self) -> Self {
        match stage {
            0 => {
                self.conv1 = other.conv1.clone();
                self.bn1 = other.bn1.clone();
            }
            1 => self.layer1 = other.layer1.clone(),
            2 => self.layer2 = other.layer2.clone(),
            3 => self.layer3 = other.layer3.clone(),
            4 => self.layer4 = other.layer4.clone(),
            _ => panic!("ResNet has no stage {stage}"),
        }
        self
    }

    /// Classifier logits `[B, num_classes]` (global average pooling of `layer4`, then
    /// `fc`), or `None` for a headless backbone.
    pub fn forward_logits(&self, images: Tensor<4>) -> Option<Tensor<2>> {
        let fc = self.fc.as_ref()?;
        let maps = self.forward_features(images);
        let pooled: Tensor<2> = maps.last().clone().mean_dim(3).mean_dim(2).flatten(1, 3);
        Some(fc.forward(pooled))
    }

    /// Loads a torchvision `state_dict` saved with `torch.save` (`.pth`).
    ///
    /// Keys map one to one except torchvision's `downsample.0/1`, which become
    /// `downsample.conv/bn`. A tensor whose shape differs from the model's is an error
    /// naming the key and both shapes; a parameter the file lacks is an error unless
    /// `allow_missing` (e.g. a fresh classifier). Tensors the model has no place for are
    /// returned in [`LoadReport::unused`].
    pub fn load_torchvision(&mut self, path: &Path, allow_missing: bool) -> Result<LoadReport, ModelError> {
        weights::load(self, path, WeightFormat::Pytorch, &TORCHVISION_KEYS, allow_missing)
    }

    /// Loads a torchvision-layout `state_dict` stored as safetensors (for example one
    /// exported with `safetensors.torch.save_file(model.state_dict(), ...)`), with the
    /// same key mapping, PyTorch → Burn naming (`weight`/`bias` → `gamma`/`beta` for
    /// batch norm, transposed linear weights) and error reporting as
    /// [`ResNet::load_torchvision`].
    pub fn load_safetensors(&mut self, path: &Path, allow_missing: bool) -> Result<LoadReport, ModelError> {
        weights::load(self, path, WeightFormat::Safetensors, &TORCHVISION_KEYS, allow_missing)
    }

    /// Loads `.pth` or `.safetensors` by file extension.
    pub fn load_weights(&mut self, path: &Path, allow_missing: bool) -> Result<LoadReport, ModelError> {
        weights::load(self, path, WeightFormat::of(path)?, &TORCHVISION_KEYS, allow_missing)
    }

    /// The weights as a torchvision `state_dict` in a safetensors file (`fc` absent: a trunk with
    /// `fc = Identity`), which `torchvision.models.resnet18(); model.fc = Identity();
    /// model.load_state_dict(safetensors.torch.load_file(path))` takes as it is.
    pub fn save_torchvision(&self, path: &Path) -> Result<(), ModelError> {
        let tensors = weights::pytorch_tensors(self, torchvision_name)?;
        weights::write_safetensors(path, &tensors)
    }

    /// [`ResNet::load_weights`] of the keys under `prefix` (e.g. `trunk.` of a whole
    /// pytorch-metric-learning model); every other key is reported as unused.
    pub fn load_weights_prefixed(
        &mut self,
        path: &Path,
        prefix: &str,
        allow_missing: bool,
    ) -> Result<LoadReport, ModelError> {
        weights::load_prefixed(
            self,
            path,
            WeightFormat::of(path)?,
            &TORCHVISION_KEYS,
            prefix,
            allow_missing,
        )
    }

    /// Freezes every batch-norm layer: running statistics are used and no longer
    /// updated, and the affine parameters receive no gradient (the "frozen BN" of the
    /// DML papers' training recipes, e.g. Proxy-Anchor and DIML).
    pub fn freeze_batchnorm(self) -> Self {
        let freeze_blocks = |blocks: Vec<Block>| blocks.into_iter().map(Block::freeze_batchnorm).collect();
        Self {
            bn1: self.bn1.freeze(),
            layer1: freeze_blocks(self.layer1),
            layer2: freeze_blocks(self.layer2),
            layer3: freeze_blocks(self.layer3),
            layer4: freeze_blocks(self.layer4),
            ..self
        }
    }
}

/// torchvision's `state_dict` keys ↔ the fields of [`ResNet`]: only a block's shortcut is
/// named differently (`downsample.0/1` there, `downsample.conv/bn` here).
const TORCHVISION_KEYS: KeyLayout = KeyLayout {
    to_model: |key| {
        key.replace(".downsample.0.", ".downsample.conv.")
            .replace(".downsample.1.", ".downsample.bn.")
    },
    to_file: torchvision_name,
};

/// Burn parameter path → the torchvision key a user would look for.
fn torchvision_name(key: &str) -> String {
    key.replace(".downsample.conv.", ".downsample.0.")
        .replace(".downsample.bn.", ".downsample.1.")
        .replace(".gamma", ".weight")
        .replace(".beta", ".bias")
}
