//! The loss catalogue: one module per loss, the registry that lists them ([`LossConfig`]) and
//! the built loss ([`LossModule`], a module holding any learnable state).
//!
//! Everything about a loss lives in its own module: its configuration (declared through
//! `dml_config::config!`), its facts (name, PML's default distance and reducer, whether it is
//! pair-based or host-evaluated, its learnable tensors, the distances it accepts) as the
//! constants and methods of [`RegisteredLoss`], and its maths. Each loss can be used on its
//! own (`MarginLoss`, `ProxyAnchorLoss`, … are [`LossModule`]s of one configuration type); the
//! registry below turns the list of losses into the TOML-selectable [`LossConfig`], and
//! [`MetricLoss`] is the [`LossModule`] of that enum.
//!
//! Adding a loss is one new file implementing [`RegisteredLoss`] plus one entry
//! `file_name => Variant(ConfigType),` in `registry!` below, which declares the module and
//! re-exports its items.

mod classifier;
mod gml;
mod kinds;
mod state;

pub use kinds::{Batch, BatchData, Context};
pub use state::{LossState, Slot};

use std::fmt::Debug;

use burn::module::{Module, Param};
use burn::tensor::{Device, Gradients, Tensor, TensorData};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::distance::Distance;
use crate::error::LossError;
use crate::miners::Miner;
use crate::reducer::Reducer;
use kinds::{check_finite, check_inputs};

/// Everything the catalogue knows about one loss, implemented by the loss's configuration in
/// the loss's own module.
///
/// The constants are the loss's fixed facts; the methods validate a configuration, create the
/// learnable state and evaluate the loss. [`LossModule`] does the checks that every loss shares
/// (shapes, finiteness, label range) before calling [`Self::evaluate`].
pub trait RegisteredLoss:
    Clone + Debug + PartialEq + Default + Serialize + DeserializeOwned + Send + Sync + 'static
{
    /// The name that selects the loss in TOML (`[loss] name = "..."`). It is the snake_case
    /// form of the loss's [`LossConfig`] variant, which the registry checks at compile time.
    const NAME: &'static str;
    /// PML's default distance, used when the configuration sets none.
    const DEFAULT_DISTANCE: Distance;
    /// PML's default reducer, used when the configuration sets none.
    const DEFAULT_REDUCER: Reducer;
    /// Whether the loss is computed from the batch's `[N, N]` matrix alone, and so can be fed a
    /// precomputed matrix through [`LossModule::forward_with_matrix`].
    const PAIR_BASED: bool;
    /// Whether the loss is evaluated on the host with its analytic gradient (see `host_grad`)
    /// instead of as tensor operations on the autodiff graph. The evaluation helpers check at
    /// compile time that a loss takes the path this constant declares.
    const HOST_EVALUATED: bool = false;
    /// The learnable tensors the loss may hold: the slot of [`LossModule`] that stores each and
    /// its PML name (the name [`LossModule::parameter`] and friends take).
    const PARAMETERS: &'static [(Slot, &'static str)] = &[];

    /// The configured distance, overriding [`Self::DEFAULT_DISTANCE`]; losses that are bound to
    /// one distance have no such field and return `None`.
    fn distance(&self) -> Option<&Distance> {
        None
    }

    /// The configured reducer, overriding [`Self::DEFAULT_REDUCER`].
    fn reducer(&self) -> Option<&Reducer>;

    /// Checks the parameters and that the loss is defined for `distance` (already validated on
    /// its own).
    fn validate(&self, distance: &Distance) -> Result<(), LossError> {
        let _ = distance;
        Ok(())
    }

    /// Whether labels index per-class state, so that a label must be below the number of
    /// classes the loss was built for. By default: whenever the loss has learnable tensors.
    fn labels_index_classes(&self) -> bool {
        !Self::PARAMETERS.is_empty()
    }

    /// The initial learnable state for `num_classes` classes of `dim`-dimensional embeddings,
    /// on `device` (none by default). Initialisation is seeded by a fixed seed, so that two
    /// runs with the same configuration start from the same state.
    fn init_state(&self, num_classes: usize, dim: usize, device: &Device) -> Result<LossState, LossError> {
        let _ = (num_classes, dim, device);
        Ok(LossState::default())
    }

    /// The loss of a batch whose inputs were checked (see [`LossModule::forward`] and
    /// [`LossModule::forward_with_matrix`]); `ctx` holds the resolved distance and reducer and
    /// the learnable tensors.
    fn evaluate(&self, ctx: &Context<'_>, batch: Batch<'_>) -> Result<LossOutput, LossError>;

    /// Builds this loss on its own, without [`MetricLoss`] (see [`LossModule::new`]).
    fn init(&self, num_classes: usize, dim: usize, device: &Device) -> Result<LossModule<Self>, LossError> {
        LossModule::new(self.clone(), num_classes, dim, device)
    }
}

/// A loss configuration whose loss may only be known at run time: every [`RegisteredLoss`]
/// (through a blanket implementation) and [`LossConfig`] (which forwards to the loss it holds).
/// [`LossModule`] is generic over it, so that one implementation serves a single loss
/// ([`MarginLoss`], …) and the whole catalogue ([`MetricLoss`]).
pub trait AnyLossConfig: Debug + Send + Sync + 'static {
    /// [`RegisteredLoss::NAME`].
    fn name(&self) -> &'static str;
    /// [`RegisteredLoss::PAIR_BASED`].
    fn is_pair_based(&self) -> bool;
    /// [`RegisteredLoss::PARAMETERS`].
    fn parameters(&self) -> &'static [(Slot, &'static str)];
    /// The distance and reducer the loss computes with (the configured ones, else the loss's
    /// defaults), once they and the loss's parameters are validated.
    fn resolve(&self) -> Result<(Distance, Reducer), LossError>;
    /// [`RegisteredLoss::labels_index_classes`].
    fn indexes_classes(&self) -> bool;
    /// [`RegisteredLoss::init_state`].
    fn initial_state(&self, num_classes: usize, dim: usize, device: &Device) -> Result<LossState, LossError>;
    /// [`RegisteredLoss::evaluate`].
    fn run(&self, ctx: &Context<'_>, batch: Batch<'_>) -> Result<LossOutput, LossError>;
}

impl<T: RegisteredLoss> AnyLossConfig for T {
    fn name(&self) -> &'static str {
        T::NAME
    }
    fn is_pair_based(&self) -> bool {
        T::PAIR_BASED
    }
    fn parameters(&self) -> &'static [(Slot, &'static str)] {
        T::PARAMETERS
    }
    fn resolve(&self) -> Result<(Distance, Reducer), LossError> {
        let distance = self.distance().cloned().unwrap_or(T::DEFAULT_DISTANCE);
        let reducer = self.reducer().cloned().unwrap_or(T::DEFAULT_REDUCER);
        reducer.validate()?;
        distance.validate()?;
        self.validate(&distance)?;
        Ok((distance, reducer))
    }
    fn indexes_classes(&self) -> bool {
        self.labels_index_classes()
    }
    fn initial_state(&self, num_classes: usize, dim: usize, device: &Device) -> Result<LossState, LossError> {
        self.init_state(num_classes, dim, device)
    }
    fn run(&self, ctx: &Context<'_>, batch: Batch<'_>) -> Result<LossOutput, LossError> {
        self.evaluate(ctx, batch)
    }
}

/// Generates [`LossConfig`] from the list of registered losses: the serde enum tagged by
/// `name`, the list of names, the conversions from each configuration, the compile-time check
/// that each variant's snake_case name is its loss's [`RegisteredLoss::NAME`], and the one
/// `match` that turns the enum into the configuration it holds.
macro_rules! registry {
    ($($(#[$meta:meta])* $module:ident => $variant:ident($config:ty),)*) => {
        // Each loss's file is a public module whose items (its configuration, its loss type and
        // any helper type) are also re-exported here.
        $(
            pub mod $module;
            pub use $module::*;
        )*

        /// A loss as configured in TOML (`[loss] name = "margin" margin = 0.2 beta = 1.2`).
        ///
        /// Tagged by `name` in snake_case; every parameter is optional with PML's default;
        /// unknown names and unknown fields are errors. Each pair-based loss also accepts
        /// `distance` (see [`Distance`]) and every loss `reducer` (see [`Reducer`]) to override
        /// PML's default.
        #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
        #[serde(tag = "name", rename_all = "snake_case")]
        pub enum LossConfig {
            $($(#[$meta])* $variant($config),)*
        }

        /// The names of the registered losses, in registry order.
        const NAMES: &[&str] = &[$(<$config as RegisteredLoss>::NAME),*];

        $(
            const _: () = assert!(
                snake_case_of(stringify!($variant), <$config as RegisteredLoss>::NAME),
                concat!("the TOML name of `LossConfig::", stringify!($variant), "` is not its loss's NAME")
            );

            impl From<$config> for LossConfig {
                fn from(config: $config) -> Self {
                    LossConfig::$variant(config)
                }
            }
        )*

        impl LossConfig {
            /// The configuration this value holds, as the loss it configures.
            fn loss(&self) -> &dyn AnyLossConfig {
                match self {
                    $(LossConfig::$variant(config) => config,)*
                }
            }
        }
    };
}

registry! {
    /// Contrastive loss (Hadsell et al. 2006; PML `ContrastiveLoss`).
    contrastive => Contrastive(ContrastiveLossConfig),
    /// Triplet margin loss, optionally smooth (Weinberger & Saul 2009; PML `TripletMarginLoss`).
    triplet_margin => TripletMargin(TripletMarginLossConfig),
    /// NT-Xent / InfoNCE (Chen et al. 2020; PML `NTXentLoss`).
    nt_xent => NtXent(NtXentLossConfig),
    /// ProxyNCA (Movshovitz-Attias et al. 2017; PML `ProxyNCALoss`).
    proxy_nca => ProxyNca(ProxyNcaLossConfig),
    /// Margin loss with fixed, learnable or per-class β (Wu et al. 2017; PML `MarginLoss`).
    margin => Margin(MarginLossConfig),
    /// Normalised softmax (Zhai & Wu 2018; PML `NormalizedSoftmaxLoss`).
    normalized_softmax => NormalizedSoftmax(NormalizedSoftmaxLossConfig),
    /// CosFace (Wang et al. 2018; PML `CosFaceLoss`).
    cos_face => CosFace(CosFaceLossConfig),
    /// ArcFace (Deng et al. 2019; PML `ArcFaceLoss`).
    arc_face => ArcFace(ArcFaceLossConfig),
    /// FastAP (Cakir et al. 2019; PML `FastAPLoss`).
    fast_ap => FastAp(FastApLossConfig),
    /// Contrastive loss on the signal-to-noise-ratio distance (Yuan et al. 2019; PML
    /// `SignalToNoiseRatioContrastiveLoss`).
    #[serde(alias = "signal_to_noise_ratio_contrastive")]
    snr_contrastive => SnrContrastive(SnrContrastiveLossConfig),
    /// Multi-similarity loss (Wang et al. 2019; PML `MultiSimilarityLoss`).
    multi_similarity => MultiSimilarity(MultiSimilarityLossConfig),
    /// SoftTriple (Qian et al. 2019; PML `SoftTripleLoss`).
    soft_triple => SoftTriple(SoftTripleLossConfig),
    /// Proxy-Anchor (Kim et al. 2020; PML `ProxyAnchorLoss`).
    proxy_anchor => ProxyAnchor(ProxyAnchorLossConfig),
    /// N-pairs (Sohn 2016; PML `NPairsLoss`).
    n_pairs => NPairs(NPairsLossConfig),
    /// Angular loss (Wang et al. 2017; PML `AngularLoss`).
    angular => Angular(AngularLossConfig),
    /// Lifted structure (Oh Song et al. 2016; PML `LiftedStructureLoss`).
    lifted_structure => LiftedStructure(LiftedStructureLossConfig),
    /// Generalised lifted structure (Hermans et al. 2017; PML `GeneralizedLiftedStructureLoss`).
    generalized_lifted_structure => GeneralizedLiftedStructure(GeneralizedLiftedStructureLossConfig),
    /// Circle loss (Sun et al. 2020; PML `CircleLoss`).
    circle => Circle(CircleLossConfig),
    /// Histogram loss (Ustinova & Lempitsky 2016; PML `HistogramLoss`).
    histogram => Histogram(HistogramLossConfig),
    /// Tuplet margin loss (Yu & Tao 2019; PML `TupletMarginLoss`).
    tuplet_margin => TupletMargin(TupletMarginLossConfig),
    /// Supervised contrastive loss (Khosla et al. 2020; PML `SupConLoss`).
    sup_con => SupCon(SupConLossConfig),
    /// Quadruplet loss (Chen et al. 2017), as in DIML's Table 1.
    quadruplet => Quadruplet(QuadrupletLossConfig),
    /// GML-Tri: the triplet-style hinge on `ϕ_s D²` (Kim & Song 2022, PPGML Eq. 9).
    gml_tri => GmlTri(GmlTriLossConfig),
    /// GML-Cont: the contrastive loss on `ϕ_s D²` (PPGML App. I Eq. I.1).
    gml_contrastive => GmlContrastive(GmlContrastiveLossConfig),
    /// GML-MS: multi-similarity with `ϕ_s`-scaled sums (PPGML App. I Eq. I.2).
    gml_ms => GmlMs(GmlMsLossConfig),
    /// GML-PA: Proxy-Anchor with `ϕ_s`-scaled sums (PPGML Eq. 10).
    gml_pa => GmlPa(GmlPaLossConfig),
}

/// Whether `snake` is serde's `snake_case` form of the variant name `camel` (an underscore
/// before every upper-case letter but the first, then everything lower-case).
const fn snake_case_of(camel: &str, snake: &str) -> bool {
    let (c, s) = (camel.as_bytes(), snake.as_bytes());
    let (mut i, mut j) = (0, 0);
    while i < c.len() {
        let b = c[i];
        if b.is_ascii_uppercase() && i > 0 {
            if j >= s.len() || s[j] != b'_' {
                return false;
            }
            j += 1;
        }
        if j >= s.len() || s[j] != b.to_ascii_lowercase() {
            return false;
        }
        i += 1;
        j += 1;
    }
    j == s.len()
}

impl LossConfig {
    /// All valid names, for error messages and the parametrised end-to-end test.
    pub fn names() -> &'static [&'static str] {
        NAMES
    }

    /// A config with PML defaults for a given name (or alias).
    ///
    /// The name is resolved by the same deserialiser as TOML, so that both accept exactly the
    /// same names.
    pub fn default_for(name: &str) -> Result<LossConfig, LossError> {
        let table =
            serde::de::value::MapDeserializer::<_, serde::de::value::Error>::new(std::iter::once(("name", name)));
        LossConfig::deserialize(table)
            .map_err(|_| LossError::Config(format!("unknown loss `{name}`, expected one of {NAMES:?}")))
    }

    /// The snake_case name of this configuration.
    pub fn name(&self) -> &'static str {
        self.loss().name()
    }

    /// Whether the loss is computed from the batch's `[N, N]` matrix alone (and so can be
    /// fed a precomputed matrix through [`MetricLoss::forward_with_matrix`]).
    pub fn is_pair_based(&self) -> bool {
        self.loss().is_pair_based()
    }

    /// Builds the loss; `num_classes` and `dim` size proxies and class weights; learnable
    /// state lives on `device`.
    pub fn init(&self, num_classes: usize, dim: usize, device: &Device) -> Result<MetricLoss, LossError> {
        LossModule::new(self.clone(), num_classes, dim, device)
    }
}

impl AnyLossConfig for LossConfig {
    fn name(&self) -> &'static str {
        self.loss().name()
    }
    fn is_pair_based(&self) -> bool {
        self.loss().is_pair_based()
    }
    fn parameters(&self) -> &'static [(Slot, &'static str)] {
        self.loss().parameters()
    }
    fn resolve(&self) -> Result<(Distance, Reducer), LossError> {
        self.loss().resolve()
    }
    fn indexes_classes(&self) -> bool {
        self.loss().indexes_classes()
    }
    fn initial_state(&self, num_classes: usize, dim: usize, device: &Device) -> Result<LossState, LossError> {
        self.loss().initial_state(num_classes, dim, device)
    }
    fn run(&self, ctx: &Context<'_>, batch: Batch<'_>) -> Result<LossOutput, LossError> {
        self.loss().run(ctx, batch)
    }
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

/// The resolved, non-learnable part of a loss.
#[derive(Clone, Debug)]
struct LossSpec<C> {
    config: C,
    distance: Distance,
    reducer: Reducer,
    num_classes: usize,
    dim: usize,
}

/// A built metric-learning loss: learnable state (possibly none) plus its configuration `C`,
/// either one loss's configuration ([`MarginLoss`], [`ProxyAnchorLoss`], …) or the whole
/// catalogue's ([`MetricLoss`]).
///
/// The learnable tensors are `proxies` `[C, D]` (ProxyAnchor, ProxyNCA), class weights
/// `W` `[D, C]` (normalised softmax, CosFace, ArcFace) or SoftTriple centres `fc`
/// `[D, C*K]` (stored in `weight`), and the margin loss's `beta` (`[1]` or `[C]`). The three
/// slots are the record's field names, whatever the loss.
#[derive(Module, Debug)]
pub struct LossModule<C: AnyLossConfig + Clone> {
    proxies: Option<Param<Tensor<2>>>,
    weight: Option<Param<Tensor<2>>>,
    beta: Option<Param<Tensor<1>>>,
    #[module(skip)]
    spec: LossSpec<C>,
}

/// The loss selected by a [`LossConfig`]: any loss of the catalogue, chosen at run time.
pub type MetricLoss = LossModule<LossConfig>;

impl<C: AnyLossConfig + Clone> LossModule<C> {
    /// Validates `config` and builds the loss; `num_classes` and `dim` size proxies and class
    /// weights; learnable state lives on `device`.
    pub fn new(config: C, num_classes: usize, dim: usize, device: &Device) -> Result<Self, LossError> {
        let (distance, reducer) = config.resolve()?;
        let LossState { proxies, weight, beta } = config.initial_state(num_classes, dim, device)?;
        Ok(Self {
            proxies,
            weight,
            beta,
            spec: LossSpec {
                config,
                distance,
                reducer,
                num_classes,
                dim,
            },
        })
    }

    /// The configuration the loss was built from.
    pub fn config(&self) -> &C {
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

    /// Whether a slot holds a tensor.
    fn holds(&self, slot: Slot) -> bool {
        match slot {
            Slot::Proxies => self.proxies.is_some(),
            Slot::Weight => self.weight.is_some(),
            Slot::Beta => self.beta.is_some(),
        }
    }

    /// The slot of the learnable tensor that the loss calls `name`, if it holds one.
    fn slot(&self, name: &str) -> Option<Slot> {
        self.spec
            .config
            .parameters()
            .iter()
            .find(|(slot, n)| *n == name && self.holds(*slot))
            .map(|(slot, _)| *slot)
    }

    /// The PML names of the learnable tensors: `proxies`, `W`, `fc` or `beta`.
    pub fn parameter_names(&self) -> Vec<&'static str> {
        self.spec
            .config
            .parameters()
            .iter()
            .filter(|(slot, _)| self.holds(*slot))
            .map(|(_, name)| *name)
            .collect()
    }

    /// The current value of a learnable tensor, by PML name.
    pub fn parameter(&self, name: &str) -> Option<TensorData> {
        Some(match self.slot(name)? {
            Slot::Proxies => self.proxies.as_ref()?.val().into_data(),
            Slot::Weight => self.weight.as_ref()?.val().into_data(),
            Slot::Beta => self.beta.as_ref()?.val().into_data(),
        })
    }

    /// The gradient of a learnable tensor, by PML name, after `loss.backward()`.
    pub fn parameter_grad(&self, name: &str, grads: &Gradients) -> Option<TensorData> {
        let grad = match self.slot(name)? {
            Slot::Proxies => self.proxies.as_ref()?.val().grad(grads)?.into_data(),
            Slot::Weight => self.weight.as_ref()?.val().grad(grads)?.into_data(),
            Slot::Beta => self.beta.as_ref()?.val().grad(grads)?.into_data(),
        };
        Some(grad)
    }

    /// Replaces a learnable tensor (for example with values from a reference case or a
    /// checkpoint), keeping its shape; the new tensor is created on `device` in the
    /// data's dtype and tracks gradients.
    pub fn set_parameter(&mut self, name: &str, data: TensorData, device: &Device) -> Result<(), LossError> {
        let Some(slot) = self.slot(name) else {
            return Err(LossError::Config(format!(
                "{} loss has no parameter `{name}` (it has {:?})",
                self.spec.config.name(),
                self.parameter_names()
            )));
        };
        /// The shape of a slot's tensor (empty when the slot is empty, which `slot` excludes).
        fn dims<const D: usize>(p: &Option<Param<Tensor<D>>>) -> Vec<usize> {
            p.as_ref().map(|p| p.val().dims().to_vec()).unwrap_or_default()
        }
        let want = match slot {
            Slot::Proxies => dims(&self.proxies),
            Slot::Weight => dims(&self.weight),
            Slot::Beta => dims(&self.beta),
        };
        let shape = data.shape().to_vec();
        if want != shape {
            return Err(LossError::Shape(format!(
                "parameter `{name}` has shape {want:?}, got {shape:?}"
            )));
        }
        let dtype = data.dtype();
        match slot {
            Slot::Proxies => self.proxies = Some(Param::from_tensor(Tensor::from_data(data, (device, dtype)))),
            Slot::Weight => self.weight = Some(Param::from_tensor(Tensor::from_data(data, (device, dtype)))),
            Slot::Beta => self.beta = Some(Param::from_tensor(Tensor::from_data(data, (device, dtype)))),
        }
        Ok(())
    }

    /// The loss of `embeddings` `[N, D]` (raw; the loss's distance normalises if
    /// configured) with `labels` (length N).
    ///
    /// `miner` optionally selects the tuples (with its own distance, as in PML); `seed`
    /// drives stochastic miners and random triplet sampling deterministically.
    ///
    /// Non-finite embeddings are an error ([`LossError::NonFinite`]) on CPU devices, where
    /// reading them costs no device synchronisation; on other devices only values that the
    /// loss reads back anyway are checked.
    pub fn forward(
        &self,
        embeddings: Tensor<2>,
        labels: &[u32],
        miner: Option<&Miner>,
        seed: u64,
    ) -> Result<LossOutput, LossError> {
        let [n, d] = embeddings.dims();
        check_inputs(n, labels)?;
        // Proxies and class weights are sized by the embedding dimension; β is not.
        if (self.proxies.is_some() || self.weight.is_some()) && d != self.spec.dim {
            return Err(LossError::Shape(format!(
                "embeddings have dimension {d} but the {} loss was built for {}",
                self.spec.config.name(),
                self.spec.dim
            )));
        }
        check_finite(&embeddings, "embeddings")?;
        self.check_labels(labels)?;
        let batch = Batch {
            data: BatchData::Embeddings(embeddings),
            labels,
            miner,
            seed,
        };
        self.spec.config.run(&self.context(), batch)
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
            return Err(kinds::matrix_unsupported(self.spec.config.name()));
        }
        check_finite(&matrix, "matrix")?;
        self.check_labels(labels)?;
        let batch = Batch {
            data: BatchData::Matrix { matrix, is_similarity },
            labels,
            miner,
            seed,
        };
        self.spec.config.run(&self.context(), batch)
    }

    /// What the loss evaluates with besides its configuration.
    fn context(&self) -> Context<'_> {
        Context {
            distance: &self.spec.distance,
            reducer: &self.spec.reducer,
            num_classes: self.spec.num_classes,
            proxies: self.proxies.as_ref(),
            weight: self.weight.as_ref(),
            beta: self.beta.as_ref(),
        }
    }

    fn check_labels(&self, labels: &[u32]) -> Result<(), LossError> {
        if self.spec.config.indexes_classes() {
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

#[cfg(test)]
mod tests;
