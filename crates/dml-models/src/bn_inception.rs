//! BN-Inception (Ioffe & Szegedy, 2015, "Batch Normalization: Accelerating Deep Network
//! Training by Reducing Internal Covariate Shift"), the Inception network with batch norm that
//! most deep-metric-learning papers use as their backbone, in the layout of Cadene's
//! `pretrainedmodels.bninception` so that its ImageNet `state_dict` loads key for key.
//!
//! Every convolution has a bias and is followed by batch norm (ε = 1e-5) and ReLU. The stem is
//! `conv1_7x7_s2` (7×7, stride 2, 64) → max-pool → `conv2_3x3_reduce` (1×1, 64) → `conv2_3x3`
//! (3×3, 192) → max-pool, both pools 3×3 with stride 2 and the output size rounded up
//! (PyTorch's `ceil_mode=True`). Ten Inception modules follow; each concatenates, along the
//! channels and in this order, a 1×1 branch, a 1×1 → 3×3 branch, a 1×1 → 3×3 → 3×3 ("double
//! 3×3") branch and a pool branch. The channel counts, read from Cadene's `bninception.py`
//! (the Caffe model its weights were converted from), are:
//!
//! | module | in   | 1×1 | 3×3 reduce | 3×3     | double reduce | double 3×3 | pool branch     | out  |
//! |--------|------|-----|------------|---------|---------------|------------|-----------------|------|
//! | 3a     | 192  | 64  | 64         | 64      | 64            | 96         | avg → 32        | 256  |
//! | 3b     | 256  | 64  | 64         | 96      | 64            | 96         | avg → 64        | 320  |
//! | 3c     | 320  | –   | 128        | 160 /2  | 64            | 96 /2      | max /2 (320)    | 576  |
//! | 4a     | 576  | 224 | 64         | 96      | 96            | 128        | avg → 128       | 576  |
//! | 4b     | 576  | 192 | 96         | 128     | 96            | 128        | avg → 128       | 576  |
//! | 4c     | 576  | 160 | 128        | 160     | 128           | 160        | avg → 128       | 608  |
//! | 4d     | 608  | 96  | 128        | 192     | 160           | 192        | avg → 128       | 608  |
//! | 4e     | 608  | –   | 128        | 192 /2  | 192           | 256 /2     | max /2 (608)    | 1056 |
//! | 5a     | 1056 | 352 | 192        | 320     | 160           | 224        | avg → 128       | 1024 |
//! | 5b     | 1024 | 352 | 192        | 320     | 192           | 224        | max → 128       | 1024 |
//!
//! "avg → n" is a 3×3 average pool with stride 1 and padding 1 that counts the padding (PyTorch's
//! default `count_include_pad=True`), then a 1×1 projection `pool_proj` to n channels; "max → n"
//! the same with a max pool. The reduction modules 3c and 4e ("/2") have no 1×1 branch, stride
//! the 3×3 and the second double-3×3 convolution by 2, and pass a 3×3 stride-2 max pool of their
//! input (rounded up) through unprojected. A 224² input gives a 1024 × 7 × 7 map.
//!
//! Burn 0.22.1's `MaxPool2dConfig` has `ceil_mode` and its `AvgPool2dConfig` has both
//! `ceil_mode` and `count_include_pad` (default true), so neither is emulated here.

use std::path::Path;

use burn::module::{Module, Param};
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::pool::{AvgPool2dConfig, MaxPool2dConfig};
use burn::nn::{BatchNorm, BatchNormConfig, Linear, LinearConfig, PaddingConfig2d};
use burn::tensor::{Device, Tensor};

use crate::error::ModelError;
use crate::host_conv_bn::conv_bn;
use crate::host_pool::max_pool2d;
use crate::resnet::FeatureMaps;
use crate::weights::{self, KeyLayout, LoadReport, WeightFormat};

/// Channels of the stem's output (`conv2_3x3`), the input of `inception_3a`.
const STEM_CHANNELS: usize = 192;

/// The pool branch of an Inception module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PoolKind {
    /// 3×3 average pool, stride 1, padding 1 counted in the mean; then `pool_proj`.
    Average,
    /// 3×3 max pool, stride 1, padding 1 (only 5b); then `pool_proj`.
    Max,
    /// 3×3 max pool, stride 2, output size rounded up, no projection (reduction modules).
    Reduce,
}

impl PoolKind {
    /// `[B, C, H, W]` → `[B, C, H, W]`, or `[B, C, ⌈(H−3)/2⌉+1, ⌈(W−3)/2⌉+1]` for a reduction.
    fn forward(self, x: Tensor<4>) -> Tensor<4> {
        // With stride 1 and padding 1 no window starts past the input, so Cadene's
        // `ceil_mode=True` on these pools changes nothing and is left at Burn's default.
        let same = PaddingConfig2d::Explicit(1, 1, 1, 1);
        match self {
            Self::Average => AvgPool2dConfig::new([3, 3])
                .with_strides([1, 1])
                .with_padding(same)
                .with_count_include_pad(true)
                .init()
                .forward(x),
            Self::Max => max_pool2d(
                &MaxPool2dConfig::new([3, 3])
                    .with_strides([1, 1])
                    .with_padding(same)
                    .init(),
                x,
            ),
            Self::Reduce => max_pool_3x3_s2_ceil(x),
        }
    }
}

/// The 3×3 stride-2 max pool of the stem and the reduction modules, rounding the output size
/// up as Caffe did (`ceil_mode=True`): `[B, C, H, W]` → `[B, C, ⌈(H−3)/2⌉+1, ⌈(W−3)/2⌉+1]`
/// (112 → 56, 56 → 28 for a 224² input, where rounding down would give 55 and 27).
fn max_pool_3x3_s2_ceil(x: Tensor<4>) -> Tensor<4> {
    let pool = MaxPool2dConfig::new([3, 3])
        .with_strides([2, 2])
        .with_ceil_mode(true)
        .init();
    max_pool2d(&pool, x)
}

/// The widths of one Inception module (one row of the table in the module documentation).
#[derive(Debug, Clone, Copy)]
struct Spec {
    /// 1×1 branch; 0 for the reduction modules, which have none.
    c1x1: usize,
    /// 1×1 reduction before the 3×3 branch.
    c3x3_reduce: usize,
    /// The 3×3 branch.
    c3x3: usize,
    /// 1×1 reduction before the double-3×3 branch.
    double_reduce: usize,
    /// Both 3×3 convolutions of the double-3×3 branch.
    double: usize,
    /// The pool branch.
    pool: PoolKind,
    /// 1×1 projection after the pool; 0 for the reduction modules.
    pool_proj: usize,
}

impl Spec {
    const fn new(
        c1x1: usize,
        c3x3_reduce: usize,
        c3x3: usize,
        double_reduce: usize,
        double: usize,
        pool: PoolKind,
        pool_proj: usize,
    ) -> Self {
        Self {
            c1x1,
            c3x3_reduce,
            c3x3,
            double_reduce,
            double,
            pool,
            pool_proj,
        }
    }

    /// Output channels for `in_channels` input channels (a reduction passes its input through).
    fn out_channels(&self, in_channels: usize) -> usize {
        let pool = if self.pool == PoolKind::Reduce {
            in_channels
        } else {
            self.pool_proj
        };
        self.c1x1 + self.c3x3 + self.double + pool
    }
}

/// The ten Inception modules, 3a to 5b, in order (see the table in the module documentation).
const SPECS: [Spec; 10] = [
    Spec::new(64, 64, 64, 64, 96, PoolKind::Average, 32),
    Spec::new(64, 64, 96, 64, 96, PoolKind::Average, 64),
    Spec::new(0, 128, 160, 64, 96, PoolKind::Reduce, 0),
    Spec::new(224, 64, 96, 96, 128, PoolKind::Average, 128),
    Spec::new(192, 96, 128, 96, 128, PoolKind::Average, 128),
    Spec::new(160, 128, 160, 128, 160, PoolKind::Average, 128),
    Spec::new(96, 128, 192, 160, 192, PoolKind::Average, 128),
    Spec::new(0, 128, 192, 192, 256, PoolKind::Reduce, 0),
    Spec::new(352, 192, 320, 160, 224, PoolKind::Average, 128),
    Spec::new(352, 192, 320, 192, 224, PoolKind::Max, 128),
];

dml_config::config! {
    /// Configuration of [`BnInception`]. The architecture itself is fixed (it has to match the
    /// pretrained checkpoint); only the classifier is optional.
    #[derive(Debug, Clone, PartialEq)]
    pub struct BnInceptionConfig {
        /// Classes of the `last_linear` classifier (1000 for Cadene's ImageNet checkpoint), or
        /// `None` for a headless backbone, which reports `last_linear.*` as unused on import.
        pub num_classes: Option<usize> = None,
    }
}

impl BnInceptionConfig {
    /// Channels of the last feature map (`inception_5b`): 1024.
    pub fn out_channels(&self) -> usize {
        SPECS
            .iter()
            .fold(STEM_CHANNELS, |channels, spec| spec.out_channels(channels))
    }

    /// Builds the network with fresh weights on `device` (Burn's default initialisers, which
    /// follow PyTorch's: Kaiming-uniform convolutions, unit-γ, zero-β batch norm).
    pub fn init(&self, device: &Device) -> Result<BnInception, ModelError> {
        if self.num_classes == Some(0) {
            return Err(ModelError::Config(
                "BN-Inception's classifier needs at least one class (num_classes = 0)".into(),
            ));
        }
        let mut channels = STEM_CHANNELS;
        let modules: Vec<Inception> = SPECS
            .iter()
            .map(|spec| {
                let module = Inception::new(spec, channels, device);
                channels = spec.out_channels(channels);
                module
            })
            .collect();
        let Ok([i3a, i3b, i3c, i4a, i4b, i4c, i4d, i4e, i5a, i5b]) = <[Inception; 10]>::try_from(modules) else {
            unreachable!("SPECS has ten modules")
        };
        Ok(BnInception {
            conv1_7x7_s2: ConvBnRelu::new(3, 64, 7, 2, device),
            conv2_3x3_reduce: ConvBnRelu::new(64, 64, 1, 1, device),
            conv2_3x3: ConvBnRelu::new(64, STEM_CHANNELS, 3, 1, device),
            inception_3a: i3a,
            inception_3b: i3b,
            inception_3c: i3c,
            inception_4a: i4a,
            inception_4b: i4b,
            inception_4c: i4c,
            inception_4d: i4d,
            inception_4e: i4e,
            inception_5a: i5a,
            inception_5b: i5b,
            last_linear: self
                .num_classes
                .map(|classes| LinearConfig::new(channels, classes).init(device)),
        })
    }
}

/// A convolution with bias, batch norm and ReLU: one `<name>` / `<name>_bn` pair of Cadene's
/// state dict.
#[derive(Module, Debug)]
pub struct ConvBnRelu {
    conv: Conv2d,
    bn: BatchNorm,
}

impl ConvBnRelu {
    /// A `kernel`×`kernel` convolution with "same" padding (`kernel / 2`), as every
    /// convolution of BN-Inception has, and `stride`.
    fn new(in_channels: usize, out_channels: usize, kernel: usize, stride: usize, device: &Device) -> Self {
        let pad = kernel / 2;
        Self {
            conv: Conv2dConfig::new([in_channels, out_channels], [kernel, kernel])
                .with_stride([stride, stride])
                .with_padding(PaddingConfig2d::Explicit(pad, pad, pad, pad))
                .with_bias(true)
                .init(device),
            bn: BatchNormConfig::new(out_channels).init(device),
        }
    }

    /// `[B, C_in, H, W]` → `[B, C_out, ⌊(H−1)/stride⌋+1, ⌊(W−1)/stride⌋+1]`.
    fn forward(&self, x: Tensor<4>) -> Tensor<4> {
        conv_bn(&self.conv, &self.bn, x, true)
    }

    fn freeze_batchnorm(self) -> Self {
        Self {
            bn: self.bn.freeze(),
            ..self
        }
    }
}

/// One Inception module. The field names are Cadene's branch suffixes (`b` prefixed where a
/// Rust name cannot start with a digit); the reduction modules have no `b1x1` and no
/// `pool_proj`.
#[derive(Module, Debug)]
pub struct Inception {
    b1x1: Option<ConvBnRelu>,
    b3x3_reduce: ConvBnRelu,
    b3x3: ConvBnRelu,
    double_3x3_reduce: ConvBnRelu,
    double_3x3_1: ConvBnRelu,
    double_3x3_2: ConvBnRelu,
    pool_proj: Option<ConvBnRelu>,
    #[module(skip)]
    pool: PoolKind,
}

impl Inception {
    fn new(spec: &Spec, in_channels: usize, device: &Device) -> Self {
        let stride = if spec.pool == PoolKind::Reduce { 2 } else { 1 };
        let unit = |i, o, kernel, stride| ConvBnRelu::new(i, o, kernel, stride, device);
        Self {
            b1x1: (spec.c1x1 > 0).then(|| unit(in_channels, spec.c1x1, 1, 1)),
            b3x3_reduce: unit(in_channels, spec.c3x3_reduce, 1, 1),
            b3x3: unit(spec.c3x3_reduce, spec.c3x3, 3, stride),
            double_3x3_reduce: unit(in_channels, spec.double_reduce, 1, 1),
            double_3x3_1: unit(spec.double_reduce, spec.double, 3, 1),
            double_3x3_2: unit(spec.double, spec.double, 3, stride),
            pool_proj: (spec.pool_proj > 0).then(|| unit(in_channels, spec.pool_proj, 1, 1)),
            pool: spec.pool,
        }
    }

    /// `[B, C_in, H, W]` → `[B, C_out, H, W]`, or `[B, C_out, H/2, W/2]` for a reduction
    /// module, whose input sides must be even: its strided convolutions give `⌈H/2⌉` and its
    /// rounded-up pool `⌈(H−3)/2⌉+1`, which agree only then (as in PyTorch, where `torch.cat`
    /// would fail).
    fn forward(&self, x: Tensor<4>) -> Tensor<4> {
        let mut branches = Vec::with_capacity(4);
        if let Some(b1x1) = &self.b1x1 {
            branches.push(b1x1.forward(x.clone()));
        }
        branches.push(self.b3x3.forward(self.b3x3_reduce.forward(x.clone())));
        let double = self.double_3x3_reduce.forward(x.clone());
        branches.push(self.double_3x3_2.forward(self.double_3x3_1.forward(double)));
        let pooled = self.pool.forward(x);
        branches.push(match &self.pool_proj {
            Some(proj) => proj.forward(pooled),
            None => pooled,
        });
        let sizes: Vec<[usize; 2]> = branches.iter().map(|b| [b.dims()[2], b.dims()[3]]).collect();
        assert!(
            sizes.iter().all(|s| *s == sizes[0]),
            "BN-Inception branch outputs differ in size ({sizes:?}): a reduction module needs even input sides"
        );
        Tensor::cat(branches, 1)
    }

    fn freeze_batchnorm(self) -> Self {
        Self {
            b1x1: self.b1x1.map(ConvBnRelu::freeze_batchnorm),
            b3x3_reduce: self.b3x3_reduce.freeze_batchnorm(),
            b3x3: self.b3x3.freeze_batchnorm(),
            double_3x3_reduce: self.double_3x3_reduce.freeze_batchnorm(),
            double_3x3_1: self.double_3x3_1.freeze_batchnorm(),
            double_3x3_2: self.double_3x3_2.freeze_batchnorm(),
            pool_proj: self.pool_proj.map(ConvBnRelu::freeze_batchnorm),
            pool: self.pool,
        }
    }
}

/// BN-Inception in Cadene's layout (see the module documentation for the architecture); the
/// field names are the state dict's, so keys map one to one.
#[derive(Module, Debug)]
pub struct BnInception {
    conv1_7x7_s2: ConvBnRelu,
    conv2_3x3_reduce: ConvBnRelu,
    conv2_3x3: ConvBnRelu,
    inception_3a: Inception,
    inception_3b: Inception,
    inception_3c: Inception,
    inception_4a: Inception,
    inception_4b: Inception,
    inception_4c: Inception,
    inception_4d: Inception,
    inception_4e: Inception,
    inception_5a: Inception,
    inception_5b: Inception,
    last_linear: Option<Linear>,
}

impl BnInception {
    /// `[B, 3, H, W]` → five stage maps: the last map at each resolution, so that stages 2–4
    /// have the resolutions of a ResNet's `layer2`–`layer4` (the reduction modules 3c and 4e
    /// open the next stage, as a ResNet stage opens with its strided block):
    ///
    /// | stage | map                            | 224² input       | 64² input      |
    /// |-------|--------------------------------|------------------|----------------|
    /// | 0     | `pool1_3x3_s2` (after conv1)   | `[B, 64, 56, 56]`  | `[B, 64, 16, 16]`  |
    /// | 1     | `pool2_3x3_s2` (stem output)   | `[B, 192, 28, 28]` | `[B, 192, 8, 8]`   |
    /// | 2     | `inception_3b` output          | `[B, 320, 28, 28]` | `[B, 320, 8, 8]`   |
    /// | 3     | `inception_4d` output          | `[B, 608, 14, 14]` | `[B, 608, 4, 4]`   |
    /// | 4     | `inception_5b` output          | `[B, 1024, 7, 7]`  | `[B, 1024, 2, 2]`  |
    ///
    /// The maps entering the reduction modules 3c and 4e must have even sides, or their
    /// strided convolutions (`⌈H/2⌉`) and rounded-up pool (`⌈(H−3)/2⌉+1`) disagree, as in
    /// PyTorch; input sides that are multiples of 32 always qualify, and a violation panics
    /// naming the branch sizes.
    pub fn forward_features(&self, images: Tensor<4>) -> FeatureMaps {
        let pool1 = max_pool_3x3_s2_ceil(self.conv1_7x7_s2.forward(images));
        let stem = self.conv2_3x3.forward(self.conv2_3x3_reduce.forward(pool1.clone()));
        let pool2 = max_pool_3x3_s2_ceil(stem);
        let run = |x: Tensor<4>, modules: &[&Inception]| modules.iter().fold(x, |x, m| m.forward(x));
        let i3b = run(pool2.clone(), &[&self.inception_3a, &self.inception_3b]);
        let i4d = run(
            i3b.clone(),
            &[
                &self.inception_3c,
                &self.inception_4a,
                &self.inception_4b,
                &self.inception_4c,
                &self.inception_4d,
            ],
        );
        let i5b = run(
            i4d.clone(),
            &[&self.inception_4e, &self.inception_5a, &self.inception_5b],
        );
        FeatureMaps {
            stages: vec![pool1, pool2, i3b, i4d, i5b],
        }
    }

    /// The names of the stages [`BnInception::forward_features`] returns, in order.
    pub const STAGE_NAMES: [&'static str; 5] = ["pool1", "pool2", "inception_3b", "inception_4d", "inception_5b"];

    /// Runs the stages after `stage` on `map`, the output of stage `stage` (see the table of
    /// [`Self::forward_features`]), and returns `inception_5b` (`map` itself when `stage` is the
    /// last), for Grad-CAM at an inner stage.
    ///
    /// # Panics
    /// When `stage` is not below [`Self::STAGE_NAMES`]`.len()`.
    pub fn forward_from(&self, stage: usize, map: Tensor<4>) -> Tensor<4> {
        assert!(stage < Self::STAGE_NAMES.len(), "BN-Inception has no stage {stage}");
        let run = |x: Tensor<4>, modules: &[&Inception]| modules.iter().fold(x, |x, m| m.forward(x));
        let mut x = map;
        if stage < 1 {
            x = max_pool_3x3_s2_ceil(self.conv2_3x3.forward(self.conv2_3x3_reduce.forward(x)));
        }
        if stage < 2 {
            x = run(x, &[&self.inception_3a, &self.inception_3b]);
        }
        if stage < 3 {
            x = run(
                x,
                &[
                    &self.inception_3c,
                    &self.inception_4a,
                    &self.inception_4b,
                    &self.inception_4c,
                    &self.inception_4d,
                ],
            );
        }
        if stage < 4 {
            x = run(x, &[&self.inception_4e, &self.inception_5a, &self.inception_5b]);
        }
        x
    }

    /// `self` with the modules of stage `stage` taken from `other` (0: `conv1`; 1: the `conv2`
    /// pair; 2: 3a–3b; 3: 3c–4d; 4: 4e–5b, as [`Self::forward_from`] groups them): one step of a
    /// cascading parameter randomisation (Adebayo et al., NeurIPS 2018) when `other` holds fresh
    /// weights.
    ///
    /// # Panics
    /// When `stage` is not below [`Self::STAGE_NAMES`]`.len()`.
    pub fn with_stage_from(mut self, stage: usize, other: &Self) -> Self {
        match stage {
            0 => self.conv1_7x7_s2 = other.conv1_7x7_s2.clone(),
            1 => {
                self.conv2_3x3_reduce = other.conv2_3x3_reduce.clone();
                self.conv2_3x3 = other.conv2_3x3.clone();
            }
            2 => {
                self.inception_3a = other.inception_3a.clone();
                self.inception_3b = other.inception_3b.clone();
            }
            3 => {
                self.inception_3c = other.inception_3c.clone();
                self.inception_4a = other.inception_4a.clone();
                self.inception_4b = other.inception_4b.clone();
                self.inception_4c = other.inception_4c.clone();
                self.inception_4d = other.inception_4d.clone();
            }
            4 => {
                self.inception_4e = other.inception_4e.clone();
                self.inception_5a = other.inception_5a.clone();
                self.inception_5b = other.inception_5b.clone();
            }
            _ => panic!("BN-Inception has no stage {stage}"),
        }
        self
    }

    /// Classifier logits `[B, num_classes]`: global average pooling of `inception_5b` (what
    /// Cadene's 7×7 average pool computes for a 224² input), then `last_linear`; `None` for a
    /// headless backbone.
    pub fn forward_logits(&self, images: Tensor<4>) -> Option<Tensor<2>> {
        let last_linear = self.last_linear.as_ref()?;
        let maps = self.forward_features(images);
        let pooled: Tensor<2> = maps.last().clone().mean_dim(3).mean_dim(2).flatten(1, 3);
        Some(last_linear.forward(pooled))
    }

    /// Loads a `state_dict` in Cadene's `bninception` layout from a `.pth` (`torch.save`) or
    /// `.safetensors` file, chosen by extension.
    ///
    /// Keys map one to one (`inception_4a_1x1.weight` → the 4a module's 1×1 convolution,
    /// `inception_4a_1x1_bn.running_mean` → its batch norm); batch-norm tensors stored as
    /// `[1, C]`, as in Cadene's ImageNet file, are read as `[C]`. A tensor whose shape differs
    /// from the model's is an error naming the key and both shapes; a parameter the file lacks
    /// is an error unless `allow_missing`. Tensors the model has no place for (`last_linear.*`
    /// for a headless backbone) are returned in [`LoadReport::unused`].
    ///
    /// Cadene's ImageNet weights expect BGR images in [0, 255] minus the mean (104, 117, 128),
    /// not torchvision's RGB normalisation: see [`Self::swap_input_channels`] for RGB input and
    /// the matching normalisation.
    pub fn load_weights(&mut self, path: &Path, allow_missing: bool) -> Result<LoadReport, ModelError> {
        weights::load(self, path, WeightFormat::of(path)?, &CADENE_KEYS, allow_missing)
    }

    /// The weights in Cadene's `bninception` layout as a safetensors file, the first convolution
    /// turned back to BGR input (the inverse of the import's [`Self::swap_input_channels`]).
    pub fn save_cadene(&self, path: &Path) -> Result<(), ModelError> {
        let tensors = weights::pytorch_tensors(&self.clone().swap_input_channels(), CADENE_KEYS.to_file)?;
        weights::write_safetensors(path, &tensors)
    }

    /// [`BnInception::load_weights`] of the keys under `prefix` (e.g. `trunk.`); every other key
    /// is reported as unused.
    pub fn load_weights_prefixed(
        &mut self,
        path: &Path,
        prefix: &str,
        allow_missing: bool,
    ) -> Result<LoadReport, ModelError> {
        weights::load_prefixed(self, path, WeightFormat::of(path)?, &CADENE_KEYS, prefix, allow_missing)
    }

    /// Reverses the input channels of the first convolution, so that a model loaded from
    /// Cadene's BGR weights takes RGB images, as this workspace's data pipeline produces them:
    /// `W[:, c] ← W[:, 2 − c]` of `conv1_7x7_s2` `[64, 3, 7, 7]`. With the data normalisation set
    /// to mean `(128, 117, 104)/255` and std `1/255` (RGB order), the network sees exactly the
    /// inputs it was trained on.
    pub fn swap_input_channels(mut self) -> Self {
        let weight = self.conv1_7x7_s2.conv.weight.val().flip([1]);
        self.conv1_7x7_s2.conv.weight = Param::from_tensor(weight);
        self
    }

    /// Freezes every batch-norm layer: running statistics are used and no longer updated,
    /// and the affine parameters receive no gradient (the frozen BN of the DML recipes that
    /// train BN-Inception, e.g. Proxy-Anchor, whose batches are too small for batch
    /// statistics).
    pub fn freeze_batchnorm(self) -> Self {
        Self {
            conv1_7x7_s2: self.conv1_7x7_s2.freeze_batchnorm(),
            conv2_3x3_reduce: self.conv2_3x3_reduce.freeze_batchnorm(),
            conv2_3x3: self.conv2_3x3.freeze_batchnorm(),
            inception_3a: self.inception_3a.freeze_batchnorm(),
            inception_3b: self.inception_3b.freeze_batchnorm(),
            inception_3c: self.inception_3c.freeze_batchnorm(),
            inception_4a: self.inception_4a.freeze_batchnorm(),
            inception_4b: self.inception_4b.freeze_batchnorm(),
            inception_4c: self.inception_4c.freeze_batchnorm(),
            inception_4d: self.inception_4d.freeze_batchnorm(),
            inception_4e: self.inception_4e.freeze_batchnorm(),
            inception_5a: self.inception_5a.freeze_batchnorm(),
            inception_5b: self.inception_5b.freeze_batchnorm(),
            last_linear: self.last_linear,
        }
    }
}

/// The stem units of Cadene's state dict, which are fields of [`BnInception`] as named.
const STEM_UNITS: [&str; 3] = ["conv1_7x7_s2", "conv2_3x3_reduce", "conv2_3x3"];

/// Cadene's branch suffixes (`inception_3a_<suffix>`) and the matching fields of [`Inception`].
const BRANCHES: [(&str, &str); 7] = [
    ("1x1", "b1x1"),
    ("3x3_reduce", "b3x3_reduce"),
    ("3x3", "b3x3"),
    ("double_3x3_reduce", "double_3x3_reduce"),
    ("double_3x3_1", "double_3x3_1"),
    ("double_3x3_2", "double_3x3_2"),
    ("pool_proj", "pool_proj"),
];

/// Cadene's keys ↔ the parameter paths of [`BnInception`].
const CADENE_KEYS: KeyLayout = KeyLayout {
    to_model: cadene_key_to_path,
    to_file: path_to_cadene_key,
};

/// `conv1_7x7_s2.weight` → `conv1_7x7_s2.conv.weight`, `inception_3a_1x1_bn.running_var` →
/// `inception_3a.b1x1.bn.running_var`; keys of no known unit (`last_linear.*`, anything
/// foreign) are left as they are.
fn cadene_key_to_path(key: &str) -> String {
    let Some((unit, param)) = key.split_once('.') else {
        return key.to_string();
    };
    if param.contains('.') {
        return key.to_string();
    }
    let (unit, part) = match unit.strip_suffix("_bn") {
        Some(unit) => (unit, "bn"),
        None => (unit, "conv"),
    };
    let field = if STEM_UNITS.contains(&unit) {
        unit.to_string()
    } else if let Some((block, suffix)) = unit.strip_prefix("inception_").and_then(|rest| rest.split_once('_'))
        && let Some((_, branch)) = BRANCHES.iter().find(|(s, _)| *s == suffix)
    {
        format!("inception_{block}.{branch}")
    } else {
        return key.to_string();
    };
    format!("{field}.{part}.{param}")
}

/// The inverse of [`cadene_key_to_path`] on the model's parameter paths (Burn's `gamma`/`beta`
/// become PyTorch's `weight`/`bias`), so that reports name keys as Cadene's file does.
fn path_to_cadene_key(path: &str) -> String {
    let segments: Vec<&str> = path.split('.').collect();
    let (unit, part, param) = match segments.as_slice() {
        [unit, part, param] => (unit.to_string(), *part, *param),
        [block, field, part, param] => {
            let suffix = BRANCHES
                .iter()
                .find(|(_, f)| f == field)
                .map_or(*field, |(suffix, _)| suffix);
            (format!("{block}_{suffix}"), *part, *param)
        }
        _ => return path.to_string(),
    };
    let param = match param {
        "gamma" => "weight",
        "beta" => "bias",
        other => other,
    };
    match part {
        "conv" => format!("{unit}.{param}"),
        "bn" => format!("{unit}_bn.{param}"),
        _ => path.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use burn::module::Param;
    use burn::tensor::{Distribution, TensorData};
    use safetensors::Dtype;
    use safetensors::tensor::TensorView;

    use super::*;

    fn values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
        t.into_data().try_to_vec::<f32>().unwrap()
    }

    /// `(unit, in, out, kernel)` of every convolution of Cadene's `bninception.py`, written out
    /// from that file independently of [`SPECS`], so that a wrong width there fails the import.
    fn cadene_units() -> Vec<(String, usize, usize, usize)> {
        let mut units = vec![
            ("conv1_7x7_s2".to_string(), 3, 64, 7),
            ("conv2_3x3_reduce".to_string(), 64, 64, 1),
            ("conv2_3x3".to_string(), 64, 192, 3),
        ];
        // (module, in, 1x1, 3x3_reduce, 3x3, double_3x3_reduce, double_3x3, pool_proj)
        let modules = [
            ("3a", 192, 64, 64, 64, 64, 96, 32),
            ("3b", 256, 64, 64, 96, 64, 96, 64),
            ("3c", 320, 0, 128, 160, 64, 96, 0),
            ("4a", 576, 224, 64, 96, 96, 128, 128),
            ("4b", 576, 192, 96, 128, 96, 128, 128),
            ("4c", 576, 160, 128, 160, 128, 160, 128),
            ("4d", 608, 96, 128, 192, 160, 192, 128),
            ("4e", 608, 0, 128, 192, 192, 256, 0),
            ("5a", 1056, 352, 192, 320, 160, 224, 128),
            ("5b", 1024, 352, 192, 320, 192, 224, 128),
        ];
        for (m, i, c1x1, r3, c3, rd, d, proj) in modules {
            let name = |suffix: &str| format!("inception_{m}_{suffix}");
            if c1x1 > 0 {
                units.push((name("1x1"), i, c1x1, 1));
            }
            units.push((name("3x3_reduce"), i, r3, 1));
            units.push((name("3x3"), r3, c3, 3));
            units.push((name("double_3x3_reduce"), i, rd, 1));
            units.push((name("double_3x3_1"), rd, d, 3));
            units.push((name("double_3x3_2"), d, d, 3));
            if proj > 0 {
                units.push((name("pool_proj"), i, proj, 1));
            }
        }
        units
    }

    /// Every tensor of a Cadene state dict for `units`: `(key, shape)`. The batch-norm tensors
    /// of the inception_4* modules are `[1, C]`, as in Cadene's ImageNet file; the others `[C]`.
    fn cadene_keys(units: &[(String, usize, usize, usize)]) -> Vec<(String, Vec<usize>)> {
        let mut keys = Vec::new();
        for (unit, i, o, k) in units {
            keys.push((format!("{unit}.weight"), vec![*o, *i, *k, *k]));
            keys.push((format!("{unit}.bias"), vec![*o]));
            let bn_shape = if unit.starts_with("inception_4") {
                vec![1, *o]
            } else {
                vec![*o]
            };
            for param in ["weight", "bias", "running_mean", "running_var"] {
                keys.push((format!("{unit}_bn.{param}"), bn_shape.clone()));
            }
        }
        keys
    }

    /// Deterministic, key-dependent values (positive, so that they are valid variances too).
    fn fill(key: &str, len: usize) -> Vec<f32> {
        let seed = key
            .bytes()
            .fold(17u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
        (0..len as u64)
            .map(|i| ((seed.wrapping_add(i.wrapping_mul(2_654_435_761))) % 1000) as f32 / 1000.0 + 0.01)
            .collect()
    }

    /// Writes `keys` with [`fill`]ed values as a safetensors file named `name` in a fresh
    /// temporary directory.
    fn write_safetensors(name: &str, keys: &[(String, Vec<usize>)]) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("dml-bn-inception-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{name}.safetensors"));
        let bytes: Vec<Vec<u8>> = keys
            .iter()
            .map(|(key, shape)| {
                fill(key, shape.iter().product())
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect()
            })
            .collect();
        let views = keys
            .iter()
            .zip(&bytes)
            .map(|((key, shape), data)| (key.clone(), TensorView::new(Dtype::F32, shape.clone(), data).unwrap()));
        safetensors::serialize_to_file(views, None, &path).unwrap();
        path
    }

    fn cleanup(path: &Path) {
        let _ = std::fs::remove_dir_all(path.parent().unwrap());
    }

    /// An exported trunk (Cadene's keys, BGR input) imported again is the same network: equal
    /// outputs on random RGB input, every tensor applied, only the `num_batches_tracked` counters
    /// PyTorch keeps left unused.
    #[test]
    fn an_exported_trunk_imports_back_unchanged() {
        let device = Device::flex();
        device.seed(3);
        let original = crate::Backbone::BnInception(BnInceptionConfig::default().init(&device).unwrap());
        let dir = std::env::temp_dir().join(format!("bninception-export-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("trunk.safetensors");
        original.save_trunk(&path).unwrap();
        device.seed(4);
        let mut back = crate::Backbone::BnInception(BnInceptionConfig::default().init(&device).unwrap());
        let report = back.load_trunk(&path, "").unwrap();
        assert!(
            report.unused.iter().all(|k| k.ends_with("num_batches_tracked")),
            "{report:?}"
        );
        let x = Tensor::<4>::random([1, 3, 64, 64], Distribution::Normal(0.0, 1.0), &device);
        let a = values(original.forward_features(x.clone()).last().clone());
        let b = values(back.forward_features(x).last().clone());
        assert_eq!(a, b);
        cleanup(&path);
    }

    #[test]
    fn table_gives_the_documented_channels() {
        let mut channels = STEM_CHANNELS;
        let outs: Vec<usize> = SPECS
            .iter()
            .map(|s| {
                channels = s.out_channels(channels);
                channels
            })
            .collect();
        assert_eq!(outs, [256, 320, 576, 576, 576, 608, 608, 1056, 1024, 1024]);
        assert_eq!(BnInceptionConfig::default().out_channels(), 1024);
        assert!(
            BnInceptionConfig { num_classes: Some(0) }
                .init(&Device::flex())
                .is_err()
        );
    }

    /// PyTorch's pools as Cadene configures them, on hand-computed values: the average pool
    /// counts the zero padding (a corner of a 3×3 map of ones averages 4 of 9 cells), the max
    /// pool pads with −∞ (a map of −1 stays −1), and the reduction pool rounds its size up.
    #[test]
    fn pools_match_pytorch_semantics() {
        let device = Device::flex();
        let ones = Tensor::<4>::ones([1, 1, 3, 3], &device);
        let avg = values(PoolKind::Average.forward(ones.clone()));
        let want = [4.0, 6.0, 4.0, 6.0, 9.0, 6.0, 4.0, 6.0, 4.0].map(|v| v / 9.0);
        assert!(avg.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-6), "{avg:?}");
        assert_eq!(values(PoolKind::Max.forward(ones.neg())), [-1.0; 9]);
        let ramp = Tensor::<4>::from_data(
            TensorData::new((0..16).map(|v| v as f32).collect(), [1, 1, 4, 4]),
            &device,
        );
        // Windows start at rows/columns 0 and 2; the second is cut off by the border.
        assert_eq!(values(PoolKind::Reduce.forward(ramp)), [10.0, 11.0, 14.0, 15.0]);
    }

    /// Sets a unit's batch norm to output the constant `value` (γ = 0, β = `value`), so that
    /// the unit's channels can be recognised in a concatenation.
    fn emit(unit: &mut ConvBnRelu, value: f32, device: &Device) {
        let channels = unit.bn.gamma.dims()[0];
        unit.bn.gamma = Param::from_tensor(Tensor::zeros([channels], device));
        unit.bn.beta = Param::from_tensor(Tensor::full([channels], value, device));
    }

    /// The branches are concatenated in Cadene's order (1×1, 3×3, double 3×3, pool), which the
    /// next module's pretrained weights rely on, and a reduction passes its pooled input
    /// through unprojected.
    #[test]
    fn branches_are_concatenated_in_cadene_order() {
        let device = Device::flex();
        let mut m = Inception::new(&SPECS[0], 192, &device);
        emit(m.b1x1.as_mut().unwrap(), 1.0, &device);
        emit(&mut m.b3x3, 2.0, &device);
        emit(&mut m.double_3x3_2, 3.0, &device);
        emit(m.pool_proj.as_mut().unwrap(), 4.0, &device);
        let x = Tensor::<4>::random([1, 192, 4, 4], Distribution::Default, &device);
        let per_channel = |y: Tensor<4>| values(y.mean_dim(3).mean_dim(2));
        let mut want = vec![1.0; 64];
        want.extend([2.0; 64].iter().chain(&[3.0; 96]).chain(&[4.0; 32]));
        assert_eq!(per_channel(m.forward(x)), want);

        let mut reduction = Inception::new(&SPECS[2], 320, &device);
        emit(&mut reduction.b3x3, 2.0, &device);
        emit(&mut reduction.double_3x3_2, 3.0, &device);
        let y = reduction.forward(Tensor::full([1, 320, 4, 4], 5.0, &device));
        assert_eq!(y.dims(), [1, 576, 2, 2]);
        let mut want = vec![2.0; 160];
        want.extend([3.0; 96].iter().chain(&[5.0; 320]));
        assert_eq!(per_channel(y), want);
    }

    #[test]
    fn key_names_round_trip() {
        for (key, path) in [
            ("conv1_7x7_s2.weight", "conv1_7x7_s2.conv.weight"),
            ("conv2_3x3_reduce_bn.running_var", "conv2_3x3_reduce.bn.running_var"),
            ("inception_3a_1x1.bias", "inception_3a.b1x1.conv.bias"),
            ("inception_3c_3x3_bn.running_mean", "inception_3c.b3x3.bn.running_mean"),
            (
                "inception_5b_double_3x3_reduce.weight",
                "inception_5b.double_3x3_reduce.conv.weight",
            ),
            (
                "inception_4e_double_3x3_2_bn.weight",
                "inception_4e.double_3x3_2.bn.weight",
            ),
            ("last_linear.weight", "last_linear.weight"),
            ("module.conv1_7x7_s2.weight", "module.conv1_7x7_s2.weight"),
            ("inception_3a_7x7.weight", "inception_3a_7x7.weight"),
        ] {
            assert_eq!(cadene_key_to_path(key), path, "{key}");
            assert_eq!(path_to_cadene_key(path), key, "{path}");
        }
        assert_eq!(
            path_to_cadene_key("inception_4d.pool_proj.bn.gamma"),
            "inception_4d_pool_proj_bn.weight"
        );
        assert_eq!(path_to_cadene_key("conv2_3x3.bn.beta"), "conv2_3x3_bn.bias");
    }

    /// A complete Cadene state dict (written independently from the table above) loads without
    /// missing keys, and chosen tensors land in the fields they name, whether a batch-norm
    /// tensor is stored as `[C]` or as Cadene's `[1, C]`.
    #[test]
    fn cadene_safetensors_load_into_the_named_fields() {
        let device = Device::flex();
        let units = cadene_units();
        let mut keys = cadene_keys(&units);
        keys.push(("last_linear.weight".into(), vec![1000, 1024]));
        keys.push(("last_linear.bias".into(), vec![1000]));
        let path = write_safetensors("full", &keys);

        let mut model = BnInceptionConfig::default().init(&device).unwrap();
        let report = model.load_weights(&path, false).unwrap();
        assert_eq!(report.applied, units.len() * 6, "{report:?}");
        assert!(report.missing.is_empty(), "{report:?}");
        assert_eq!(report.unused, ["last_linear.bias", "last_linear.weight"]);

        let i4a_1x1 = model.inception_4a.b1x1.as_ref().unwrap();
        let w = i4a_1x1.conv.weight.val();
        assert_eq!(w.dims(), [224, 576, 1, 1]);
        assert_eq!(values(w), fill("inception_4a_1x1.weight", 224 * 576));
        // Stored as [1, 224]: squeezed on import.
        let mean = i4a_1x1.bn.running_mean.value_sync();
        assert_eq!(values(mean), fill("inception_4a_1x1_bn.running_mean", 224));
        let gamma = model.conv1_7x7_s2.bn.gamma.val();
        assert_eq!(values(gamma), fill("conv1_7x7_s2_bn.weight", 64));
        let bias = model.inception_3c.double_3x3_2.conv.bias.as_ref().unwrap().val();
        assert_eq!(values(bias), fill("inception_3c_double_3x3_2.bias", 96));
        let var = model
            .inception_5b
            .pool_proj
            .as_ref()
            .unwrap()
            .bn
            .running_var
            .value_sync();
        assert_eq!(values(var), fill("inception_5b_pool_proj_bn.running_var", 128));

        // With a classifier, `last_linear` is used too and transposed to Burn's [in, out].
        let mut classifier = BnInceptionConfig {
            num_classes: Some(1000),
        }
        .init(&device)
        .unwrap();
        let report = classifier.load_weights(&path, false).unwrap();
        assert!(report.unused.is_empty(), "{report:?}");
        let linear = classifier.last_linear.as_ref().unwrap().weight.val();
        assert_eq!(linear.dims(), [1024, 1000]);
        let file = fill("last_linear.weight", 1000 * 1024);
        let got = values(linear);
        for (out, inp) in [(0, 0), (3, 7), (999, 1023)] {
            assert_eq!(
                got[inp * 1000 + out],
                file[out * 1024 + inp],
                "last_linear[{out}, {inp}]"
            );
        }
        cleanup(&path);
    }

    #[test]
    fn wrong_shape_names_the_key_and_both_shapes() {
        let path = write_safetensors("wrong", &[("inception_4a_1x1.weight".into(), vec![225, 576, 1, 1])]);
        let mut model = BnInceptionConfig::default().init(&Device::flex()).unwrap();
        let e = model.load_weights(&path, true).unwrap_err().to_string();
        for part in [
            "wrong.safetensors",
            "inception_4a_1x1.weight",
            "[225, 576, 1, 1]",
            "[224, 576, 1, 1]",
        ] {
            assert!(e.contains(part), "{part} not in: {e}");
        }
        cleanup(&path);
    }

    /// A file with only the stem: every other parameter is reported missing under its Cadene
    /// key (an error unless `allow_missing`), and the stem still loads.
    #[test]
    fn missing_keys_are_reported_by_their_cadene_names() {
        let units = cadene_units();
        let keys = cadene_keys(&units);
        let (stem, rest): (Vec<_>, Vec<_>) = keys.into_iter().partition(|(k, _)| k.starts_with("conv"));
        let path = write_safetensors("stem", &stem);
        let mut model = BnInceptionConfig::default().init(&Device::flex()).unwrap();
        let e = model.load_weights(&path, false).unwrap_err().to_string();
        assert!(e.contains("inception_5b_pool_proj_bn.running_var"), "{e}");
        let report = model.load_weights(&path, true).unwrap();
        let mut missing = report.missing.clone();
        missing.sort();
        let mut want: Vec<String> = rest.into_iter().map(|(k, _)| k).collect();
        want.sort();
        assert_eq!(missing, want);
        assert_eq!(report.applied, 3 * 6);
        assert_eq!(
            values(model.conv2_3x3.conv.weight.val()),
            fill("conv2_3x3.weight", 192 * 64 * 9)
        );
        let e = model
            .load_weights(Path::new("/nonexistent/bn.pth"), false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("/nonexistent/bn.pth"), "{e}");
        cleanup(&path);
    }

    /// Training mode on flex autodiff: batch statistics, finite gradients that reach the first
    /// convolution through every module, updated running statistics; frozen batch norm keeps its
    /// statistics and gets no gradient.
    #[test]
    fn training_step_gives_finite_gradients_and_frozen_batchnorm_stays_put() {
        let device = Device::flex().autodiff();
        let images: Tensor<4> = Tensor::random([2, 3, 64, 64], Distribution::Normal(0.0, 1.0), &device);
        let model = BnInceptionConfig::default().init(&device).unwrap();
        let loss = model
            .forward_features(images.clone())
            .last()
            .clone()
            .powf_scalar(2.0)
            .mean();
        let grads = loss.backward();
        let proj_bn = &model.inception_5b.pool_proj.as_ref().unwrap().bn;
        for (what, g) in [
            (
                "conv1_7x7_s2.weight",
                model.conv1_7x7_s2.conv.weight.grad(&grads).map(values),
            ),
            (
                "inception_3a_1x1.weight",
                model
                    .inception_3a
                    .b1x1
                    .as_ref()
                    .unwrap()
                    .conv
                    .weight
                    .grad(&grads)
                    .map(values),
            ),
            (
                "inception_5b_pool_proj_bn.weight",
                proj_bn.gamma.grad(&grads).map(values),
            ),
        ] {
            let g = g.unwrap_or_else(|| panic!("{what}: no gradient"));
            assert!(g.iter().all(|v| v.is_finite()), "{what}: non-finite gradient");
            assert!(g.iter().any(|v| *v != 0.0), "{what}: zero gradient");
        }
        assert!(
            values(model.conv1_7x7_s2.bn.running_mean.value_sync())
                .iter()
                .any(|v| *v != 0.0)
        );

        let frozen = BnInceptionConfig::default().init(&device).unwrap().freeze_batchnorm();
        let small: Tensor<4> = Tensor::random([2, 3, 32, 32], Distribution::Normal(0.0, 1.0), &device);
        let grads = frozen.forward_features(small).last().clone().sum().backward();
        let bn = &frozen.inception_4d.double_3x3_2.bn;
        assert!(bn.gamma.grad(&grads).is_none(), "a frozen γ has no gradient");
        assert!(values(bn.running_mean.value_sync()).iter().all(|v| *v == 0.0));
        assert!(frozen.conv1_7x7_s2.conv.weight.grad(&grads).is_some());
    }

    #[test]
    fn swapping_input_channels_reverses_the_first_convolution_only() {
        let device = Device::flex();
        let model = BnInceptionConfig::default().init(&device).unwrap();
        let before = model.conv1_7x7_s2.conv.weight.val();
        let other = model.conv2_3x3.conv.weight.val();
        let model = model.swap_input_channels();
        let after = model.conv1_7x7_s2.conv.weight.val();
        for c in 0..3 {
            let got: Vec<f32> = after.clone().narrow(1, c, 1).into_data().try_to_vec::<f32>().unwrap();
            let want: Vec<f32> = before
                .clone()
                .narrow(1, 2 - c, 1)
                .into_data()
                .try_to_vec::<f32>()
                .unwrap();
            assert_eq!(got, want, "input channel {c}");
        }
        let unchanged: Vec<f32> = model
            .conv2_3x3
            .conv
            .weight
            .val()
            .into_data()
            .try_to_vec::<f32>()
            .unwrap();
        assert_eq!(unchanged, other.into_data().try_to_vec::<f32>().unwrap());
    }
}
