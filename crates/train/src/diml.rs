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
use serde::{Deserialize, Serialize};

use crate::error::TrainError;

/// The `[diml]` section of a run: structural matching inside the training loss.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DimlConfig {
    /// Train with DIML's combined global + structural distance (off: the plain loss).
    pub enabled: bool,
    /// Side `G` of the grid the last feature map is reduced to (DIML: 4).
    pub grid: usize,
    /// Entropic regularisation of the transport problems (DIML: 0.05).
    pub eps: f64,
    /// Sinkhorn iteration cap.
    pub max_iters: usize,
    /// `cross_correlation` (DIML Eq. 8–9) or `uniform` (Eq. 7) marginals.
    pub marginals: MarginalsName,
}

/// The marginals of the transport problems, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MarginalsName {
    /// Cross-correlation weights of the locations (DIML Eq. 8–9).
    CrossCorrelation,
    /// Uniform weights (DIML Eq. 7).
    Uniform,
}

impl Default for DimlConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            grid: 4,
            eps: 0.05,
            max_iters: 100,
            marginals: MarginalsName::CrossCorrelation,
        }
    }
}

/// The losses DIML training supports, for error messages.
pub const SUPPORTED: &str = "pair-based losses on normalised Euclidean distance (e.g. margin, contrastive, \
     triplet_margin) or cosine similarity (e.g. multi_similarity, circle), and proxy_nca with spatial proxies";

impl DimlConfig {
    /// Checks the values serde cannot, naming the key.
    pub fn validate(&self, loss: &LossConfig) -> Result<(), TrainError> {
        if !self.enabled {
            return Ok(());
        }
        if self.grid == 0 {
            return Err(TrainError::Config("diml.grid: must be at least 1".into()));
        }
        if !(self.eps.is_finite() && self.eps > 0.0) {
            return Err(TrainError::Config(format!("diml.eps: {} must be positive", self.eps)));
        }
        if self.max_iters == 0 {
            return Err(TrainError::Config("diml.max_iters: must be at least 1".into()));
        }
        if matches!(loss, LossConfig::ProxyNca(_)) {
            return Ok(());
        }
        let unsupported = |why: &str| {
            Err(TrainError::Config(format!(
                "diml.enabled: the {} loss {why}; DIML training supports {SUPPORTED}",
                loss.name()
            )))
        };
        if !loss.is_pair_based() {
            return unsupported("is not pair-based");
        }
        Ok(())
    }

    fn structural(&self) -> Result<Structural, TrainError> {
        StructuralConfig {
            sinkhorn: SinkhornConfig {
                eps: self.eps,
                max_iters: self.max_iters,
                gradient: PlanGradient::Detached,
                ..SinkhornConfig::default()
            },
            marginals: match self.marginals {
                MarginalsName::CrossCorrelation => Marginals::CrossCorrelation,
                MarginalsName::Uniform => Marginals::Uniform,
            },
        }
        .init()
        .map_err(|e| TrainError::Config(format!("diml: {e}")))
    }
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
        .map_err(|e| TrainError::Config(format!("diml.grid: {e}")))?;
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
            structural: config.structural()?,
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
