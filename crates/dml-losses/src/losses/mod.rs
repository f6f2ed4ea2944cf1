//! The loss catalogue: configuration (`LossConfig`), the built loss (`MetricLoss`, a
//! module holding any learnable state) and its output.

mod angular;
mod circle;
mod contrastive;
mod fast_ap;
mod histogram;
mod lifted_structure;
mod margin;
mod multi_similarity;
mod n_pairs;
mod nt_xent;
mod proxy_anchor;
mod proxy_nca;
mod quadruplet;
mod soft_triple;
mod softmax_family;
mod sup_con;
mod triplet_margin;
mod tuplet_margin;

pub use angular::AngularLossConfig;
pub use circle::CircleLossConfig;
pub use contrastive::ContrastiveLossConfig;
pub use fast_ap::FastApLossConfig;
pub use histogram::HistogramLossConfig;
pub use lifted_structure::{GeneralizedLiftedStructureLossConfig, LiftedStructureLossConfig};
pub use margin::MarginLossConfig;
pub use multi_similarity::MultiSimilarityLossConfig;
pub use n_pairs::NPairsLossConfig;
pub use nt_xent::NtXentLossConfig;
use proxy_anchor::ProxyAnchorGram;
pub use proxy_anchor::ProxyAnchorLossConfig;
pub use proxy_nca::ProxyNcaLossConfig;
pub use quadruplet::{QuadrupletLossConfig, Quadruplets};
pub use soft_triple::SoftTripleLossConfig;
pub use softmax_family::{ArcFaceLossConfig, CosFaceLossConfig, NormalizedSoftmaxLossConfig};
pub use sup_con::SupConLossConfig;
pub use triplet_margin::{TripletMarginLossConfig, TripletsPerAnchor};
pub use tuplet_margin::TupletMarginLossConfig;

use burn::module::{Module, Param};
use burn::tensor::{DType, Device, Gradients, Tensor, TensorData};
use rand::SeedableRng;
use serde::{Deserialize, Serialize};

use crate::attach::{attach_gradient, attach_gradients};
use crate::distance::Distance;
use crate::error::LossError;
use crate::gemm::GramOperand;
use crate::host::HostMatrix;
use crate::host_grad::{GramMap, HostLoss, Norm, attach, normalize_product, normalize_product_backward};
use crate::miners::{MineInput, Miner};
use crate::ops::{float1, float2, host, zero_like};
use crate::reducer::{Reducer, SubLoss};
use crate::tuples::Tuples;
use dml_models::runtime::is_cpu_device;

/// A loss as configured in TOML (`[loss] name = "margin" margin = 0.2 beta = 1.2`).
///
/// Tagged by `name` in snake_case; every parameter is optional with PML's default; unknown
/// names and unknown fields are errors. Each pair-based loss also accepts `distance`
/// (see [`Distance`]) and every loss `reducer` (see [`Reducer`]) to override PML's default.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "name", rename_all = "snake_case")]
pub enum LossConfig {
    /// Contrastive loss (Hadsell et al. 2006; PML `ContrastiveLoss`).
    Contrastive(ContrastiveLossConfig),
    /// Triplet margin loss, optionally smooth (Weinberger & Saul 2009; PML `TripletMarginLoss`).
    TripletMargin(TripletMarginLossConfig),
    /// NT-Xent / InfoNCE (Chen et al. 2020; PML `NTXentLoss`).
    NtXent(NtXentLossConfig),
    /// ProxyNCA (Movshovitz-Attias et al. 2017; PML `ProxyNCALoss`).
    ProxyNca(ProxyNcaLossConfig),
    /// Margin loss with fixed, learnable or per-class β (Wu et al. 2017; PML `MarginLoss`).
    Margin(MarginLossConfig),
    /// Normalised softmax (Zhai & Wu 2018; PML `NormalizedSoftmaxLoss`).
    NormalizedSoftmax(NormalizedSoftmaxLossConfig),
    /// CosFace (Wang et al. 2018; PML `CosFaceLoss`).
    CosFace(CosFaceLossConfig),
    /// ArcFace (Deng et al. 2019; PML `ArcFaceLoss`).
    ArcFace(ArcFaceLossConfig),
    /// FastAP (Cakir et al. 2019; PML `FastAPLoss`).
    FastAp(FastApLossConfig),
    /// Contrastive loss on the signal-to-noise-ratio distance (Yuan et al. 2019; PML
    /// `SignalToNoiseRatioContrastiveLoss`).
    #[serde(alias = "signal_to_noise_ratio_contrastive")]
    SnrContrastive(ContrastiveLossConfig),
    /// Multi-similarity loss (Wang et al. 2019; PML `MultiSimilarityLoss`).
    MultiSimilarity(MultiSimilarityLossConfig),
    /// SoftTriple (Qian et al. 2019; PML `SoftTripleLoss`).
    SoftTriple(SoftTripleLossConfig),
    /// Proxy-Anchor (Kim et al. 2020; PML `ProxyAnchorLoss`).
    ProxyAnchor(ProxyAnchorLossConfig),
    /// N-pairs (Sohn 2016; PML `NPairsLoss`).
    NPairs(NPairsLossConfig),
    /// Angular loss (Wang et al. 2017; PML `AngularLoss`).
    Angular(AngularLossConfig),
    /// Lifted structure (Oh Song et al. 2016; PML `LiftedStructureLoss`).
    LiftedStructure(LiftedStructureLossConfig),
    /// Generalised lifted structure (Hermans et al. 2017; PML `GeneralizedLiftedStructureLoss`).
    GeneralizedLiftedStructure(GeneralizedLiftedStructureLossConfig),
    /// Circle loss (Sun et al. 2020; PML `CircleLoss`).
    Circle(CircleLossConfig),
    /// Histogram loss (Ustinova & Lempitsky 2016; PML `HistogramLoss`).
    Histogram(HistogramLossConfig),
    /// Tuplet margin loss (Yu & Tao 2019; PML `TupletMarginLoss`).
    TupletMargin(TupletMarginLossConfig),
    /// Supervised contrastive loss (Khosla et al. 2020; PML `SupConLoss`).
    SupCon(SupConLossConfig),
    /// Quadruplet loss (Chen et al. 2017), as in DIML's Table 1.
    Quadruplet(QuadrupletLossConfig),
}

/// The output of a loss.
#[derive(Debug, Clone)]
pub struct LossOutput {
    /// The loss, shape `[1]`, connected to the graph. Zero (the embeddings times 0, summed)
    /// when there is no valid tuple; never NaN.
    pub loss: Tensor<1>,
    /// Number of tuples used (triplets, pairs, quadruplets, or batch elements for proxy and
    /// classifier losses).
    pub tuples: usize,
}

/// Per-loss work: sub-losses ready for the reducer plus the tuple count.
pub(crate) struct Computed {
    pub subs: Vec<SubLoss>,
    pub tuples: usize,
}

impl Computed {
    pub(crate) fn empty(n_subs: usize) -> Self {
        Self {
            subs: (0..n_subs).map(|_| SubLoss::zero()).collect(),
            tuples: 0,
        }
    }
}

/// What a pair-based loss computes from.
pub(crate) struct PairInput<'a> {
    /// `[N, N]` matrix of the batch against itself, on the graph.
    pub mat: Tensor<2>,
    /// Whether `mat` is a similarity.
    pub sim: bool,
    /// The distance's power (FastAP's histogram range depends on it).
    pub power: f64,
    pub labels: &'a [u32],
    pub tuples: Option<&'a Tuples>,
    pub seed: u64,
}

/// What a host-evaluated loss computes from.
pub(crate) struct HostInput<'a> {
    /// The `[N, N]` matrix of the batch against itself.
    pub mat: &'a HostMatrix,
    pub labels: &'a [u32],
    pub tuples: Option<&'a Tuples>,
    pub seed: u64,
    pub reducer: &'a Reducer,
}

/// What an embedding-based loss (proxies, classifiers, angular) computes from.
pub(crate) struct EmbInput<'a> {
    /// Raw embeddings `[N, D]`.
    pub emb: Tensor<2>,
    pub labels: &'a [u32],
    pub tuples: Option<&'a Tuples>,
    pub distance: &'a Distance,
}

const NAMES: &[&str] = &[
    "contrastive",
    "triplet_margin",
    "nt_xent",
    "proxy_nca",
    "margin",
    "normalized_softmax",
    "cos_face",
    "arc_face",
    "fast_ap",
    "snr_contrastive",
    "multi_similarity",
    "soft_triple",
    "proxy_anchor",
    "n_pairs",
    "angular",
    "lifted_structure",
    "generalized_lifted_structure",
    "circle",
    "histogram",
    "tuplet_margin",
    "sup_con",
    "quadruplet",
];

/// The seed of learnable-state initialisation: fixed, so that two runs with the same
/// configuration start from the same proxies (the training seed drives everything else).
const INIT_SEED: u64 = 0x5eed_1055;

impl LossConfig {
    /// All valid names, for error messages and the parametrised end-to-end test.
    pub fn names() -> &'static [&'static str] {
        NAMES
    }

    /// A config with PML defaults for a given name.
    pub fn default_for(name: &str) -> Result<LossConfig, LossError> {
        Ok(match name {
            "contrastive" => LossConfig::Contrastive(Default::default()),
            "triplet_margin" => LossConfig::TripletMargin(Default::default()),
            "nt_xent" => LossConfig::NtXent(Default::default()),
            "proxy_nca" => LossConfig::ProxyNca(Default::default()),
            "margin" => LossConfig::Margin(Default::default()),
            "normalized_softmax" => LossConfig::NormalizedSoftmax(Default::default()),
            "cos_face" => LossConfig::CosFace(Default::default()),
            "arc_face" => LossConfig::ArcFace(Default::default()),
            "fast_ap" => LossConfig::FastAp(Default::default()),
            "snr_contrastive" | "signal_to_noise_ratio_contrastive" => LossConfig::SnrContrastive(Default::default()),
            "multi_similarity" => LossConfig::MultiSimilarity(Default::default()),
            "soft_triple" => LossConfig::SoftTriple(Default::default()),
            "proxy_anchor" => LossConfig::ProxyAnchor(Default::default()),
            "n_pairs" => LossConfig::NPairs(Default::default()),
            "angular" => LossConfig::Angular(Default::default()),
            "lifted_structure" => LossConfig::LiftedStructure(Default::default()),
            "generalized_lifted_structure" => LossConfig::GeneralizedLiftedStructure(Default::default()),
            "circle" => LossConfig::Circle(Default::default()),
            "histogram" => LossConfig::Histogram(Default::default()),
            "tuplet_margin" => LossConfig::TupletMargin(Default::default()),
            "sup_con" => LossConfig::SupCon(Default::default()),
            "quadruplet" => LossConfig::Quadruplet(Default::default()),
            other => {
                return Err(LossError::Config(format!(
                    "unknown loss `{other}`, expected one of {NAMES:?}"
                )));
            }
        })
    }

    /// The snake_case name of this configuration.
    pub fn name(&self) -> &'static str {
        match self {
            LossConfig::Contrastive(_) => "contrastive",
            LossConfig::TripletMargin(_) => "triplet_margin",
            LossConfig::NtXent(_) => "nt_xent",
            LossConfig::ProxyNca(_) => "proxy_nca",
            LossConfig::Margin(_) => "margin",
            LossConfig::NormalizedSoftmax(_) => "normalized_softmax",
            LossConfig::CosFace(_) => "cos_face",
            LossConfig::ArcFace(_) => "arc_face",
            LossConfig::FastAp(_) => "fast_ap",
            LossConfig::SnrContrastive(_) => "snr_contrastive",
            LossConfig::MultiSimilarity(_) => "multi_similarity",
            LossConfig::SoftTriple(_) => "soft_triple",
            LossConfig::ProxyAnchor(_) => "proxy_anchor",
            LossConfig::NPairs(_) => "n_pairs",
            LossConfig::Angular(_) => "angular",
            LossConfig::LiftedStructure(_) => "lifted_structure",
            LossConfig::GeneralizedLiftedStructure(_) => "generalized_lifted_structure",
            LossConfig::Circle(_) => "circle",
            LossConfig::Histogram(_) => "histogram",
            LossConfig::TupletMargin(_) => "tuplet_margin",
            LossConfig::SupCon(_) => "sup_con",
            LossConfig::Quadruplet(_) => "quadruplet",
        }
    }

    /// The configured distance override and reducer override.
    fn overrides(&self) -> (Option<&Distance>, Option<&Reducer>) {
        match self {
            LossConfig::Contrastive(c) | LossConfig::SnrContrastive(c) => (c.distance.as_ref(), c.reducer.as_ref()),
            LossConfig::TripletMargin(c) => (c.distance.as_ref(), c.reducer.as_ref()),
            LossConfig::NtXent(c) => (c.distance.as_ref(), c.reducer.as_ref()),
            LossConfig::ProxyNca(c) => (c.distance.as_ref(), c.reducer.as_ref()),
            LossConfig::Margin(c) => (c.distance.as_ref(), c.reducer.as_ref()),
            LossConfig::NormalizedSoftmax(c) => (c.distance.as_ref(), c.reducer.as_ref()),
            LossConfig::CosFace(c) => (None, c.reducer.as_ref()),
            LossConfig::ArcFace(c) => (None, c.reducer.as_ref()),
            LossConfig::FastAp(c) => (c.distance.as_ref(), c.reducer.as_ref()),
            LossConfig::MultiSimilarity(c) => (c.distance.as_ref(), c.reducer.as_ref()),
            LossConfig::SoftTriple(c) => (None, c.reducer.as_ref()),
            LossConfig::ProxyAnchor(c) => (c.distance.as_ref(), c.reducer.as_ref()),
            LossConfig::NPairs(c) => (c.distance.as_ref(), c.reducer.as_ref()),
            LossConfig::Angular(c) => (None, c.reducer.as_ref()),
            LossConfig::LiftedStructure(c) => (c.distance.as_ref(), c.reducer.as_ref()),
            LossConfig::GeneralizedLiftedStructure(c) => (c.distance.as_ref(), c.reducer.as_ref()),
            LossConfig::Circle(c) => (None, c.reducer.as_ref()),
            LossConfig::Histogram(c) => (c.distance.as_ref(), c.reducer.as_ref()),
            LossConfig::TupletMargin(c) => (None, c.reducer.as_ref()),
            LossConfig::SupCon(c) => (c.distance.as_ref(), c.reducer.as_ref()),
            LossConfig::Quadruplet(c) => (c.distance.as_ref(), c.reducer.as_ref()),
        }
    }

    /// PML's default distance of each loss.
    fn default_distance(&self) -> Distance {
        match self {
            LossConfig::Contrastive(_)
            | LossConfig::TripletMargin(_)
            | LossConfig::Margin(_)
            | LossConfig::Angular(_)
            | LossConfig::LiftedStructure(_)
            | LossConfig::GeneralizedLiftedStructure(_)
            | LossConfig::Quadruplet(_) => Distance::euclidean(),
            LossConfig::ProxyNca(_) | LossConfig::FastAp(_) => Distance::squared_euclidean(),
            LossConfig::SnrContrastive(_) => Distance::snr(),
            LossConfig::NormalizedSoftmax(_) | LossConfig::NPairs(_) => Distance::dot_product(),
            LossConfig::NtXent(_)
            | LossConfig::CosFace(_)
            | LossConfig::ArcFace(_)
            | LossConfig::MultiSimilarity(_)
            | LossConfig::SoftTriple(_)
            | LossConfig::ProxyAnchor(_)
            | LossConfig::Circle(_)
            | LossConfig::Histogram(_)
            | LossConfig::TupletMargin(_)
            | LossConfig::SupCon(_) => Distance::cosine(),
        }
    }

    /// PML's default reducer of each loss.
    fn default_reducer(&self) -> Reducer {
        match self {
            LossConfig::Contrastive(_)
            | LossConfig::SnrContrastive(_)
            | LossConfig::TripletMargin(_)
            | LossConfig::Circle(_)
            | LossConfig::SupCon(_) => Reducer::AvgNonZero,
            LossConfig::Margin(_) | LossConfig::ProxyAnchor(_) => Reducer::Divisor,
            _ => Reducer::Mean,
        }
    }

    /// Whether the loss is computed from the batch's `[N, N]` matrix alone (and so can be
    /// fed a precomputed matrix through [`MetricLoss::forward_with_matrix`]).
    pub fn is_pair_based(&self) -> bool {
        !matches!(
            self,
            LossConfig::ProxyNca(_)
                | LossConfig::NormalizedSoftmax(_)
                | LossConfig::CosFace(_)
                | LossConfig::ArcFace(_)
                | LossConfig::SoftTriple(_)
                | LossConfig::ProxyAnchor(_)
                | LossConfig::Angular(_)
        )
    }

    /// Checks parameters and the distance the loss is defined for.
    fn validate(&self, distance: &Distance) -> Result<(), LossError> {
        distance.validate()?;
        let need = |ok: bool, what: &str| {
            if ok {
                Ok(())
            } else {
                Err(LossError::Config(format!(
                    "{} loss needs {what}, got {distance:?}",
                    self.name()
                )))
            }
        };
        match self {
            LossConfig::SnrContrastive(_) => need(matches!(distance, Distance::Snr { .. }), "the SNR distance")?,
            LossConfig::Circle(_) | LossConfig::TupletMargin(_) => need(
                matches!(distance, Distance::Cosine { power } if *power == 1.0),
                "cosine similarity",
            )?,
            LossConfig::FastAp(_) => need(
                distance.is_normalized_lp(2.0, None),
                "Lp (p = 2) on normalised embeddings",
            )?,
            LossConfig::Angular(_) => need(
                distance.is_normalized_lp(2.0, Some(1.0)),
                "Euclidean distance on normalised embeddings",
            )?,
            LossConfig::SoftTriple(_) => need(distance.is_similarity(), "a similarity")?,
            _ => {}
        }
        match self {
            LossConfig::Contrastive(c) | LossConfig::SnrContrastive(c) => c.validate(),
            LossConfig::TripletMargin(c) => c.validate(),
            LossConfig::NtXent(c) => c.validate(),
            LossConfig::Margin(c) => c.validate(),
            LossConfig::NormalizedSoftmax(c) => c.validate(),
            LossConfig::FastAp(c) => c.validate(),
            LossConfig::MultiSimilarity(c) => c.validate(),
            LossConfig::SoftTriple(c) => c.validate(),
            LossConfig::Histogram(c) => c.validate().map(|_| ()),
            LossConfig::SupCon(c) => c.validate(),
            _ => Ok(()),
        }
    }

    /// Builds the loss; `num_classes` and `dim` size proxies and class weights; learnable
    /// state lives on `device`.
    pub fn init(&self, num_classes: usize, dim: usize, device: &Device) -> Result<MetricLoss, LossError> {
        let (distance, reducer) = self.overrides();
        let distance = distance.cloned().unwrap_or_else(|| self.default_distance());
        let reducer = reducer.cloned().unwrap_or_else(|| self.default_reducer());
        reducer.validate()?;
        self.validate(&distance)?;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(INIT_SEED);
        let needs_classes = |what: &str| {
            if num_classes == 0 || dim == 0 {
                Err(LossError::Config(format!(
                    "{} loss has {what}: it needs num_classes > 0 and dim > 0, got {num_classes} and {dim}",
                    self.name()
                )))
            } else {
                Ok(())
            }
        };
        let mut proxies = None;
        let mut weight = None;
        let mut beta = None;
        match self {
            LossConfig::ProxyAnchor(_) => {
                needs_classes("proxies")?;
                // kaiming_normal_(mode = "fan_out") on [C, D]: std = sqrt(2 / C).
                let std = (2.0 / num_classes as f64).sqrt();
                proxies = Some(param2(
                    init::normal(&mut rng, num_classes * dim, std),
                    [num_classes, dim],
                    device,
                ));
            }
            LossConfig::ProxyNca(_) => {
                needs_classes("proxies")?;
                proxies = Some(param2(
                    init::normal(&mut rng, num_classes * dim, 1.0),
                    [num_classes, dim],
                    device,
                ));
            }
            LossConfig::NormalizedSoftmax(_) | LossConfig::CosFace(_) | LossConfig::ArcFace(_) => {
                needs_classes("class weights")?;
                weight = Some(param2(
                    init::normal(&mut rng, num_classes * dim, 1.0),
                    [dim, num_classes],
                    device,
                ));
            }
            LossConfig::SoftTriple(c) => {
                needs_classes("class centres")?;
                let cols = num_classes * c.centers_per_class;
                // kaiming_uniform_(a = sqrt(5)) on [D, C*K]: bound = 1 / sqrt(C*K).
                let bound = 1.0 / (cols as f64).sqrt();
                weight = Some(param2(init::uniform(&mut rng, dim * cols, bound), [dim, cols], device));
            }
            LossConfig::Margin(c) if c.learn_beta => {
                let len = if c.per_class_beta {
                    needs_classes("per-class beta")?;
                    num_classes
                } else {
                    1
                };
                let t = Tensor::<1>::from_data(TensorData::new(vec![c.beta as f32; len], [len]), device);
                beta = Some(Param::from_tensor(t));
            }
            LossConfig::Margin(c) if c.per_class_beta => needs_classes("per-class beta")?,
            _ => {}
        }
        Ok(MetricLoss {
            proxies,
            weight,
            beta,
            spec: LossSpec {
                config: self.clone(),
                distance,
                reducer,
                num_classes,
                dim,
            },
        })
    }
}

fn param2(values: Vec<f32>, shape: [usize; 2], device: &Device) -> Param<Tensor<2>> {
    Param::from_tensor(Tensor::from_data(TensorData::new(values, shape), device))
}

mod init {
    use rand::Rng;

    /// Normal(0, std) samples by Box-Muller (rand_distr is not a dependency).
    pub(super) fn normal<R: Rng>(rng: &mut R, n: usize, std: f64) -> Vec<f32> {
        (0..n)
            .map(|_| {
                let u1: f64 = rng.random::<f64>().max(f64::MIN_POSITIVE);
                let u2: f64 = rng.random();
                ((-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos() * std) as f32
            })
            .collect()
    }

    /// Uniform(-bound, bound) samples.
    pub(super) fn uniform<R: Rng>(rng: &mut R, n: usize, bound: f64) -> Vec<f32> {
        (0..n)
            .map(|_| ((rng.random::<f64>() * 2.0 - 1.0) * bound) as f32)
            .collect()
    }
}

/// The resolved, non-learnable part of a loss.
#[derive(Clone, Debug)]
pub(crate) struct LossSpec {
    pub config: LossConfig,
    pub distance: Distance,
    pub reducer: Reducer,
    pub num_classes: usize,
    pub dim: usize,
}

/// A built metric-learning loss: learnable state (possibly none) plus its configuration.
///
/// The learnable tensors are `proxies` `[C, D]` (ProxyAnchor, ProxyNCA), class weights
/// `W` `[D, C]` (normalised softmax, CosFace, ArcFace) or SoftTriple centres `fc`
/// `[D, C*K]` (stored in `weight`), and the margin loss's `beta` (`[1]` or `[C]`).
#[derive(Module, Debug)]
pub struct MetricLoss {
    proxies: Option<Param<Tensor<2>>>,
    weight: Option<Param<Tensor<2>>>,
    beta: Option<Param<Tensor<1>>>,
    #[module(skip)]
    spec: LossSpec,
}

impl MetricLoss {
    /// The configuration the loss was built from.
    pub fn config(&self) -> &LossConfig {
        &self.spec.config
    }

    /// The distance the loss computes with.
    pub fn distance(&self) -> &Distance {
        &self.spec.distance
    }

    /// The reducer the loss uses.
    pub fn reducer(&self) -> &Reducer {
        &self.spec.reducer
    }

    /// Whether the loss has learnable state (proxies etc.); training creates a separate
    /// optimizer group only then.
    pub fn has_parameters(&self) -> bool {
        self.proxies.is_some() || self.weight.is_some() || self.beta.is_some()
    }

    /// The PML names of the learnable tensors: `proxies`, `W`, `fc` or `beta`.
    pub fn parameter_names(&self) -> Vec<&'static str> {
        let mut names = Vec::new();
        if self.proxies.is_some() {
            names.push("proxies");
        }
        if self.weight.is_some() {
            names.push(self.weight_name());
        }
        if self.beta.is_some() {
            names.push("beta");
        }
        names
    }

    fn weight_name(&self) -> &'static str {
        if matches!(self.spec.config, LossConfig::SoftTriple(_)) {
            "fc"
        } else {
            "W"
        }
    }

    /// The current value of a learnable tensor, by PML name.
    pub fn parameter(&self, name: &str) -> Option<TensorData> {
        match name {
            "proxies" => self.proxies.as_ref().map(|p| p.val().into_data()),
            "beta" => self.beta.as_ref().map(|p| p.val().into_data()),
            n if n == self.weight_name() => self.weight.as_ref().map(|p| p.val().into_data()),
            _ => None,
        }
    }

    /// The gradient of a learnable tensor, by PML name, after `loss.backward()`.
    pub fn parameter_grad(&self, name: &str, grads: &Gradients) -> Option<TensorData> {
        match name {
            "proxies" => self
                .proxies
                .as_ref()
                .and_then(|p| p.val().grad(grads))
                .map(|g| g.into_data()),
            "beta" => self
                .beta
                .as_ref()
                .and_then(|p| p.val().grad(grads))
                .map(|g| g.into_data()),
            n if n == self.weight_name() => self
                .weight
                .as_ref()
                .and_then(|p| p.val().grad(grads))
                .map(|g| g.into_data()),
            _ => None,
        }
    }

    /// Replaces a learnable tensor (for example with values from a reference case or a
    /// checkpoint), keeping its shape; the new tensor is created on `device` in the
    /// data's dtype and tracks gradients.
    pub fn set_parameter(&mut self, name: &str, data: TensorData, device: &Device) -> Result<(), LossError> {
        let dtype = data.dtype();
        let shape: Vec<usize> = data.shape().to_vec();
        let check = |want: Vec<usize>| {
            if want == shape {
                Ok(())
            } else {
                Err(LossError::Shape(format!(
                    "parameter `{name}` has shape {want:?}, got {shape:?}"
                )))
            }
        };
        match name {
            "proxies" if self.proxies.is_some() => {
                check(
                    self.proxies
                        .as_ref()
                        .map(|p| p.val().dims().to_vec())
                        .unwrap_or_default(),
                )?;
                self.proxies = Some(Param::from_tensor(Tensor::from_data(data, (device, dtype))));
            }
            "beta" if self.beta.is_some() => {
                check(self.beta.as_ref().map(|p| p.val().dims().to_vec()).unwrap_or_default())?;
                self.beta = Some(Param::from_tensor(Tensor::from_data(data, (device, dtype))));
            }
            n if n == self.weight_name() && self.weight.is_some() => {
                check(
                    self.weight
                        .as_ref()
                        .map(|p| p.val().dims().to_vec())
                        .unwrap_or_default(),
                )?;
                self.weight = Some(Param::from_tensor(Tensor::from_data(data, (device, dtype))));
            }
            _ => {
                return Err(LossError::Config(format!(
                    "{} loss has no parameter `{name}` (it has {:?})",
                    self.spec.config.name(),
                    self.parameter_names()
                )));
            }
        }
        Ok(())
    }

    /// The loss of `embeddings` `[N, D]` (raw; the loss's distance normalises if
    /// configured) with `labels` (length N).
    ///
    /// `miner` optionally selects the tuples (with its own distance, as in PML); `seed`
    /// drives stochastic miners and random triplet sampling deterministically.
    pub fn forward(
        &self,
        embeddings: Tensor<2>,
        labels: &[u32],
        miner: Option<&Miner>,
        seed: u64,
    ) -> Result<LossOutput, LossError> {
        let [n, d] = embeddings.dims();
        check_inputs(n, labels)?;
        if self.has_parameters() && !matches!(self.spec.config, LossConfig::Margin(_)) && d != self.spec.dim {
            return Err(LossError::Shape(format!(
                "embeddings have dimension {d} but the {} loss was built for {}",
                self.spec.config.name(),
                self.spec.dim
            )));
        }
        check_finite(&embeddings, "embeddings")?;
        self.check_labels(labels)?;
        let cfg = &self.spec.config;
        if self.is_host_evaluated() {
            return self.forward_host(embeddings, labels, miner, seed);
        }
        if let LossConfig::ProxyAnchor(c) = cfg {
            return self.forward_proxy_anchor(c, embeddings, labels, miner, seed);
        }
        let zero = zero_like(&embeddings);
        if cfg.is_pair_based() {
            let mat = self.spec.distance.self_matrix(embeddings.clone());
            let sim = self.spec.distance.is_similarity();
            let tuples = self.mine_for(miner, &mat, sim, &embeddings, labels, seed);
            let input = PairInput {
                mat,
                sim,
                power: self.spec.distance.power(),
                labels,
                tuples: tuples.as_ref(),
                seed,
            };
            return self.finish(self.pair_loss(input)?, &zero);
        }
        let tuples = match miner {
            None => None,
            Some(m) => Some(m.mine(embeddings.clone(), labels, seed)?),
        };
        let dtype = embeddings.dtype();
        let input = EmbInput {
            emb: embeddings,
            labels,
            tuples: tuples.as_ref(),
            distance: &self.spec.distance,
        };
        let computed = match cfg {
            LossConfig::ProxyNca(c) => c.compute(&input, self.proxies_val(dtype)?)?,
            LossConfig::NormalizedSoftmax(c) => c.compute(&input, self.weight_val(dtype)?)?,
            LossConfig::CosFace(c) => c.compute(&input, self.weight_val(dtype)?)?,
            LossConfig::ArcFace(c) => c.compute(&input, self.weight_val(dtype)?)?,
            LossConfig::SoftTriple(c) => c.compute(&input, self.weight_val(dtype)?, self.spec.num_classes)?,
            LossConfig::Angular(c) => c.compute(&input)?,
            _ => unreachable!("pair-based losses are handled above"),
        };
        self.finish(computed, &zero)
    }

    /// The loss from a precomputed `[N, N]` matrix of the batch against itself: a distance
    /// (smaller is closer) or, with `is_similarity`, a similarity. For pair-based losses
    /// only (everything except the proxy, classifier and angular losses); the loss's own
    /// distance is bypassed, and a miner, if any, mines on this same matrix.
    ///
    /// DIML trains Margin and Multi-Similarity on the average of the global and the
    /// structural (optimal-transport) matrix this way.
    pub fn forward_with_matrix(
        &self,
        matrix: Tensor<2>,
        is_similarity: bool,
        labels: &[u32],
        miner: Option<&Miner>,
        seed: u64,
    ) -> Result<LossOutput, LossError> {
        let [n, m] = matrix.dims();
        if n != m {
            return Err(LossError::Shape(format!("matrix must be square, got [{n}, {m}]")));
        }
        check_inputs(n, labels)?;
        if !self.spec.config.is_pair_based() {
            return Err(LossError::Unsupported(format!(
                "the {} loss needs embeddings or learnable state, not just a matrix",
                self.spec.config.name()
            )));
        }
        check_finite(&matrix, "matrix")?;
        self.check_labels(labels)?;
        if self.is_host_evaluated() {
            let hm = HostMatrix::from_tensor(matrix.clone(), is_similarity);
            let tuples = miner.map(|mi| {
                // Without embeddings the dimension is unknown: the distance-weighted miner uses
                // its configured `dim`, else N.
                mi.mine_matrix(&MineInput {
                    matrix: &hm,
                    labels,
                    dim: n.max(2),
                    seed,
                })
            });
            let (hl, beta_grad) = self.host_loss(&hm, labels, tuples.as_ref(), seed, matrix.dtype());
            let grad = float2(hl.grad.clone(), [n, n], &matrix.device(), matrix.dtype());
            return Ok(self.attach_all(matrix, grad, &hl, beta_grad));
        }
        let zero = zero_like(&matrix);
        let tuples = miner.map(|mi| {
            let hm = if mi.needs_matrix() {
                HostMatrix::from_tensor(matrix.clone(), is_similarity)
            } else {
                HostMatrix {
                    n,
                    values: Vec::new(),
                    is_similarity,
                }
            };
            // Without embeddings the dimension is unknown: the distance-weighted miner uses its
            // configured `dim`, else N.
            mi.mine_matrix(&MineInput {
                matrix: &hm,
                labels,
                dim: n.max(2),
                seed,
            })
        });
        let input = PairInput {
            mat: matrix,
            sim: is_similarity,
            power: self.spec.distance.power(),
            labels,
            tuples: tuples.as_ref(),
            seed,
        };
        self.finish(self.pair_loss(input)?, &zero)
    }

    /// Proxy-Anchor, evaluated on the host (see `host_grad`).
    fn forward_proxy_anchor(
        &self,
        c: &ProxyAnchorLossConfig,
        embeddings: Tensor<2>,
        labels: &[u32],
        miner: Option<&Miner>,
        seed: u64,
    ) -> Result<LossOutput, LossError> {
        let tuples = match miner {
            None => None,
            Some(m) => Some(m.mine(embeddings.clone(), labels, seed)?),
        };
        let dtype = embeddings.dtype();
        let proxies = self.proxies_val(dtype)?;
        let distance = &self.spec.distance;
        let sim = distance.is_similarity();
        let gram = matches!(GramMap::for_distance(distance), Some(GramMap::Similarity { power }) if power == 1.0);
        if gram {
            let on = ProxyAnchorGram {
                config: c,
                reducer: &self.spec.reducer,
                labels,
                tuples: tuples.as_ref(),
                normalize: distance.normalizes(),
                sim,
            };
            return Ok(match (is_cpu_device(&embeddings.device()), dtype) {
                (true, DType::F64) => on.host::<f64>(embeddings, proxies),
                (true, _) => on.host::<f32>(embeddings, proxies),
                (false, _) => on.device(embeddings, proxies),
            });
        }
        let mat = distance.matrix(embeddings, proxies);
        let [_, classes] = mat.dims();
        let values = host(mat.clone());
        let hl = c.host(&values, classes, sim, labels, tuples.as_ref(), &self.spec.reducer);
        Ok(LossOutput {
            loss: attach(mat, hl.grad, hl.value),
            tuples: hl.tuples,
        })
    }

    /// Whether the loss is evaluated on the host with its analytic gradient (see
    /// `host_grad`): the pair- and triplet-based losses that dominate training time.
    fn is_host_evaluated(&self) -> bool {
        matches!(
            self.spec.config,
            LossConfig::Margin(_) | LossConfig::TripletMargin(_) | LossConfig::MultiSimilarity(_)
        )
    }

    /// Mines on the loss's own matrix when the miner ranks with the same distance, else on
    /// a detached matrix of the miner's distance.
    fn mine_for(
        &self,
        miner: Option<&Miner>,
        mat: &Tensor<2>,
        sim: bool,
        embeddings: &Tensor<2>,
        labels: &[u32],
        seed: u64,
    ) -> Option<Tuples> {
        let m = miner?;
        let [n, dim] = embeddings.dims();
        let hm = if !m.needs_matrix() {
            HostMatrix {
                n,
                values: Vec::new(),
                is_similarity: false,
            }
        } else if m.distance() == self.spec.distance {
            HostMatrix::from_tensor(mat.clone(), sim)
        } else {
            let md = m.distance();
            HostMatrix::from_tensor(md.self_matrix(embeddings.clone().detach()), md.is_similarity())
        };
        Some(m.mine_matrix(&MineInput {
            matrix: &hm,
            labels,
            dim,
            seed,
        }))
    }

    /// The host-evaluated path of [`Self::forward`]. For Gram-based distances the graph
    /// stops at `S = x̂ x̂ᵀ`; the distance, the mining, the loss and `∂L/∂S` are host work.
    fn forward_host(
        &self,
        embeddings: Tensor<2>,
        labels: &[u32],
        miner: Option<&Miner>,
        seed: u64,
    ) -> Result<LossOutput, LossError> {
        let [n, dim] = embeddings.dims();
        let distance = &self.spec.distance;
        let sim = distance.is_similarity();
        let dtype = embeddings.dtype();
        // Gram-based distances: S = R / (n_i n_j) from the raw product R = X Xᵀ and its
        // diagonal; neither the normalisation, the distance nor either matrix product enters
        // the graph, which is re-entered at the embeddings themselves.
        let gram = GramMap::for_distance(distance).map(|map| {
            let operand = GramOperand::new(&embeddings);
            let raw = operand.gram();
            let norms: Vec<Norm> = (0..n)
                .map(|i| Norm::new(raw[i * n + i], distance.normalizes()))
                .collect();
            let s_host = normalize_product(&raw, &norms, &norms);
            (map, operand, norms, s_host)
        });
        let (values, graph) = match &gram {
            Some((map, _, _, s_host)) => (map.matrix(s_host, n), None),
            None => {
                let mat = distance.self_matrix(embeddings.clone());
                (host(mat.clone()), Some(mat))
            }
        };
        let hm = HostMatrix {
            n,
            values,
            is_similarity: sim,
        };
        let tuples = match miner {
            None => None,
            Some(m) if !m.needs_matrix() || m.distance() == *distance => Some(m.mine_matrix(&MineInput {
                matrix: &hm,
                labels,
                dim,
                seed,
            })),
            Some(m) => Some(m.mine(embeddings.clone(), labels, seed)?),
        };
        let (hl, beta_grad) = self.host_loss(&hm, labels, tuples.as_ref(), seed, dtype);
        match (graph, gram) {
            (Some(mat), _) => {
                let grad = float2(hl.grad.clone(), [n, n], &mat.device(), dtype);
                Ok(self.attach_all(mat, grad, &hl, beta_grad))
            }
            (None, Some((map, operand, norms, s_host))) => {
                // ∂L/∂X = (∂R + ∂Rᵀ + diag(u + v)) X: one matrix product.
                let g = map.chain(&s_host, &hl.grad, n);
                let (dr, u, v) = normalize_product_backward(&g, &s_host, &norms, &norms);
                let mut a: Vec<f64> = (0..n * n).map(|k| dr[k] + dr[(k % n) * n + k / n]).collect();
                for i in 0..n {
                    a[i * n + i] += u[i] + v[i];
                }
                Ok(self.attach_all(embeddings, operand.left_multiply(a), &hl, beta_grad))
            }
            (None, None) => unreachable!("either the Gram path or the graph matrix"),
        }
    }

    /// Dispatches to the host-evaluated losses; also returns `∂L/∂β` for the margin loss.
    fn host_loss(
        &self,
        hm: &HostMatrix,
        labels: &[u32],
        tuples: Option<&Tuples>,
        seed: u64,
        dtype: DType,
    ) -> (HostLoss, Vec<f64>) {
        let input = HostInput {
            mat: hm,
            labels,
            tuples,
            seed,
            reducer: &self.spec.reducer,
        };
        match &self.spec.config {
            LossConfig::Margin(c) => {
                let beta = match &self.beta {
                    Some(b) => host(b.val().cast(dtype)),
                    None => vec![c.beta],
                };
                c.host(&input, &beta)
            }
            LossConfig::TripletMargin(c) => (c.host(&input), Vec::new()),
            LossConfig::MultiSimilarity(c) => (c.host(&input), Vec::new()),
            other => unreachable!("{} is not host-evaluated", other.name()),
        }
    }

    /// The loss value attached to `graph` with its gradient `grad` (same shape), and to β
    /// with `beta_grad` when β is learnable.
    fn attach_all(&self, graph: Tensor<2>, grad: Tensor<2>, hl: &HostLoss, beta_grad: Vec<f64>) -> LossOutput {
        let (device, dtype) = (graph.device(), graph.dtype());
        let value = float1(vec![hl.value], &device, dtype);
        let loss = match &self.beta {
            Some(b) if !beta_grad.is_empty() => {
                let grad_beta = float1(beta_grad, &device, dtype);
                attach_gradients(value, (graph, grad), (b.val().cast(dtype), grad_beta))
            }
            _ => attach_gradient(value, graph, grad),
        };
        LossOutput {
            loss,
            tuples: hl.tuples,
        }
    }

    fn pair_loss(&self, input: PairInput<'_>) -> Result<Computed, LossError> {
        Ok(match &self.spec.config {
            LossConfig::Contrastive(c) | LossConfig::SnrContrastive(c) => c.compute(&input)?,
            LossConfig::NtXent(c) => c.compute(&input)?,
            LossConfig::FastAp(c) => c.compute(&input)?,
            LossConfig::NPairs(c) => c.compute(&input)?,
            LossConfig::LiftedStructure(c) => c.compute(&input)?,
            LossConfig::GeneralizedLiftedStructure(c) => c.compute(&input)?,
            LossConfig::Circle(c) => c.compute(&input)?,
            LossConfig::Histogram(c) => c.compute(&input)?,
            LossConfig::TupletMargin(c) => c.compute(&input)?,
            LossConfig::SupCon(c) => c.compute(&input)?,
            LossConfig::Quadruplet(c) => c.compute(&input)?,
            other => {
                return Err(LossError::Unsupported(format!("{} is not pair-based", other.name())));
            }
        })
    }

    fn finish(&self, computed: Computed, zero: &Tensor<1>) -> Result<LossOutput, LossError> {
        let loss = self.spec.reducer.reduce_all(computed.subs, zero);
        Ok(LossOutput {
            loss,
            tuples: computed.tuples,
        })
    }

    // Learnable state follows the embeddings' float type (as PML's `cast_types`), so that
    // f64 embeddings work with f32-initialised proxies; the cast is a no-op otherwise.
    fn proxies_val(&self, dtype: DType) -> Result<Tensor<2>, LossError> {
        self.proxies
            .as_ref()
            .map(|p| p.val().cast(dtype))
            .ok_or_else(|| LossError::Config("loss has no proxies".into()))
    }

    fn weight_val(&self, dtype: DType) -> Result<Tensor<2>, LossError> {
        self.weight
            .as_ref()
            .map(|p| p.val().cast(dtype))
            .ok_or_else(|| LossError::Config("loss has no class weights".into()))
    }

    fn check_labels(&self, labels: &[u32]) -> Result<(), LossError> {
        let per_class = match &self.spec.config {
            LossConfig::Margin(c) => c.per_class_beta,
            cfg => !cfg.is_pair_based() && !matches!(cfg, LossConfig::Angular(_)),
        };
        if per_class {
            let c = self.spec.num_classes;
            if let Some((row, &label)) = labels.iter().enumerate().find(|(_, l)| **l as usize >= c) {
                return Err(LossError::Label {
                    row,
                    label,
                    num_classes: c,
                });
            }
        }
        Ok(())
    }
}

fn check_inputs(n: usize, labels: &[u32]) -> Result<(), LossError> {
    if n == 0 {
        return Err(LossError::Shape("empty batch (0 embeddings)".into()));
    }
    if labels.len() != n {
        return Err(LossError::Shape(format!("{n} embeddings but {} labels", labels.len())));
    }
    Ok(())
}

/// Rejects NaN and infinite inputs, naming the first offending row. One reduction decides
/// the common case; only a non-finite sum triggers the row scan (which also tolerates a
/// sum that merely overflowed).
pub(crate) fn check_finite(x: &Tensor<2>, what: &str) -> Result<(), LossError> {
    let total = host(x.clone().sum());
    if total.first().is_some_and(|t| t.is_finite()) {
        return Ok(());
    }
    let [_, d] = x.dims();
    let values = host(x.clone());
    if let Some(i) = values.iter().position(|v| !v.is_finite()) {
        return Err(LossError::NonFinite {
            what: what.to_string(),
            row: i / d.max(1),
            value: values[i],
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests;
