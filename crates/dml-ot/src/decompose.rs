//! The decomposition of one pair's structural similarity into location-pair contributions, the
//! quantities of DIML's Figure 5, as a plain serialisable struct for explanation reports.

use serde::{Deserialize, Serialize};

use crate::error::OtError;
use crate::host::{Workspace, check_marginals};
use crate::marginals::Marginals;
use crate::structural::Structural;
use crate::types::Convergence;

/// One location pair `(i, j)` of a decomposition.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FlowPair {
    /// Source location `i` (row-major in the source grid).
    pub source: usize,
    /// Target location `j` (row-major in the target grid).
    pub target: usize,
    /// `[row, column]` of `i` in the source grid.
    pub source_cell: [usize; 2],
    /// `[row, column]` of `j` in the target grid.
    pub target_cell: [usize; 2],
    /// The transported mass `T*_ij`.
    pub plan: f64,
    /// The re-scaled flow `T̂*_ij = n·m·T*_ij` (`G⁴ T*_ij` for two `G × G` grids), 1 for a uniform plan.
    pub flow: f64,
    /// The location similarity `S_ij`.
    pub similarity: f64,
    /// The contribution `T*_ij S_ij` to the structural similarity (Eq. 5).
    pub contribution: f64,
}

/// The structural similarity of one pair taken apart (DIML Sec. 3.3 and Figure 5).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decomposition {
    /// `[rows, columns]` of the source grid (`n = rows · columns` locations).
    pub source_grid: [usize; 2],
    /// `[rows, columns]` of the target grid (`m` locations).
    pub target_grid: [usize; 2],
    /// `T*` `[n, m]`, row-major.
    pub plan: Vec<f64>,
    /// `S` `[n, m]`, row-major (cosine of the locations).
    pub similarity_matrix: Vec<f64>,
    /// `μ^s` `[n]`.
    pub mu_source: Vec<f64>,
    /// `μ^t` `[m]`.
    pub mu_target: Vec<f64>,
    /// `s_struct = Σ T* ⊙ S` (Eq. 5).
    pub structural_similarity: f64,
    /// `d_struct = Σ T* ⊙ (1 - S)` (Eq. 6 with the transport cost as distance).
    pub structural_distance: f64,
    /// Cosine of the mean features, the similarity before structural matching.
    pub global_cosine: f64,
    /// The pairs with the largest contributions `T*_ij S_ij`, largest first (Figure 5's red arrows).
    pub top: Vec<FlowPair>,
    /// The pairs with the smallest contributions, smallest first (Figure 5's blue arrows).
    pub bottom: Vec<FlowPair>,
    /// How the solver converged.
    pub convergence: Convergence,
}

impl Decomposition {
    /// Each source location's share of the structural similarity, `Σ_j T*_ij S_ij` `[n]` (the
    /// rows of Eq. 5's sum; they add up to [`Decomposition::structural_similarity`]).
    pub fn source_contributions(&self) -> Vec<f64> {
        let m = self.mu_target.len();
        self.plan
            .chunks(m)
            .zip(self.similarity_matrix.chunks(m))
            .map(|(t, s)| t.iter().zip(s).map(|(t, s)| t * s).sum())
            .collect()
    }

    /// The full record of location pair `(i, j)`.
    pub fn pair(&self, source: usize, target: usize) -> FlowPair {
        let m = self.mu_target.len();
        let n = self.mu_source.len();
        let plan = self.plan[source * m + target];
        let similarity = self.similarity_matrix[source * m + target];
        FlowPair {
            source,
            target,
            source_cell: [source / self.source_grid[1], source % self.source_grid[1]],
            target_cell: [target / self.target_grid[1], target % self.target_grid[1]],
            plan,
            flow: (n * m) as f64 * plan,
            similarity,
            contribution: plan * similarity,
        }
    }
}

impl Structural {
    /// Decomposes the structural similarity of one pair on the host (`f64`), with this module's solver
    /// settings and marginals.
    ///
    /// * `source`: `[n, D]` local features, `n = source_grid[0] · source_grid[1]`, location-major (row
    ///   `y·W + x`); `target`: `[m, D]` likewise.
    /// * `top_k`: how many pairs [`Decomposition::top`] and [`Decomposition::bottom`] list.
    ///
    /// # Errors
    /// [`OtError::Zero`] for an empty grid or `dim == 0`, [`OtError::Length`] when a slice does not
    /// match its grid, [`OtError::NotFinite`] for a non-finite feature.
    pub fn decompose(
        &self,
        source: &[f32],
        source_grid: [usize; 2],
        target: &[f32],
        target_grid: [usize; 2],
        dim: usize,
        top_k: usize,
    ) -> Result<Decomposition, OtError> {
        let n = source_grid[0] * source_grid[1];
        let m = target_grid[0] * target_grid[1];
        for (input, v) in [("source_grid", n), ("target_grid", m), ("dim", dim)] {
            if v == 0 {
                return Err(OtError::Zero { input });
            }
        }
        for (input, x, rows, grid) in [("source", source, n, source_grid), ("target", target, m, target_grid)] {
            if x.len() != rows * dim {
                return Err(OtError::Length {
                    input,
                    shape: format!("[{}·{}, {dim}]", grid[0], grid[1]),
                    expected: rows * dim,
                    got: x.len(),
                });
            }
            if let Some((index, &value)) = x.iter().enumerate().find(|(_, v)| !v.is_finite()) {
                return Err(OtError::NotFinite {
                    input,
                    index,
                    value: value as f64,
                });
            }
        }
        let source_unit = unit_rows(source, dim);
        let target_unit = unit_rows(target, dim);
        let source_mean = unit(&mean_row(source, dim));
        let target_mean = unit(&mean_row(target, dim));
        let mut similarity_matrix = vec![0.0; n * m];
        for i in 0..n {
            for j in 0..m {
                similarity_matrix[i * m + j] = dot(
                    &source_unit[i * dim..(i + 1) * dim],
                    &target_unit[j * dim..(j + 1) * dim],
                );
            }
        }
        let (mu_source, mu_target) = match self.marginals {
            Marginals::Uniform => (vec![1.0 / n as f64; n], vec![1.0 / m as f64; m]),
            Marginals::CrossCorrelation => (
                cross_correlation(&source_unit, &target_mean),
                cross_correlation(&target_unit, &source_mean),
            ),
        };
        check_marginals(0, &mu_source, &mu_target)?;
        let cost: Vec<f64> = similarity_matrix.iter().map(|s| 1.0 - s).collect();
        let mut plan = vec![0.0; n * m];
        let convergence =
            self.sinkhorn
                .host_params()
                .solve(&cost, &mu_source, &mu_target, &mut plan, &mut Workspace::default());
        let structural_similarity = plan.iter().zip(&similarity_matrix).map(|(t, s)| t * s).sum();
        let structural_distance = plan.iter().zip(&cost).map(|(t, c)| t * c).sum();
        let global_cosine = dot(&source_mean, &target_mean);
        let mut decomposition = Decomposition {
            source_grid,
            target_grid,
            plan,
            similarity_matrix,
            mu_source,
            mu_target,
            structural_similarity,
            structural_distance,
            global_cosine,
            top: Vec::new(),
            bottom: Vec::new(),
            convergence,
        };
        let mut order: Vec<(usize, usize)> = (0..n).flat_map(|i| (0..m).map(move |j| (i, j))).collect();
        let contribution =
            |&(i, j): &(usize, usize)| decomposition.plan[i * m + j] * decomposition.similarity_matrix[i * m + j];
        order.sort_by(|x, y| contribution(y).total_cmp(&contribution(x)).then(x.cmp(y)));
        let k = top_k.min(order.len());
        let top: Vec<FlowPair> = order[..k].iter().map(|&(i, j)| decomposition.pair(i, j)).collect();
        let bottom: Vec<FlowPair> = order
            .iter()
            .rev()
            .take(k)
            .map(|&(i, j)| decomposition.pair(i, j))
            .collect();
        decomposition.top = top;
        decomposition.bottom = bottom;
        Ok(decomposition)
    }
}

/// Rows of `x` (`[rows, dim]`) scaled to unit length in `f64` (an all-zero row stays zero).
pub(crate) fn unit_rows(x: &[f32], dim: usize) -> Vec<f64> {
    x.chunks_exact(dim)
        .flat_map(|row| unit(&row.iter().map(|&v| v as f64).collect::<Vec<_>>()))
        .collect()
}

/// The mean row of `x` (`[rows, dim]`).
pub(crate) fn mean_row(x: &[f32], dim: usize) -> Vec<f64> {
    let rows = x.len() / dim;
    let mut mean = vec![0.0; dim];
    for row in x.chunks_exact(dim) {
        for (s, &v) in mean.iter_mut().zip(row) {
            *s += v as f64;
        }
    }
    mean.iter_mut().for_each(|s| *s /= rows as f64);
    mean
}

/// `x / max(‖x‖, 1e-12)`.
pub(crate) fn unit(x: &[f64]) -> Vec<f64> {
    let norm = dot(x, x).sqrt().max(1e-12);
    x.iter().map(|v| v / norm).collect()
}

/// Plain dot product.
fn dot(x: &[f64], y: &[f64]) -> f64 {
    x.iter().zip(y).map(|(a, b)| a * b).sum()
}

/// DIML Eq. 8–9 on unit rows against a unit global direction, with the uniform fallback.
pub(crate) fn cross_correlation(locals_unit: &[f64], other_mean_unit: &[f64]) -> Vec<f64> {
    let dim = other_mean_unit.len();
    let gamma: Vec<f64> = locals_unit
        .chunks_exact(dim)
        .map(|z| dot(z, other_mean_unit).max(0.0))
        .collect();
    let total: f64 = gamma.iter().sum();
    if total <= 1e-12 {
        vec![1.0 / gamma.len() as f64; gamma.len()]
    } else {
        gamma.iter().map(|g| g / total).collect()
    }
}
