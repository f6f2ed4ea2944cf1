//! Embedding heads: pooling of the last feature map → linear (or, for an imported
//! pytorch-metric-learning embedder, several linear layers with optional ReLUs between them) →
//! optional L2 normalisation.

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
            hidden: Vec::new(),
            linear: LinearConfig::new(self.in_channels, self.dim).init(device),
            relu_between: false,
            pooling: self.pooling,
            normalize: self.normalize,
        })
    }
}

/// Pooling → linear → optional L2 normalisation; an imported embedder may put linear layers
/// before the last (`hidden`, each followed by a ReLU when `relu_between`).
#[derive(Module, Debug)]
pub struct EmbeddingHead {
    /// The layers before `linear`, in order (empty for every head trained here).
    hidden: Vec<Linear>,
    linear: Linear,
    /// A ReLU after every hidden layer (an `nn.Sequential(Linear, ReLU, Linear)`), or none (PML's
    /// `MLP` with `final_relu=False`, whose ReLU precedes the first layer).
    #[module(skip)]
    relu_between: bool,
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
            hidden: Vec::new(),
            linear,
            relu_between: false,
            pooling,
            normalize,
        })
    }

    /// A head of several linear layers `in_channels → hidden[0] → … → dim` with fresh weights
    /// (the structure of an imported embedder, whose weights are then loaded), a ReLU after every
    /// layer but the last when `relu_between`.
    pub fn mlp(
        in_channels: usize,
        hidden: &[usize],
        dim: usize,
        relu_between: bool,
        pooling: Pooling,
        normalize: bool,
        device: &Device,
    ) -> Result<Self, ModelError> {
        if in_channels == 0 || dim == 0 || hidden.contains(&0) {
            return Err(ModelError::Config(format!(
                "embedding head needs positive sizes (in {in_channels}, hidden {hidden:?}, dim {dim})"
            )));
        }
        let mut widths = vec![in_channels];
        widths.extend_from_slice(hidden);
        let layers = widths
            .windows(2)
            .map(|w| LinearConfig::new(w[0], w[1]).init(device))
            .collect();
        Ok(Self {
            hidden: layers,
            linear: LinearConfig::new(widths[widths.len() - 1], dim).init(device),
            relu_between,
            pooling,
            normalize,
        })
    }

    /// The head with its layers' weights replaced by `layers` (PyTorch's `nn.Linear` layout:
    /// `weight` `[out, in]`, `bias` `[out]`, in order, the last one the projection to `D`), a ReLU
    /// between consecutive layers when `relu_between`. Shapes that do not chain are an error
    /// naming the layer and both shapes.
    pub fn from_layers(
        layers: Vec<(Tensor<2>, Tensor<1>)>,
        relu_between: bool,
        pooling: Pooling,
        normalize: bool,
    ) -> Result<Self, ModelError> {
        let mut linears = Vec::with_capacity(layers.len());
        let mut previous: Option<usize> = None;
        for (i, (weight, bias)) in layers.into_iter().enumerate() {
            let [d, c] = weight.dims();
            if previous.is_some_and(|p| p != c) {
                return Err(ModelError::Config(format!(
                    "embedder layer {i} takes {c} inputs but the layer before gives {}",
                    previous.unwrap_or(0)
                )));
            }
            previous = Some(d);
            linears.push(Self::from_weights(weight, bias, pooling, normalize)?.linear);
        }
        let linear = linears
            .pop()
            .ok_or_else(|| ModelError::Config("an embedder needs at least one layer".into()))?;
        Ok(Self {
            hidden: linears,
            linear,
            relu_between,
            pooling,
            normalize,
        })
    }

    /// Whether the head is one linear layer (the closed forms of its gradient that similarity
    /// attention and mining use assume nothing else).
    pub fn is_linear(&self) -> bool {
        self.hidden.is_empty()
    }

    /// The widths of the hidden layers and whether a ReLU follows each (empty for a linear head).
    pub fn hidden_layout(&self) -> (Vec<usize>, bool) {
        (
            self.hidden.iter().map(|l| l.weight.dims()[1]).collect(),
            self.relu_between,
        )
    }

    /// Every layer as PyTorch's `nn.Linear` would hold it: `weight` `[out, in]` and `bias`
    /// `[out]`, in order (the projection to `D` last).
    pub fn layers(&self) -> Vec<(Tensor<2>, Option<Tensor<1>>)> {
        self.hidden
            .iter()
            .chain(std::iter::once(&self.linear))
            .map(|l| (l.weight.val().transpose(), l.bias.as_ref().map(|b| b.val())))
            .collect()
    }

    /// The layers applied to `x` `[…, C]`: each hidden layer (then a ReLU when `relu_between`),
    /// then the projection.
    fn apply<const D: usize>(&self, x: Tensor<D>) -> Tensor<D> {
        let x = self.hidden.iter().fold(x, |x, layer| {
            let y = layer.forward(x);
            if self.relu_between {
                burn::tensor::activation::relu(y)
            } else {
                y
            }
        });
        self.linear.forward(x)
    }

    /// The gradient `∂s/∂u` `[N, C]` of a score whose gradient at the projection's output is
    /// `grad_e` `[N, D]`, at the pooled features `u` `[N, C]`: `grad_e Wᵀ` for a linear head, the
    /// chain through every layer (ReLU masks included) otherwise; tensor operations only, so the
    /// result stays on the autodiff graph (Zheng et al.'s second-order path).
    pub fn backward_projection(&self, u: Tensor<2>, grad_e: Tensor<2>) -> Tensor<2> {
        // Forward, keeping every hidden layer's pre-activation.
        let mut pre = Vec::with_capacity(self.hidden.len());
        let mut x = u;
        for layer in &self.hidden {
            let y = layer.forward(x);
            pre.push(y.clone());
            x = if self.relu_between {
                burn::tensor::activation::relu(y)
            } else {
                y
            };
        }
        let mut grad = grad_e.matmul(self.linear.weight.val().transpose());
        for (layer, y) in self.hidden.iter().zip(pre).rev() {
            if self.relu_between {
                grad = grad * y.greater_elem(0.0).float();
            }
            grad = grad.matmul(layer.weight.val().transpose());
        }
        grad
    }

    /// Writes the head's layers as a PyTorch `state_dict` in a safetensors file: an `nn.Linear`'s
    /// `weight` `[D, C]` and `bias` `[D]` for a linear head, else an `nn.Sequential`'s
    /// `0.weight`, `0.bias`, … with the ReLUs' indices left free (`0, 2, 4, …`) when
    /// `relu_between` — the layouts [`EmbeddingHead::from_layers`] is built from on import.
    pub fn save_embedder(&self, path: &std::path::Path) -> Result<(), ModelError> {
        let read = |t: burn::tensor::TensorData, what: &str| {
            t.convert::<f32>()
                .try_to_vec::<f32>()
                .map_err(|e| ModelError::Config(format!("reading the head's {what}: {e:?}")))
        };
        let layers = self.layers();
        let step = if self.relu_between { 2 } else { 1 };
        let mut tensors = Vec::with_capacity(2 * layers.len());
        for (i, (weight, bias)) in layers.into_iter().enumerate() {
            let [d, c] = weight.dims();
            let prefix = if self.is_linear() {
                String::new()
            } else {
                format!("{}.", i * step)
            };
            let bias = match bias {
                Some(b) => read(b.into_data(), "bias")?,
                None => vec![0.0; d],
            };
            tensors.push(crate::weights::Named::f32(
                format!("{prefix}weight"),
                vec![d, c],
                &read(weight.into_data(), "weight")?,
            ));
            tensors.push(crate::weights::Named::f32(format!("{prefix}bias"), vec![d], &bias));
        }
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

    /// The last layer's weight `[C, D]` (Burn's `[in, out]` layout: `e = u W + b`), on the
    /// autodiff graph, for closed forms of gradients through a linear head (see
    /// [`EmbeddingHead::is_linear`]).
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
        self.apply(self.pool(features))
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
        self.apply(locations)
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

#[cfg(test)]
mod tests {
    use burn::tensor::{Device, Distribution, Tensor};

    use super::*;

    /// The chain of `backward_projection` through two hidden layers (with and without ReLUs) is
    /// the gradient autodiff computes for `s = Σ g ⊙ project(u)`.
    #[test]
    fn the_multi_layer_projection_gradient_is_autodiffs() {
        let device = Device::flex().autodiff();
        device.seed(5);
        for relu in [true, false] {
            let head = EmbeddingHead::mlp(6, &[5, 4], 3, relu, Pooling::Avg, false, &device).unwrap();
            let u = Tensor::<2>::random([4, 6], Distribution::Normal(0.0, 1.0), &device).require_grad();
            let g = Tensor::<2>::random([4, 3], Distribution::Normal(0.0, 1.0), &device);
            let s = (head.apply(u.clone()) * g.clone()).sum();
            let grads = s.backward();
            let want = u.grad(&grads).unwrap().into_data().try_to_vec::<f32>().unwrap();
            let got = head
                .backward_projection(u.clone().detach(), g)
                .into_data()
                .try_to_vec::<f32>()
                .unwrap();
            for (a, b) in got.iter().zip(&want) {
                assert!((a - b).abs() < 1e-5, "relu {relu}: {got:?} vs {want:?}");
            }
        }
    }

    /// `from_layers` takes PyTorch's `[out, in]` weights: the head computes `W₂ relu(W₁ u + b₁) + b₂`.
    #[test]
    fn layers_from_pytorch_chain_and_round_trip() {
        let device = Device::flex();
        let w1 = Tensor::<2>::from_data([[1.0f32, -1.0], [0.5, 2.0], [0.0, 1.0]], &device);
        let b1 = Tensor::<1>::from_data([0.0f32, -3.0, 1.0], &device);
        let w2 = Tensor::<2>::from_data([[1.0f32, 1.0, 1.0]], &device);
        let b2 = Tensor::<1>::from_data([0.5f32], &device);
        let head = EmbeddingHead::from_layers(vec![(w1, b1), (w2, b2)], true, Pooling::Avg, false).unwrap();
        assert!(!head.is_linear());
        assert_eq!(head.hidden_layout(), (vec![3], true));
        // u = (2, 1): layer 1 gives (1, -1, 2) → relu (1, 0, 2) → 3 + 0.5.
        let e = head.apply(Tensor::<2>::from_data([[2.0f32, 1.0]], &device));
        assert_eq!(e.into_data().try_to_vec::<f32>().unwrap(), vec![3.5]);
        let layers = head.layers();
        assert_eq!(layers[0].0.dims(), [3, 2]);
        let bad = EmbeddingHead::from_layers(
            vec![
                (Tensor::zeros([3, 2], &device), Tensor::zeros([3], &device)),
                (Tensor::zeros([1, 4], &device), Tensor::zeros([1], &device)),
            ],
            true,
            Pooling::Avg,
            false,
        );
        assert!(
            bad.unwrap_err()
                .to_string()
                .contains("takes 4 inputs but the layer before gives 3")
        );
    }
}
