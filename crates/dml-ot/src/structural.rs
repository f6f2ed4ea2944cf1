//! DIML's structural similarity and distance (Eq. 5–6) between sets of local features, for a batch of
//! pairs and for every pair of two sets (the training helper of Sec. 3.4 and Appendix A.3).

use burn::module::Module;
use burn::tensor::activation::relu;
use burn::tensor::{Int, Tensor, TensorData};

use crate::error::OtError;
use crate::marginals::{Marginals, cross_correlation_marginals, l2_normalize, normalize_weights, uniform_marginals};
use crate::sinkhorn::{Sinkhorn, SinkhornConfig};
use crate::types::{Convergence, PlanGradient};

dml_config::config! {
    /// Configuration of [`Structural`]: the transport solver and the marginals of DIML Eq. 4–9. The
    /// defaults follow DIML's evaluation (its solver settings and cross-correlation marginals).
    #[derive(Clone, Debug, PartialEq)]
    pub struct StructuralConfig {
        /// The Sinkhorn solver; its `gradient` decides whether the plan is differentiated.
        pub sinkhorn: SinkhornConfig = SinkhornConfig::default(),
        /// The marginals of each pair.
        pub marginals: Marginals = Marginals::CrossCorrelation,
    }
}

impl StructuralConfig {
    /// DIML's training setting (Appendix A.3 and its code): the default (DIML) solver settings and
    /// marginals, with a plan that is a constant for autodiff ([`PlanGradient::Detached`]), so that
    /// gradients reach the features through the similarities the plan weighs.
    pub fn diml_training() -> Self {
        Self {
            sinkhorn: SinkhornConfig {
                gradient: PlanGradient::Detached,
                ..SinkhornConfig::default()
            },
            ..Self::default()
        }
    }

    /// Validates the settings and builds the module.
    ///
    /// # Errors
    /// Those of [`SinkhornConfig::init`].
    pub fn init(&self) -> Result<Structural, OtError> {
        Ok(Structural {
            sinkhorn: self.sinkhorn.init()?,
            marginals: self.marginals.clone(),
        })
    }
}

/// Structural matching of local features; built by [`StructuralConfig::init`].
#[derive(Module, Debug)]
pub struct Structural {
    /// The transport solver.
    pub(crate) sinkhorn: Sinkhorn,
    /// The marginals of each pair.
    #[module(skip)]
    pub(crate) marginals: Marginals,
}

/// Everything [`Structural::forward`] computes for a batch of pairs.
#[derive(Debug, Clone)]
pub struct StructuralOutput {
    /// `s_struct = Σ_ij T*_ij S_ij` `[B]` (DIML Eq. 5).
    pub similarity: Tensor<1>,
    /// `d_struct = Σ_ij T*_ij (1 - S_ij)` `[B]` (DIML Eq. 6 with the transport cost as distance; equals
    /// `mass - s_struct`).
    pub distance: Tensor<1>,
    /// Transport plans `T*` `[B, n, m]`.
    pub plan: Tensor<3>,
    /// Cosine similarities `S_ij = cos(z^s_i, z^t_j)` `[B, n, m]`; the cost is `1 - S`.
    pub similarity_matrix: Tensor<3>,
    /// Source marginals `μ^s` `[B, n]`.
    pub mu_source: Tensor<2>,
    /// Target marginals `μ^t` `[B, m]`.
    pub mu_target: Tensor<2>,
    /// Cosine of the mean (global) features `[B]`: the first scale of multi-scale matching.
    pub global_cosine: Tensor<1>,
    /// Per-pair convergence of the solver.
    pub convergence: Vec<Convergence>,
}

/// Structural and global similarities of every pair of two sets (rows × columns).
#[derive(Debug, Clone)]
pub struct PairwiseStructural {
    /// `s_struct` of every pair `[N, M]` (DIML Eq. 5, cosine similarity of locations).
    pub similarity: Tensor<2>,
    /// `d_struct` of every pair `[N, M]` (DIML Eq. 6) with the Euclidean distance of L2-normalised
    /// locations, `√(‖ẑ_i - ẑ_j‖² + 1e-6)`, as DIML's margin loss (Eq. 16) computes it.
    pub distance: Tensor<2>,
    /// Cosine similarity of the mean features `[N, M]`, the `s(z̄^k, z̄^l)` of DIML Eq. 19.
    pub global_similarity: Tensor<2>,
    /// Euclidean distance of the L2-normalised mean features `[N, M]`, the `d(z̄^k, z̄^l)` of Eq. 16.
    pub global_distance: Tensor<2>,
    /// Convergence of the solver, one entry per solved pair (row-major over the pairs solved; for
    /// [`Structural::similarity_matrix`] only the pairs `i <= j` are solved).
    pub convergence: Vec<Convergence>,
}

impl PairwiseStructural {
    /// `½ (s_global + s_struct)`, DIML's replacement of the similarity in similarity-based losses
    /// (Eq. 19).
    pub fn combined_similarity(&self) -> Tensor<2> {
        (self.similarity.clone() + self.global_similarity.clone()).mul_scalar(0.5)
    }

    /// `½ (d_global + d_struct)`, DIML's replacement of the distance in distance-based losses
    /// (Eq. 16 and Eq. 21).
    pub fn combined_distance(&self) -> Tensor<2> {
        (self.distance.clone() + self.global_distance.clone()).mul_scalar(0.5)
    }
}

impl Structural {
    /// The solver.
    pub fn sinkhorn(&self) -> &Sinkhorn {
        &self.sinkhorn
    }

    /// The marginals.
    pub fn marginals(&self) -> &Marginals {
        &self.marginals
    }

    /// Structural similarity of a batch of pairs.
    ///
    /// * `source`: `[B, n, D]`, `target`: `[B, m, D]` local features (one row per location, e.g. from
    ///   [`crate::to_locations`]), already projected to the embedding space (DIML Eq. 2).
    ///
    /// Computes `S = cos(z^s_i, z^t_j)`, the cost `1 - S`, the marginals, the plan `T*` (DIML Eq. 4 with
    /// the entropic regulariser of Eq. 12) and `s_struct = Σ T* ⊙ S` (Eq. 5).
    ///
    /// # Panics
    /// When `B` or `D` differ between the inputs.
    pub fn forward(&self, source: Tensor<3>, target: Tensor<3>) -> StructuralOutput {
        let [batch, n, dim] = source.dims();
        let [batch_t, m, dim_t] = target.dims();
        assert!(
            batch == batch_t && dim == dim_t,
            "structural: source is [B, n, D] = {:?} but target is {:?}",
            source.dims(),
            target.dims()
        );
        let source_global = source.clone().mean_dim(1).squeeze_dim::<2>(1);
        let target_global = target.clone().mean_dim(1).squeeze_dim::<2>(1);
        let (mu_source, mu_target) = match self.marginals {
            Marginals::Uniform => (uniform_marginals(&source), uniform_marginals(&target)),
            Marginals::CrossCorrelation => (
                cross_correlation_marginals(source.clone(), target_global.clone()),
                cross_correlation_marginals(target.clone(), source_global.clone()),
            ),
        };
        let similarity_matrix = l2_normalize(source).matmul(l2_normalize(target).swap_dims(1, 2));
        let global_cosine = (l2_normalize(source_global) * l2_normalize(target_global))
            .sum_dim(1)
            .squeeze_dim(1);
        let cost = similarity_matrix.clone().neg().add_scalar(1.0);
        let solved = self
            .sinkhorn
            .forward(cost.clone(), mu_source.clone(), mu_target.clone());
        debug_assert_eq!(solved.plan.dims(), [batch, n, m]);
        let similarity = (solved.plan.clone() * similarity_matrix.clone()).sum_dims_squeeze::<1, _>(&[1, 2]);
        let distance = (solved.plan.clone() * cost).sum_dims_squeeze::<1, _>(&[1, 2]);
        StructuralOutput {
            similarity,
            distance,
            plan: solved.plan,
            similarity_matrix,
            mu_source,
            mu_target,
            global_cosine,
            convergence: solved.convergence,
        }
    }

    /// Structural and global similarities of every row of `rows` `[N, n, D]` with every row of `cols`
    /// `[M, m, D]`, as `[N, M]` matrices, all `N·M` pairs solved in one batch. This is DIML's
    /// ProxyNCA with spatial proxies (Eq. 21) when `cols` holds the proxies `ρ^c`.
    ///
    /// # Panics
    /// When `D` differs between the inputs.
    pub fn cross_similarity(&self, rows: Tensor<3>, cols: Tensor<3>) -> PairwiseStructural {
        let pairs = PairTensors::all(rows, cols);
        self.solve_pairs(pairs, None)
    }

    /// Structural and global similarities of every pair of a batch `[N, L, D]` of local features (e.g.
    /// a training batch's `G × G` maps through [`crate::to_locations`]), as symmetric `[N, N]`
    /// matrices (diagonal included, as DIML's losses compute it).
    ///
    /// This is the training helper of DIML Sec. 3.4 / Appendix A.3: a training loop averages
    /// [`PairwiseStructural::similarity`] with its global similarity matrix (Eq. 19) or uses
    /// [`PairwiseStructural::combined_similarity`]/[`PairwiseStructural::combined_distance`]. Build
    /// the module from [`StructuralConfig::diml_training`] to detach the plan as DIML's code does;
    /// with [`PlanGradient::Unrolled`] the tape holds every iteration of `N(N+1)/2` plans, with
    /// [`PlanGradient::Implicit`] only a few tensors per pair.
    ///
    /// The structural similarity is symmetric (the plan of `(j, i)` is the transpose of that of
    /// `(i, j)`, with the marginals swapped), so only the `N(N+1)/2` pairs `i <= j` are solved and
    /// mirrored, which halves the work.
    pub fn similarity_matrix(&self, features: Tensor<3>) -> PairwiseStructural {
        let [n, _, _] = features.dims();
        let device = features.device();
        let mut upper = Vec::with_capacity(n * (n + 1) / 2);
        let mut mirror = vec![0i64; n * n];
        for i in 0..n {
            for j in i..n {
                let k = upper.len() as i64;
                mirror[i * n + j] = k;
                mirror[j * n + i] = k;
                upper.push((i * n + j) as i64);
            }
        }
        let upper = Tensor::<1, Int>::from_data(TensorData::new(upper, [n * (n + 1) / 2]), &device);
        let mirror = Tensor::<1, Int>::from_data(TensorData::new(mirror, [n * n]), &device);
        let pairs = PairTensors::all(features.clone(), features).select(upper);
        self.solve_pairs(pairs, Some(mirror))
    }

    /// Solves the pairs and assembles the `[N, M]` matrices; `mirror` maps every cell of the matrix to
    /// its solved pair when only a subset was solved.
    fn solve_pairs(&self, pairs: PairTensors, mirror: Option<Tensor<1, Int>>) -> PairwiseStructural {
        let [rows, cols] = pairs.grid;
        let (mu_rows, mu_cols) = match self.marginals {
            Marginals::Uniform => (uniform_marginals(&pairs.similarity), {
                let t = pairs.similarity.clone().swap_dims(1, 2);
                uniform_marginals(&t)
            }),
            Marginals::CrossCorrelation => {
                let [_, n, m] = pairs.similarity.dims();
                (
                    normalize_weights(relu(pairs.corr_rows), n),
                    normalize_weights(relu(pairs.corr_cols), m),
                )
            }
        };
        let cost = pairs.similarity.clone().neg().add_scalar(1.0);
        let solved = self.sinkhorn.forward(cost, mu_rows, mu_cols);
        let similarity = (solved.plan.clone() * pairs.similarity.clone()).sum_dims_squeeze::<1, _>(&[1, 2]);
        let local_distance = unit_euclidean_distance(pairs.similarity.clone());
        let distance = (solved.plan * local_distance).sum_dims_squeeze::<1, _>(&[1, 2]);
        let (similarity, distance) = match mirror {
            Some(index) => (similarity.select(0, index.clone()), distance.select(0, index)),
            None => (similarity, distance),
        };
        let global_distance = unit_euclidean_distance(pairs.global.clone());
        PairwiseStructural {
            similarity: similarity.reshape([rows, cols]),
            distance: distance.reshape([rows, cols]),
            global_similarity: pairs.global,
            global_distance,
            convergence: solved.convergence,
        }
    }
}

/// Euclidean distance of unit vectors from their cosine, `√(2 - 2 cos + 1e-6)` (for unit vectors
/// `‖x - y‖² = 2 - 2 cos`; the 1e-6 keeps the root differentiable at 0). This is the `d` of DIML's
/// Eq. 16 and, weighted by the plan, of `d_struct`; any shape.
pub fn unit_euclidean_distance<const D: usize>(cosine: Tensor<D>) -> Tensor<D> {
    cosine
        .neg()
        .add_scalar(1.0)
        .mul_scalar(2.0)
        .clamp_min(0.0)
        .add_scalar(1e-6)
        .sqrt()
}

/// The per-pair inputs of a set of pairs, flattened over the pairs.
struct PairTensors {
    /// Rows and columns of the full pair grid.
    grid: [usize; 2],
    /// `[P, n, m]` cosines of the locations.
    similarity: Tensor<3>,
    /// `[P, n]` cosines of the row item's locations with the column item's mean feature.
    corr_rows: Tensor<2>,
    /// `[P, m]` cosines of the column item's locations with the row item's mean feature.
    corr_cols: Tensor<2>,
    /// `[N, M]` cosines of the mean features (always the full grid).
    global: Tensor<2>,
}

impl PairTensors {
    /// Every pair of `rows` `[N, n, D]` × `cols` `[M, m, D]`, through three matrix products: the Gram
    /// matrix of all locations, and the locations of each side against the other side's means.
    fn all(rows: Tensor<3>, cols: Tensor<3>) -> Self {
        let [nr, n, dim] = rows.dims();
        let [nc, m, dim_c] = cols.dims();
        assert_eq!(
            dim,
            dim_c,
            "structural: rows are [N, n, D] = {:?} but cols are {:?}",
            rows.dims(),
            cols.dims()
        );
        let mean_rows = l2_normalize(rows.clone().mean_dim(1).squeeze_dim::<2>(1));
        let mean_cols = l2_normalize(cols.clone().mean_dim(1).squeeze_dim::<2>(1));
        let loc_rows: Tensor<2> = l2_normalize(rows).reshape([nr * n, dim]);
        let loc_cols: Tensor<2> = l2_normalize(cols).reshape([nc * m, dim]);
        let similarity = loc_rows
            .clone()
            .matmul(loc_cols.clone().transpose())
            .reshape([nr, n, nc, m])
            .swap_dims(1, 2)
            .reshape([nr * nc, n, m]);
        let corr_rows = loc_rows
            .matmul(mean_cols.clone().transpose())
            .reshape([nr, n, nc])
            .swap_dims(1, 2)
            .reshape([nr * nc, n]);
        let corr_cols = loc_cols
            .matmul(mean_rows.clone().transpose())
            .reshape([nc, m, nr])
            .permute([2, 0, 1])
            .reshape([nr * nc, m]);
        let global = mean_rows.matmul(mean_cols.transpose());
        Self {
            grid: [nr, nc],
            similarity,
            corr_rows,
            corr_cols,
            global,
        }
    }

    /// Keeps the pairs at `index` (flat `row * M + col` indices).
    fn select(self, index: Tensor<1, Int>) -> Self {
        Self {
            grid: self.grid,
            similarity: self.similarity.select(0, index.clone()),
            corr_rows: self.corr_rows.select(0, index.clone()),
            corr_cols: self.corr_cols.select(0, index),
            global: self.global,
        }
    }
}
