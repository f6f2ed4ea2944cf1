//! Embedding heads: pooling of the last feature map → linear → optional L2 normalisation.

use burn::module::{Module, Param};
use burn::nn::{Linear, LinearConfig};
use burn::tensor::{Device, Int, Tensor};

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

/// The location global max pooling takes each channel's value from: `[B, C, H, W]` → a 0/1 mask of
/// the same shape, 1 at the first maximum (row-major) of every channel. A channel with ties (one
/// that a ReLU zeroed everywhere, say) gets a single 1, where the max-pooling gradient goes; closed
/// forms of that gradient (Grad-CAM through the head) and AVSL's linearised max pooling use it.
pub fn first_max_mask(maps: Tensor<4>) -> Tensor<4> {
    let [b, c, h, w] = maps.dims();
    let first = maps.clone().reshape([b, c, h * w]).argmax(2).expand([b, c, h * w]);
    let positions = Tensor::<1, Int>::arange(0..(h * w) as i64, &maps.device())
        .reshape([1, 1, h * w])
        .expand([b, c, h * w]);
    positions.equal(first).float().reshape([b, c, h, w])
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
    /// A head with the given projection: `weight` `[D, C]` in PyTorch's `nn.Linear` layout
    /// (`e = W u + b`) and `bias` `[D]`, for weights that come from elsewhere (a PyTorch head,
    /// an oracle case). A weight and bias of different `D` are an error naming both shapes.
    pub fn from_weights(
        weight: Tensor<2>,
        bias: Tensor<1>,
        pooling: Pooling,
        normalize: bool,
    ) -> Result<Self, ModelError> {
        let [d, c] = weight.dims();
        let [db] = bias.dims();
        if d != db || d == 0 || c == 0 {
            return Err(ModelError::Config(format!(
                "embedding head weight [{d}, {c}] and bias [{db}] do not fit (want [D, C] and [D])"
            )));
        }
        let device = weight.device();
        let mut linear = LinearConfig::new(c, d).init(&device);
        // Burn stores a linear layer's weight as [in, out], the transpose of PyTorch's.
        linear.weight = Param::from_tensor(weight.transpose());
        linear.bias = Some(Param::from_tensor(bias));
        Ok(Self {
            linear,
            pooling,
            normalize,
        })
    }

    /// Writes the projection as an `nn.Linear` `state_dict` (`weight` `[D, C]`, `bias` `[D]`) in a
    /// safetensors file, the layout [`EmbeddingHead::from_weights`] reads.
    pub fn save_linear(&self, path: &std::path::Path) -> Result<(), ModelError> {
        let read = |t: burn::tensor::TensorData, what: &str| {
            t.convert::<f32>()
                .try_to_vec::<f32>()
                .map_err(|e| ModelError::Config(format!("reading the head's {what}: {e:?}")))
        };
        let weight = self.weight().transpose();
        let [d, c] = weight.dims();
        let bias = match self.bias() {
            Some(b) => read(b.into_data(), "bias")?,
            None => vec![0.0; d],
        };
        let tensors = [
            crate::weights::Named::f32("weight".into(), vec![d, c], &read(weight.into_data(), "weight")?),
            crate::weights::Named::f32("bias".into(), vec![d], &bias),
        ];
        crate::weights::write_safetensors(path, &tensors)
    }

    /// The pooling of the last feature map.
    pub fn pooling(&self) -> Pooling {
        self.pooling
    }

    /// Whether the embeddings are L2-normalised.
    pub fn normalizes(&self) -> bool {
        self.normalize
    }

    /// The projection's weight `[C, D]` (Burn's `[in, out]` layout: `e = u W + b`), on the
    /// autodiff graph, for closed forms of gradients through the head.
    pub fn weight(&self) -> Tensor<2> {
        self.linear.weight.val()
    }

    /// The projection's bias `[D]`, if any.
    pub fn bias(&self) -> Option<Tensor<1>> {
        self.linear.bias.as_ref().map(|b| b.val())
    }

    /// The pooled, projected features before the optional normalisation: `pool(features) W + b`
    /// `[B, D]` for `features` `[B, C, H, W]`.
    pub fn project(&self, features: Tensor<4>) -> Tensor<2> {
        self.linear.forward(self.pool(features))
    }

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
        let x = self.project(features);
        if self.normalize {
            let norm = x.clone().square().sum_dim(1).sqrt().clamp_min(1e-12);
            x / norm
        } else {
            x
        }
    }
}
