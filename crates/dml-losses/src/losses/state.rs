//! Learnable state: the three slots a [`super::LossModule`] records it in, and its seeded
//! initialisation.

use burn::module::Param;
use burn::tensor::{Device, Tensor, TensorData};
use rand::{Rng, SeedableRng};

use crate::error::LossError;

/// The slots of a [`super::LossModule`] that hold learnable tensors; their names are the
/// field names of the module's record, so checkpoints load whatever the loss.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    /// `proxies` `[C, D]`: one learnable point per class (Proxy-Anchor, ProxyNCA).
    Proxies,
    /// `weight`: class weights `W` `[D, C]` (classifier losses) or SoftTriple's centres `fc`
    /// `[D, C·K]`.
    Weight,
    /// `beta` `[1]` or `[C]`: the margin loss's learnable boundary.
    Beta,
}

/// The learnable tensors of a loss when it is built, one per slot that the loss uses.
#[derive(Debug, Default)]
pub struct LossState {
    /// The [`Slot::Proxies`] tensor.
    pub proxies: Option<Param<Tensor<2>>>,
    /// The [`Slot::Weight`] tensor.
    pub weight: Option<Param<Tensor<2>>>,
    /// The [`Slot::Beta`] tensor.
    pub beta: Option<Param<Tensor<1>>>,
}

/// The seed of learnable-state initialisation: fixed, so that two runs with the same
/// configuration start from the same proxies (the training seed drives everything else).
const INIT_SEED: u64 = 0x5eed_1055;

/// The generator every initialisation starts from: each loss draws one tensor, so each one
/// draws the same values as the catalogue did when it shared one generator per build.
fn init_rng() -> rand_chacha::ChaCha8Rng {
    rand_chacha::ChaCha8Rng::seed_from_u64(INIT_SEED)
}

/// A learnable `[rows, cols]` tensor of `values`.
fn param2(values: Vec<f32>, shape: [usize; 2], device: &Device) -> Param<Tensor<2>> {
    Param::from_tensor(Tensor::from_data(TensorData::new(values, shape), device))
}

/// Normal(0, std) samples by Box-Muller (rand_distr is not a dependency), in `shape`.
pub(crate) fn normal(shape: [usize; 2], std: f64, device: &Device) -> Param<Tensor<2>> {
    let mut rng = init_rng();
    let values = (0..shape[0] * shape[1])
        .map(|_| {
            let u1: f64 = rng.random::<f64>().max(f64::MIN_POSITIVE);
            let u2: f64 = rng.random();
            ((-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos() * std) as f32
        })
        .collect();
    param2(values, shape, device)
}

/// Uniform(-bound, bound) samples in `shape`.
pub(crate) fn uniform(shape: [usize; 2], bound: f64, device: &Device) -> Param<Tensor<2>> {
    let mut rng = init_rng();
    let values = (0..shape[0] * shape[1])
        .map(|_| ((rng.random::<f64>() * 2.0 - 1.0) * bound) as f32)
        .collect();
    param2(values, shape, device)
}

/// Checks that per-class state (`what`) can be sized: `num_classes` and `dim` must be positive.
pub(crate) fn require_classes(loss: &str, what: &str, num_classes: usize, dim: usize) -> Result<(), LossError> {
    if num_classes == 0 || dim == 0 {
        return Err(LossError::Config(format!(
            "{loss} loss has {what}: it needs num_classes > 0 and dim > 0, got {num_classes} and {dim}"
        )));
    }
    Ok(())
}
