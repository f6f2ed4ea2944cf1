//! The ways a loss is evaluated, shared by the losses of each kind: on the graph from the
//! batch's `[N, N]` matrix ([`on_pairs`]), on the host from that matrix with the analytic
//! gradient ([`on_host`]), or on the graph from the embeddings and learnable state
//! ([`on_embeddings`]). Each checks at compile time that the loss calling it declares that
//! kind ([`RegisteredLoss::PAIR_BASED`], [`RegisteredLoss::HOST_EVALUATED`]).
//!
//! Also the input checks that every loss shares.

use burn::module::Param;
use burn::tensor::{DType, Tensor};
use dml_backend::host::{first_non_finite, with_f32s};
use dml_backend::{float_tensor, is_cpu_device, read_f64s};

use super::{LossOutput, RegisteredLoss};
use crate::attach::{attach_gradient, attach_gradients};
use crate::distance::Distance;
use crate::error::LossError;
use crate::gemm::GramOperand;
use crate::host::HostMatrix;
use crate::host_grad::{GramMap, HostLoss, Norm, normalize_product, normalize_product_backward};
use crate::miners::{MineInput, Miner};
use crate::ops::{float1, zero_like};
use crate::reducer::{Reducer, SubLoss};
use crate::tuples::Tuples;

/// What a loss evaluates with besides its configuration: the resolved distance and reducer,
/// the number of classes it was built for and its learnable tensors.
pub struct Context<'a> {
    pub(super) distance: &'a Distance,
    pub(super) reducer: &'a Reducer,
    pub(super) num_classes: usize,
    pub(super) proxies: Option<&'a Param<Tensor<2>>>,
    pub(super) weight: Option<&'a Param<Tensor<2>>>,
    pub(super) beta: Option<&'a Param<Tensor<1>>>,
}

impl Context<'_> {
    /// The distance (the configured one, else the loss's default).
    pub fn distance(&self) -> &Distance {
        self.distance
    }

    /// The reducer (the configured one, else the loss's default).
    pub fn reducer(&self) -> &Reducer {
        self.reducer
    }

    /// The number of classes the loss was built for.
    pub fn num_classes(&self) -> usize {
        self.num_classes
    }

    // Learnable state follows the embeddings' float type (as PML's `cast_types`), so that
    // f64 embeddings work with f32-initialised proxies; the cast is a no-op otherwise.

    /// The proxies `[C, D]` in `dtype`.
    pub fn proxies(&self, dtype: DType) -> Result<Tensor<2>, LossError> {
        self.proxies
            .map(|p| p.val().cast(dtype))
            .ok_or_else(|| LossError::Config("loss has no proxies".into()))
    }

    /// The class weights (or SoftTriple's centres) in `dtype`.
    pub fn weight(&self, dtype: DType) -> Result<Tensor<2>, LossError> {
        self.weight
            .map(|p| p.val().cast(dtype))
            .ok_or_else(|| LossError::Config("loss has no class weights".into()))
    }

    /// The learnable β, when there is one.
    pub fn beta(&self) -> Option<Tensor<1>> {
        self.beta.map(Param::val)
    }
}

/// One batch: its values, labels, optional miner and seed.
pub struct Batch<'a> {
    /// The embeddings, or a precomputed matrix for a pair-based loss.
    pub data: BatchData,
    /// The labels, one per row.
    pub labels: &'a [u32],
    /// The miner that selects tuples, if any.
    pub miner: Option<&'a Miner>,
    /// The seed of stochastic miners and random triplet sampling.
    pub seed: u64,
}

/// What a loss computes from.
pub enum BatchData {
    /// Raw embeddings `[N, D]`.
    Embeddings(Tensor<2>),
    /// The `[N, N]` matrix of the batch against itself, bypassing the loss's distance.
    Matrix {
        /// The matrix.
        matrix: Tensor<2>,
        /// Whether larger means more similar.
        is_similarity: bool,
    },
}

impl BatchData {
    /// The float type of the values (learnable state is cast to it).
    pub fn dtype(&self) -> DType {
        match self {
            BatchData::Embeddings(x) | BatchData::Matrix { matrix: x, .. } => x.dtype(),
        }
    }
}

/// Per-loss work on the graph: sub-losses ready for the reducer plus the tuple count.
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

/// What a pair-based loss computes from on the graph.
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

/// A pair-based loss on the graph: the matrix (the loss's distance of the embeddings, or the
/// given one), the tuples mined on it, `compute`'s sub-losses, then the reducer.
pub(crate) fn on_pairs<C: RegisteredLoss>(
    config: &C,
    ctx: &Context<'_>,
    batch: Batch<'_>,
    compute: impl FnOnce(&C, &PairInput<'_>) -> Result<Computed, LossError>,
) -> Result<LossOutput, LossError> {
    const {
        assert!(
            C::PAIR_BASED && !C::HOST_EVALUATED,
            "on_pairs is the graph path of pair-based losses"
        )
    };
    let Batch {
        data,
        labels,
        miner,
        seed,
    } = batch;
    let (mat, sim, zero, tuples) = match data {
        BatchData::Embeddings(embeddings) => {
            let zero = zero_like(&embeddings);
            let mat = ctx.distance.self_matrix(embeddings.clone());
            let sim = ctx.distance.is_similarity();
            let tuples = mine_for(ctx.distance, miner, &mat, sim, &embeddings, labels, seed);
            (mat, sim, zero, tuples)
        }
        BatchData::Matrix { matrix, is_similarity } => {
            let zero = zero_like(&matrix);
            let n = labels.len();
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
                mine_given_matrix(mi, &hm, labels, seed)
            });
            (matrix, is_similarity, zero, tuples)
        }
    };
    let input = PairInput {
        mat,
        sim,
        power: ctx.distance.power(),
        labels,
        tuples: tuples.as_ref(),
        seed,
    };
    finish(ctx.reducer, compute(config, &input)?, &zero)
}

/// A pair-based loss evaluated on the host (see `host_grad`): `evaluate` returns the loss, its
/// gradient with respect to the matrix and, for a learnable β, `∂L/∂β` (else empty).
///
/// From embeddings with a Gram-based distance the graph stops at the embeddings themselves:
/// `S = x̂ x̂ᵀ`, the distance, the mining, the loss and `∂L/∂X` are host work.
pub(crate) fn on_host<C: RegisteredLoss>(
    config: &C,
    ctx: &Context<'_>,
    batch: Batch<'_>,
    evaluate: impl FnOnce(&C, &HostInput<'_>) -> (HostLoss, Vec<f64>),
) -> Result<LossOutput, LossError> {
    const {
        assert!(
            C::PAIR_BASED && C::HOST_EVALUATED,
            "on_host is the host path of pair-based losses"
        )
    };
    let Batch {
        data,
        labels,
        miner,
        seed,
    } = batch;
    let embeddings = match data {
        BatchData::Embeddings(embeddings) => embeddings,
        BatchData::Matrix { matrix, is_similarity } => {
            let n = labels.len();
            let hm = HostMatrix::from_tensor(matrix.clone(), is_similarity);
            check_host_values(&hm.values, n, "matrix")?;
            let tuples = miner.map(|mi| mine_given_matrix(mi, &hm, labels, seed));
            let (hl, beta_grad) = evaluate(config, &host_input(ctx, &hm, labels, tuples.as_ref(), seed));
            let grad = float_tensor(hl.grad.clone(), [n, n], &matrix.device(), matrix.dtype());
            return Ok(attach_all(ctx, matrix, grad, &hl, beta_grad));
        }
    };
    let [n, dim] = embeddings.dims();
    let distance = ctx.distance;
    let sim = distance.is_similarity();
    let dtype = embeddings.dtype();
    // Gram-based distances: S = R / (n_i n_j) from the raw product R = X Xᵀ and its
    // diagonal; neither the normalisation, the distance nor either matrix product enters
    // the graph, which is re-entered at the embeddings themselves.
    let gram = match GramMap::for_distance(distance) {
        None => None,
        Some(map) => {
            let operand = GramOperand::new(&embeddings);
            let raw = operand.gram();
            // The diagonal holds the squared norms: a non-finite one names the row at fault.
            let squares: Vec<f64> = (0..n).map(|i| raw[i * n + i]).collect();
            check_host_values(&squares, 1, "embeddings (squared norm)")?;
            let norms: Vec<Norm> = squares.iter().map(|&q| Norm::new(q, distance.normalizes())).collect();
            let s_host = normalize_product(&raw, &norms, &norms);
            Some((map, operand, norms, s_host))
        }
    };
    let (values, graph) = match &gram {
        Some((map, _, _, s_host)) => (map.matrix(s_host, n), None),
        None => {
            let mat = distance.self_matrix(embeddings.clone());
            let values = read_f64s(mat.clone());
            check_host_values(&values, n, "distance matrix")?;
            (values, Some(mat))
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
    let (hl, beta_grad) = evaluate(config, &host_input(ctx, &hm, labels, tuples.as_ref(), seed));
    match (graph, gram) {
        (Some(mat), _) => {
            let grad = float_tensor(hl.grad.clone(), [n, n], &mat.device(), dtype);
            Ok(attach_all(ctx, mat, grad, &hl, beta_grad))
        }
        (None, Some((map, operand, norms, s_host))) => {
            // ∂L/∂X = (∂R + ∂Rᵀ + diag(u + v)) X: one matrix product.
            let g = map.chain(&s_host, &hl.grad, n);
            let (dr, u, v) = normalize_product_backward(&g, &s_host, &norms, &norms);
            let mut a: Vec<f64> = (0..n * n).map(|k| dr[k] + dr[(k % n) * n + k / n]).collect();
            for i in 0..n {
                a[i * n + i] += u[i] + v[i];
            }
            Ok(attach_all(ctx, embeddings, operand.left_multiply(a), &hl, beta_grad))
        }
        (None, None) => unreachable!("either the Gram path or the graph matrix"),
    }
}

/// An embedding-based loss (proxies, classifiers, angular) on the graph: the tuples mined on
/// the embeddings, `compute`'s sub-losses, then the reducer.
pub(crate) fn on_embeddings<C: RegisteredLoss>(
    config: &C,
    ctx: &Context<'_>,
    batch: Batch<'_>,
    compute: impl FnOnce(&C, &EmbInput<'_>) -> Result<Computed, LossError>,
) -> Result<LossOutput, LossError> {
    const {
        assert!(
            !C::PAIR_BASED && !C::HOST_EVALUATED,
            "on_embeddings is the graph path of embedding-based losses"
        )
    };
    let embeddings = embeddings_of::<C>(batch.data)?;
    let zero = zero_like(&embeddings);
    let tuples = match batch.miner {
        None => None,
        Some(m) => Some(m.mine(embeddings.clone(), batch.labels, batch.seed)?),
    };
    let input = EmbInput {
        emb: embeddings,
        labels: batch.labels,
        tuples: tuples.as_ref(),
        distance: ctx.distance,
    };
    finish(ctx.reducer, compute(config, &input)?, &zero)
}

/// The embeddings of a batch, for a loss that is not pair-based.
pub(crate) fn embeddings_of<C: RegisteredLoss>(data: BatchData) -> Result<Tensor<2>, LossError> {
    match data {
        BatchData::Embeddings(embeddings) => Ok(embeddings),
        BatchData::Matrix { .. } => Err(matrix_unsupported(C::NAME)),
    }
}

/// The error for a matrix given to a loss that is not pair-based.
pub(crate) fn matrix_unsupported(name: &str) -> LossError {
    LossError::Unsupported(format!(
        "the {name} loss needs embeddings or learnable state, not just a matrix"
    ))
}

fn host_input<'a>(
    ctx: &Context<'a>,
    mat: &'a HostMatrix,
    labels: &'a [u32],
    tuples: Option<&'a Tuples>,
    seed: u64,
) -> HostInput<'a> {
    HostInput {
        mat,
        labels,
        tuples,
        seed,
        reducer: ctx.reducer,
    }
}

/// Mines on the loss's own matrix when the miner ranks with the same distance, else on
/// a detached matrix of the miner's distance.
fn mine_for(
    distance: &Distance,
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
    } else if m.distance() == *distance {
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

/// Mines on a matrix given instead of embeddings. Without embeddings their dimension is
/// unknown: the distance-weighted miner uses its configured `dim`, else N.
fn mine_given_matrix(miner: &Miner, matrix: &HostMatrix, labels: &[u32], seed: u64) -> Tuples {
    miner.mine_matrix(&MineInput {
        matrix,
        labels,
        dim: matrix.n.max(2),
        seed,
    })
}

/// The loss value attached to `graph` with its gradient `grad` (same shape), and to β
/// with `beta_grad` when β is learnable.
fn attach_all(ctx: &Context<'_>, graph: Tensor<2>, grad: Tensor<2>, hl: &HostLoss, beta_grad: Vec<f64>) -> LossOutput {
    let (device, dtype) = (graph.device(), graph.dtype());
    let value = float1(vec![hl.value], &device, dtype);
    let loss = match ctx.beta() {
        Some(b) if !beta_grad.is_empty() => {
            let grad_beta = float1(beta_grad, &device, dtype);
            attach_gradients(value, (graph, grad), (b.cast(dtype), grad_beta))
        }
        _ => attach_gradient(value, graph, grad),
    };
    LossOutput {
        loss,
        tuples: hl.tuples,
    }
}

/// Reduces the sub-losses of a graph-evaluated loss.
pub(crate) fn finish(reducer: &Reducer, computed: Computed, zero: &Tensor<1>) -> Result<LossOutput, LossError> {
    let loss = reducer.reduce_all(computed.subs, zero);
    Ok(LossOutput {
        loss,
        tuples: computed.tuples,
    })
}

pub(super) fn check_inputs(n: usize, labels: &[u32]) -> Result<(), LossError> {
    if n == 0 {
        return Err(LossError::Shape("empty batch (0 embeddings)".into()));
    }
    if labels.len() != n {
        return Err(LossError::Shape(format!("{n} embeddings but {} labels", labels.len())));
    }
    Ok(())
}

/// Rejects NaN and infinite inputs on CPU devices, naming the first offending row.
///
/// Only where it is free: on a CPU device reading the tensor is a copy at most (an `f32` flex
/// tensor is scanned in place), while on a GPU it would be a device synchronisation at every
/// step. There the host-evaluated losses check the values they read back anyway (see
/// [`check_host_values`]), and the training loop sees a diverged loss in the value it reads.
pub(crate) fn check_finite(x: &Tensor<2>, what: &str) -> Result<(), LossError> {
    if !is_cpu_device(&x.device()) {
        return Ok(());
    }
    let [_, d] = x.dims();
    if x.dtype() == DType::F32 {
        with_f32s(&x.clone().into_dispatch(), |values| {
            non_finite_error(first_non_finite(values).map(|i| (i, f64::from(values[i]))), d, what)
        })
    } else {
        check_host_values(&read_f64s(x.clone()), d, what)
    }
}

/// Rejects non-finite values that a loss has read to the host anyway (row-major, `cols` per
/// row), on every device: the check costs no transfer.
pub(crate) fn check_host_values(values: &[f64], cols: usize, what: &str) -> Result<(), LossError> {
    non_finite_error(first_non_finite(values).map(|i| (i, values[i])), cols, what)
}

/// The error naming the row (`cols` values per row) of the first non-finite value, if any.
fn non_finite_error(first: Option<(usize, f64)>, cols: usize, what: &str) -> Result<(), LossError> {
    match first {
        Some((i, value)) => Err(LossError::NonFinite {
            what: what.to_string(),
            row: i / cols.max(1),
            value,
        }),
        None => Ok(()),
    }
}

/// The error of a loss that is not defined for `distance` unless `ok`; `what` names the
/// distance it needs.
pub(crate) fn require_distance(loss: &str, ok: bool, what: &str, distance: &Distance) -> Result<(), LossError> {
    if ok {
        Ok(())
    } else {
        Err(LossError::Config(format!("{loss} loss needs {what}, got {distance:?}")))
    }
}
