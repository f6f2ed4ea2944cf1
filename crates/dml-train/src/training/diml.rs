//! DIML training (Zhao et al., ICCV 2021, Sec. 3.4 and Appendix A.3): the loss sees the average of
//! the global and the structural distance (Eq. 16) or similarity (Eq. 19) of every pair of a batch,
//! or, for ProxyNCA, of every image and every spatial proxy (Eq. 21).

use burn::module::{Module, Param};
use burn::tensor::activation::log_softmax;
use burn::tensor::{Device, Distribution, Int, Tensor, TensorData};
use dml_losses::{Distance, LossConfig, LossError, LossOutput, MetricLoss, Miner};
use dml_models::EmbeddingModel;
use dml_ot::{
    GridPool, GridPoolConfig, Marginals, PlanGradient, SinkhornConfig, Structural, StructuralConfig, l2_normalize,
    to_locations, unit_euclidean_distance,
};

use crate::config::{DimlConfig, MarginalsName};
use crate::error::TrainError;

/// The structural similarity of DIML training, as `[diml]` configures it.
fn structural(config: &DimlConfig) -> Result<Structural, TrainError> {
    StructuralConfig {
        sinkhorn: SinkhornConfig {
            eps: config.eps,
            max_iters: config.max_iters,
            gradient: PlanGradient::Detached,
            ..SinkhornConfig::default()
        },
        marginals: match config.marginals {
            MarginalsName::CrossCorrelation => Marginals::CrossCorrelation,
            MarginalsName::Uniform => Marginals::Uniform,
        },
    }
    .init()
    .map_err(|e| TrainError::structural("diml", e))
}

/// The learnable spatial proxies `ρ^c ∈ R^{G·G × D}` of DIML's ProxyNCA (Eq. 21); the global proxy
/// is their average, `η^c = GAP(ρ^c)`.
#[derive(Module, Debug)]
pub struct SpatialProxies {
    /// `[C, G·G, D]`.
    pub rho: Param<Tensor<3>>,
}

/// DIML's part of a [`crate::Learner`]: the grid pooling, the solver and, for ProxyNCA, the spatial
/// proxies.
#[derive(Debug, Clone)]
pub struct Diml {
    pool: GridPool,
    structural: Structural,
    /// `Some` for ProxyNCA.
    pub proxies: Option<SpatialProxies>,
    /// Softmax scale of ProxyNCA.
    scale: f64,
    /// Whether the loss compares with a similarity (Eq. 19) rather than a distance (Eq. 16).
    similarity: bool,
}

impl Diml {
    /// Builds DIML's state for `loss` (already validated by [`DimlConfig::validate`]).
    pub fn new(
        config: &DimlConfig,
        loss: &MetricLoss,
        num_classes: usize,
        dim: usize,
        device: &Device,
    ) -> Result<Self, TrainError> {
        let grid = GridPoolConfig {
            grid: config.grid,
            ..GridPoolConfig::default()
        }
        .init()
        .map_err(|e| TrainError::structural("diml.grid", e))?;
        let (proxies, scale) = match loss.config() {
            LossConfig::ProxyNca(c) => {
                let rho = Tensor::<3>::random(
                    [num_classes, config.grid * config.grid, dim],
                    Distribution::Normal(0.0, 1.0),
                    device,
                );
                (
                    Some(SpatialProxies {
                        rho: Param::from_tensor(rho),
                    }),
                    c.softmax_scale,
                )
            }
            _ => (None, 1.0),
        };
        let distance = loss.distance();
        let similarity = distance.is_similarity();
        // The structural side compares unit-length locations by cosine or by Euclidean distance,
        // so the loss's own distance must be one of those two for the average to make sense.
        if proxies.is_none() && *distance != Distance::cosine() && !distance.is_normalized_lp(2.0, Some(1.0)) {
            return Err(TrainError::Config(format!(
                "diml.enabled: the {} loss uses {distance:?}; DIML averages with cosine similarity or \
                 Euclidean distance of normalised embeddings (set loss.distance accordingly)",
                loss.config().name()
            )));
        }
        Ok(Self {
            pool: grid,
            structural: structural(config)?,
            proxies,
            scale,
            similarity,
        })
    }

    /// The DIML loss of a batch: `images` `[B, 3, H, W]` through `model`, local embeddings of the
    /// `G × G` grid, then the loss on `½ (global + structural)` of every pair (Eq. 16 / 19), or
    /// ProxyNCA against the spatial proxies (Eq. 20–21, PML's softmax over all classes).
    pub fn forward(
        &self,
        model: &EmbeddingModel,
        loss: &MetricLoss,
        images: Tensor<4>,
        labels: &[u32],
        miner: Option<&Miner>,
        seed: u64,
    ) -> Result<LossOutput, LossError> {
        let (embeddings, maps) = model.forward_with_features(images);
        let locals = model
            .head
            .project_locations(to_locations(self.pool.forward(maps.last().clone())));
        if let Some(p) = &self.proxies {
            return Ok(self.proxy_nca(embeddings, locals, p.rho.val(), labels));
        }
        let pw = self.structural.similarity_matrix(locals);
        let matrix = if self.similarity {
            pw.combined_similarity()
        } else {
            pw.combined_distance()
        };
        loss.forward_with_matrix(matrix, self.similarity, labels, miner, seed)
    }

    /// `-log softmax_c(-s · ½ (d(ψ, η^c) + d_struct(z, ρ^c)))[y]`, averaged over the batch.
    fn proxy_nca(&self, embeddings: Tensor<2>, locals: Tensor<3>, rho: Tensor<3>, labels: &[u32]) -> LossOutput {
        let [n, _] = embeddings.dims();
        let device = embeddings.device();
        // d(ψ, η): Euclidean distance of the unit global embedding and the unit mean proxy, with the
        // structural side's convention.
        let eta = l2_normalize(rho.clone().mean_dim(1).squeeze_dim::<2>(1));
        let psi = l2_normalize(embeddings);
        let d_global = unit_euclidean_distance(psi.matmul(eta.transpose()));
        let pw = self.structural.cross_similarity(locals, rho);
        let d = (d_global + pw.distance).mul_scalar(0.5);
        let logp = log_softmax(d.mul_scalar(-self.scale), 1);
        let targets: Vec<i64> = labels.iter().map(|&l| i64::from(l)).collect();
        let targets = Tensor::<2, Int>::from_data(TensorData::new(targets, [n, 1]), &device);
        let loss = logp.gather(1, targets).mean().neg();
        LossOutput { loss, tuples: n }
    }
}
