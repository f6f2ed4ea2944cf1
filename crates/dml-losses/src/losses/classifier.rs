//! What the classifier losses on normalised class weights `W` `[D, C]` share (normalised
//! softmax, CosFace, ArcFace): the weights' initialisation, the target cosines and PML's miner
//! weighting of per-sample losses.

use burn::tensor::{Bool, Device, Tensor};

use super::kinds::EmbInput;
use super::state::{LossState, normal, require_classes};
use crate::distance::Distance;
use crate::error::LossError;
use crate::ops::{bool2, float1};
use crate::tuples::miner_weights;

/// Class weights `W` `[D, C]` drawn from Normal(0, 1).
pub(crate) fn init_weights(
    loss: &str,
    num_classes: usize,
    dim: usize,
    device: &Device,
) -> Result<LossState, LossError> {
    require_classes(loss, "class weights", num_classes, dim)?;
    Ok(LossState {
        weight: Some(normal([dim, num_classes], 1.0, device)),
        ..LossState::default()
    })
}

/// Multiplies per-sample losses by PML's miner weights when tuples were mined.
pub(crate) fn weighted(losses: Tensor<1>, input: &EmbInput<'_>) -> Tensor<1> {
    if input.tuples.is_none() {
        return losses;
    }
    let n = input.labels.len();
    let device = losses.device();
    let dtype = losses.dtype();
    losses * float1(miner_weights(input.tuples, n, false), &device, dtype)
}

/// The labels as class indices.
pub(crate) fn targets(labels: &[u32]) -> Vec<usize> {
    labels.iter().map(|&l| l as usize).collect()
}

/// The cosines `[N, C]` of the embeddings to the class weights and the target mask.
pub(crate) fn cosines(input: &EmbInput<'_>, w: Tensor<2>) -> (Tensor<2>, Tensor<2, Bool>) {
    let cos = Distance::cosine().matrix(input.emb.clone(), w.transpose());
    let [n, c] = cos.dims();
    let mask: Vec<bool> = (0..n * c).map(|i| input.labels[i / c] as usize == i % c).collect();
    let device = cos.device();
    (cos, bool2(mask, [n, c], &device))
}
