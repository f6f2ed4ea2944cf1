//! Similarity attention of one tuple (Zheng et al., Sec. 3.1–3.2, Eq. 1): Grad-CAM driven by
//! the similarity score `s = wᵀf` instead of a class logit.

use burn::module::Module;
use burn::tensor::Tensor;
use dml_models::EmbeddingModel;

use super::cam::cam;
use super::closed_form::stage_alpha;
use super::tuple::{TupleKind, weight_vectors};
use crate::error::ExplainError;

/// The similarity attention of the `n` images of one tuple at one stage.
#[derive(Debug, Clone)]
pub struct SimilarityAttention {
    /// The model's embeddings `f` `[n, D]` (in eval mode).
    pub embeddings: Tensor<2>,
    /// The weight vector `w` `[D]` (detached; see [`weight_vectors`]).
    pub weights: Tensor<1>,
    /// The scores `sⁱ = wᵀfⁱ` `[n]`.
    pub scores: Tensor<1>,
    /// Grad-CAM's channel weights `α` `[n, C]`: the spatial mean of `∂sⁱ/∂Aⁱ`.
    pub alpha: Tensor<2>,
    /// The feature maps `A` `[n, C, h, w]` of the explained stage.
    pub features: Tensor<4>,
    /// The attention `Mⁱ = ReLU(Σ_k α_k A_kⁱ)` `[n, h, w]` at the stage's resolution; see
    /// [`crate::upsample_bilinear`] and [`crate::min_max_normalize`] for the image-sized,
    /// normalised map.
    pub maps: Tensor<3>,
    /// The explained stage's index in the backbone's [`dml_models::FeatureMaps`].
    pub stage: usize,
}

/// How `α` is obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlphaMethod {
    /// Backpropagation of `Σ sⁱ` to the detached stage map through the rest of the network
    /// (any stage; needs an autodiff device). Because each image's score depends only on its
    /// own map (batch norm in eval mode), the gradient of the sum gives every image its own.
    Autodiff,
    /// The closed form of [`stage_alpha`] (any device), differentiable: the last stage of every
    /// backbone, and every stage of a ResNet.
    ClosedForm,
}

fn check_images(images: &Tensor<4>, kind: TupleKind) -> Result<(), ExplainError> {
    let dims = images.dims();
    if dims[0] != kind.size() || dims[1] != 3 {
        return Err(ExplainError::Shape {
            what: "images",
            message: format!(
                "{dims:?} given; a {kind:?} tuple needs [{}, 3, H, W] ({})",
                kind.size(),
                kind.roles().join(", ")
            ),
        });
    }
    Ok(())
}

/// Explains why the `n` images `[n, 3, H, W]` of one tuple of `kind` (in the order of
/// [`TupleKind::roles`]) are (dis)similar, at the stage called `stage` of the model's backbone
/// (e.g. `layer3`; [`dml_models::Backbone::stage_names`] lists them).
///
/// The model runs in eval mode (batch norm with its running statistics; a frozen copy is used, the
/// model itself is unchanged). `w` comes from the detached, L2-normalised embeddings; the scores
/// are `sⁱ = wᵀfⁱ` with `f` the model's embeddings; `α` is computed by `method`, and
/// `M = ReLU(Σ_k α_k A_k)` (Eq. 1).
pub fn similarity_attention(
    model: &EmbeddingModel,
    images: Tensor<4>,
    kind: TupleKind,
    stage: &str,
    method: AlphaMethod,
) -> Result<SimilarityAttention, ExplainError> {
    check_images(&images, kind)?;
    let stage = model.backbone.stage_index(stage)?;
    let backbone = model.backbone.clone().freeze_batchnorm();
    let maps = backbone.forward_features(images);
    let embeddings = model.head.forward(maps.last().clone());
    let [n, dim] = embeddings.dims();
    let weights = weight_vectors(embeddings.clone().reshape([1, n, dim]), kind)?;
    let scores = (embeddings.clone() * weights.clone()).sum_dim(1).squeeze_dim::<1>(1);
    let per_image = weights.clone().expand([n, dim]);
    let (features, alpha) = match method {
        AlphaMethod::ClosedForm => {
            let alpha = stage_alpha(model, &maps, stage, per_image)?;
            (maps.stages[stage].clone(), alpha)
        }
        AlphaMethod::Autodiff => {
            if !maps.stages[stage].is_autodiff() {
                return Err(ExplainError::NotAutodiff("Grad-CAM through autodiff"));
            }
            let features = maps.stages[stage].clone().detach().require_grad();
            // Only the stage map's gradient is wanted: untracked parameters spare the backward
            // pass every weight gradient.
            let (rest, head) = (backbone.clone().no_grad(), model.head.clone().no_grad());
            let f = head.forward(rest.forward_from(stage, features.clone()));
            let s = (f * per_image).sum();
            let grads = s.backward();
            let grad = features
                .grad(&grads)
                .ok_or(ExplainError::NotAutodiff("Grad-CAM through autodiff"))?;
            let [_, c, _, _] = grad.dims();
            // The gradient lives on the inner device; the outputs stay on the model's device.
            let alpha = Tensor::from_inner(grad.mean_dim(3).mean_dim(2).reshape([n, c]));
            (features.detach(), alpha)
        }
    };
    let maps = cam(features.clone(), alpha.clone());
    Ok(SimilarityAttention {
        embeddings,
        weights: weights.reshape([dim]),
        scores,
        alpha,
        features,
        maps,
        stage,
    })
}
