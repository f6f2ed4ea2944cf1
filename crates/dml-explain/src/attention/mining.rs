//! Similarity mining (Zheng et al., Sec. 3.2, Eq. 2–3): erase what the attention points at and
//! ask the model to stay (dis)similar without it.
//!
//! For each tuple, the last stage's attention (closed form, so it stays on the graph) is
//! min-max normalised, upsampled to the image size and turned into a soft mask
//! `1 − σ(a (M̃↑ − b))`; the masked images `x̂ = x ⊙ mask` go through the same model, and the
//! mining loss of their embeddings `f*` is
//!
//! - triplet (Eq. 2): `L_sm = | ‖f*ᵃ − f*ᵖ‖ − ‖f*ᵃ − f*ⁿ‖ |`;
//! - Siamese, positive pairs only: `L_sm = −‖f*¹ − f*²‖`;
//! - quadruplet: the triplet form for `(a, p, n1)` plus the one for `(a, p, n2)`.
//!
//! The training objective is `L = L_ml + γ L_sm` (Eq. 3). The paper applies the sigmoid to `M`
//! directly and gives no values for `a` and `b`; normalising `M` to `[0, 1]` first makes one
//! `(a, b)` meaningful for every model and stage.

use burn::module::{Module, Param};
use burn::tensor::activation::sigmoid;
use burn::tensor::{Device, Int, Tensor, TensorData};
use dml_models::{EmbeddingModel, FeatureMaps};

use super::cam::cam;
use super::closed_form::stage_alpha;
use super::normalize::min_max_normalize;
use super::tuple::{TupleKind, weight_vectors};
use super::upsample::upsample_bilinear;
use crate::error::ExplainError;

dml_config::config! {
    /// Similarity mining in training (the `[similarity_mining]` section of a run).
    #[derive(Debug, Clone, PartialEq)]
    pub struct SimilarityMiningConfig {
        /// Add `γ L_sm` to the metric-learning loss.
        pub enabled: bool = false,
        /// The weight γ of the mining loss (Eq. 3; the paper uses 0.2 for re-identification).
        pub gamma: f64 = 0.5,
        /// The sigmoid's slope `a` in `1 − σ(a (M̃ − b))`.
        pub a: f64 = 10.0,
        /// The sigmoid's threshold `b` on the normalised attention `M̃ ∈ [0, 1]`.
        pub b: f64 = 0.5,
        /// Learn `a` and `b` with the loss's parameters (otherwise they stay fixed).
        pub learnable: bool = false,
        /// The tuples mined on (`triplet`, `siamese_same` for positive pairs, `quadruplet`);
        /// unset: the training loss decides (`triplet` for triplet losses, `siamese_same` for
        /// pair losses such as the contrastive loss).
        pub tuple: Option<TupleKind> = None,
        /// The most tuples per batch whose masked images are embedded (each costs one more
        /// forward and backward pass of its images); the rest are left out at random.
        pub max_tuples: usize = 16,
    }
}

impl SimilarityMiningConfig {
    /// Checks the values serde cannot, naming the key (under `section`, e.g.
    /// `similarity_mining`).
    pub fn validate(&self, section: &str) -> Result<(), ExplainError> {
        let bad = |key: &str, why: String| Err(ExplainError::Config(format!("{section}.{key}: {why}")));
        if !(self.gamma.is_finite() && self.gamma >= 0.0) {
            return bad("gamma", format!("{} must be finite and non-negative", self.gamma));
        }
        if !(self.a.is_finite() && self.a > 0.0) {
            return bad("a", format!("{} must be positive (a slope)", self.a));
        }
        if !self.b.is_finite() {
            return bad("b", format!("{} must be finite", self.b));
        }
        if self.tuple == Some(TupleKind::SiameseDifferent) {
            return bad(
                "tuple",
                "siamese_different: similarity mining uses positive pairs only (Zheng et al., Sec. 3.2); use siamese_same".into(),
            );
        }
        if self.max_tuples == 0 {
            return bad("max_tuples", "must be at least 1".into());
        }
        Ok(())
    }

    /// Builds the mining module on `device` (after [`Self::validate`]).
    pub fn init(&self, device: &Device) -> Result<SimilarityMining, ExplainError> {
        self.validate("similarity_mining")?;
        let scalar = |v: f64| {
            Param::from_tensor(Tensor::from_data(TensorData::new(vec![v as f32], [1]), device))
                .set_require_grad(self.learnable)
        };
        Ok(SimilarityMining {
            a: scalar(self.a),
            b: scalar(self.b),
            gamma: self.gamma,
        })
    }
}

/// The tuples a batch is mined on: `indices` holds `kind.size()` batch indices per tuple, tuple
/// after tuple, in the order of [`TupleKind::roles`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MiningTuples {
    /// The tuple kind (Siamese tuples must be positive pairs).
    pub kind: TupleKind,
    /// `[T · n]` batch indices.
    pub indices: Vec<usize>,
}

impl MiningTuples {
    /// The number of tuples.
    pub fn len(&self) -> usize {
        self.indices.len() / self.kind.size()
    }

    /// Whether there is no tuple.
    pub fn is_empty(&self) -> bool {
        self.indices.is_empty()
    }
}

/// The soft mask's parameters `a`, `b` (learnable or fixed) and the loss weight γ.
#[derive(Module, Debug)]
pub struct SimilarityMining {
    /// The sigmoid's slope `a` `[1]`.
    pub a: Param<Tensor<1>>,
    /// The sigmoid's threshold `b` `[1]`.
    pub b: Param<Tensor<1>>,
    /// The weight γ of the mining loss.
    #[module(skip)]
    pub gamma: f64,
}

/// The soft-masked images `x̂ = x ⊙ (1 − σ(a (M − b)))` `[N, 3, H, W]` from images `x`
/// `[N, 3, H, W]` and image-sized maps `M` `[N, H, W]`, one mask for all channels (Zheng et al.,
/// Sec. 3.2). `a`, `b` are `[1]`.
///
/// # Panics
/// When the maps are not `[N, H, W]` for the images.
pub fn soft_mask(images: Tensor<4>, maps: Tensor<3>, a: Tensor<1>, b: Tensor<1>) -> Tensor<4> {
    let [n, _, h, w] = images.dims();
    assert_eq!(maps.dims(), [n, h, w], "maps must be [N, H, W] for images [N, 3, H, W]");
    let a = a.reshape([1, 1, 1]);
    let b = b.reshape([1, 1, 1]);
    let keep = sigmoid((maps - b) * a).neg().add_scalar(1.0);
    images * keep.unsqueeze_dim::<4>(1)
}

/// `‖x − y‖₂` per row of `[T, D]`, with `1e-12` under the root so that identical rows get a zero
/// gradient instead of NaN.
fn distance(x: Tensor<2>, y: Tensor<2>) -> Tensor<1> {
    (x - y).square().sum_dim(1).add_scalar(1e-12).sqrt().squeeze_dim::<1>(1)
}

/// What one mining pass computed, for the loss and for inspection.
#[derive(Debug, Clone)]
pub struct MiningOutput {
    /// `L_sm` averaged over the tuples, `[1]`, on the graph.
    pub loss: Tensor<1>,
    /// The normalised, image-sized attention `[T · n, H, W]` the masks came from.
    pub attention: Tensor<3>,
    /// The embeddings of the masked images `f*` `[T · n, D]`.
    pub masked_embeddings: Tensor<2>,
}

impl SimilarityMining {
    /// The weight γ of the mining loss (Eq. 3).
    pub fn gamma(&self) -> f64 {
        self.gamma
    }

    /// The mining loss `L_sm` of `tuples` of a batch (see the module documentation), from the
    /// batch's `images` `[B, 3, H, W]`, its embeddings `[B, D]` and last feature maps
    /// `[B, C, h, w]` as the training forward pass produced them (on the graph: the loss reaches
    /// the parameters through the attention too), averaged over the tuples.
    pub fn forward(
        &self,
        model: &EmbeddingModel,
        images: Tensor<4>,
        embeddings: Tensor<2>,
        last_maps: Tensor<4>,
        tuples: &MiningTuples,
    ) -> Result<MiningOutput, ExplainError> {
        let features = FeatureMaps {
            stages: vec![last_maps],
        };
        self.forward_at_stage(model, images, embeddings, &features, 0, tuples)
    }

    /// [`Self::forward`] with the attention of stage `stage` of `features` (all of the batch's
    /// stage maps, on the graph) instead of the last one; an inner stage needs a ResNet and
    /// treats its batch norm as in eval mode (see [`stage_alpha`]).
    pub fn forward_at_stage(
        &self,
        model: &EmbeddingModel,
        images: Tensor<4>,
        embeddings: Tensor<2>,
        features: &FeatureMaps,
        stage: usize,
        tuples: &MiningTuples,
    ) -> Result<MiningOutput, ExplainError> {
        let n = tuples.kind.size();
        if tuples.kind == TupleKind::SiameseDifferent {
            return Err(ExplainError::Config(
                "similarity mining uses positive pairs only (Zheng et al., Sec. 3.2): give siamese_same pairs".into(),
            ));
        }
        let [b, _, height, width] = images.dims();
        let [_, dim] = embeddings.dims();
        if tuples.is_empty() || !tuples.indices.len().is_multiple_of(n) {
            return Err(ExplainError::Shape {
                what: "mining tuples",
                message: format!(
                    "{} indices given; need a positive multiple of {n}",
                    tuples.indices.len()
                ),
            });
        }
        if let Some(bad) = tuples.indices.iter().find(|&&i| i >= b) {
            return Err(ExplainError::Shape {
                what: "mining tuples",
                message: format!("index {bad} is outside the batch of {b} images"),
            });
        }
        let t = tuples.len();
        let device = images.device();
        let index: Vec<i64> = tuples.indices.iter().map(|&i| i as i64).collect();
        let index = Tensor::<1, Int>::from_data(TensorData::new(index, [t * n]), &device);
        let f = embeddings.select(0, index.clone());
        let w = weight_vectors(f.reshape([t, n, dim]), tuples.kind)?;
        let per_image = w.unsqueeze_dim::<3>(1).expand([t, n, dim]).reshape([t * n, dim]);
        let selected = FeatureMaps {
            stages: features
                .stages
                .iter()
                .map(|m| m.clone().select(0, index.clone()))
                .collect(),
        };
        let alpha = stage_alpha(model, &selected, stage, per_image)?;
        let maps = selected.stages[stage].clone();
        let attention = upsample_bilinear(min_max_normalize(cam(maps, alpha)), height, width);
        let masked = soft_mask(images.select(0, index), attention.clone(), self.a.val(), self.b.val());
        let masked_embeddings = model.forward(masked);
        let fs = masked_embeddings.clone().reshape([t, n, dim]);
        let image = |i: usize| fs.clone().narrow(1, i, 1).reshape([t, dim]);
        let per_tuple = match tuples.kind {
            TupleKind::SiameseSame => distance(image(0), image(1)).neg(),
            TupleKind::Triplet => (distance(image(0), image(1)) - distance(image(0), image(2))).abs(),
            TupleKind::Quadruplet => {
                let ap = distance(image(0), image(1));
                (ap.clone() - distance(image(0), image(2))).abs() + (ap - distance(image(0), image(3))).abs()
            }
            TupleKind::SiameseDifferent => unreachable!("rejected above"),
        };
        Ok(MiningOutput {
            loss: per_tuple.mean(),
            attention,
            masked_embeddings,
        })
    }
}
