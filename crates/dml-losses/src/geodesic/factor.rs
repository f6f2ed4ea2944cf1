//! The geodesic factor `ϕ_s` and the discriminant eigenvalues `λ` of one batch (Kim & Song
//! 2022, Sec. III-A, Eq. 5–8), computed on the host from the batch's detached distances:
//!
//! 1. Isomap of the batch (k-NN graph, shortest paths, classical MDS; [`super::isomap`]);
//! 2. the LDS dimension `k ∈ dims` of smallest PIP loss (Eq. 5; [`super::pip`]);
//! 3. one point `Q_i ∈ St(k, p)` per sample, their intrinsic mean `W`, the lifting
//!    `V_i = RP_W⁻¹(Q_i)` (Eq. 6) and its vectorisation `ṽ_i ∈ R^{kp}` ([`super::stiefel`]);
//! 4. the LDA eigenpairs `(λ, e)` of the `ṽ_i` ([`super::lda`]);
//! 5. `v_{p,i} ~ U(C_m 1 ± ε1 λ̄)` by the reparameterisation `v = C_m 1 + ε1 λ̄ u`,
//!    `u ~ U(-1, 1)^{kp}` (Eq. 7), `ϕ_i = e_1ᵀ v_{p,i}` (Eq. 8) and `ϕ_s = Σ_i ϕ_i`.
//!
//! A degenerate batch (fewer than `k + 1` distinct points, no discriminant structure, no
//! triplet, or a `ϕ_s` that is not positive) gets the neutral factor `ϕ_s = 1`, `λ = []`, with
//! which every GML loss is exactly its baseline; a disconnected k-NN graph has its components
//! joined by their shortest edges (as scikit-learn's Isomap) and keeps its factor. Each case
//! bumps a per-thread counter ([`factor_counts`]) that training can write to its metrics. The
//! factor is never NaN.

use nalgebra::DMatrix;
use rand::{Rng, SeedableRng};

use super::isomap::{classical_mds, distinct_points, geodesic_distances};
use super::lda::lda;
use super::pip::choose_dimension;
use super::stiefel::{canonical_point, intrinsic_mean, lift_or_project, polar_projection, vectorize};
use crate::error::LossError;

/// How the per-sample factors `ϕ_i` become the one scale of the loss.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FactorScale {
    /// The paper's sum `ϕ_s = Σ_i ϕ_i` (Eq. 8–9). It grows with the batch size: with 40
    /// samples of normalised embeddings it is of the order of 10–40.
    #[default]
    Sum,
    /// The authors' public code (kdhht2334/GML-DML): `ϕ_s = clamp(√(mean_i |ϕ_i|), lo, hi)` with
    /// `[lo, hi]` = [`GeodesicFactorConfig::clamp`] ("value clipping for gradient exploding").
    /// Their GML-PA divides `Σ|ϕ_i|` by the number of classes and their GML-MS clamps at
    /// `[0.8, 1.5]`; this option takes the mean over the batch for every loss.
    ClampedRoot,
}

dml_config::config! {
    /// Configuration of the geodesic factor (PPGML Sec. III-A; defaults of Sec. IV-B), shared
    /// by every GML loss as its `factor` table.
    #[derive(Clone, Debug, PartialEq)]
    pub struct GeodesicFactorConfig {
        /// The candidate LDS dimensions `k`; Eq. 5 picks one per batch.
        pub dims: Vec<usize> = vec![3, 4, 5],
        /// The number of columns `p` of the Stiefel points `St(k, p)` (`p ≤ min(dims)`).
        pub p: usize = 2,
        /// The neighbours of each point in Isomap's k-NN graph (scikit-learn's default).
        pub neighbors: usize = 5,
        /// The scale `ε1` of the sampling half-width `ε1 λ̄` (Eq. 7).
        pub eps1: f64 = 0.1,
        /// How the `ϕ_i` make `ϕ_s`: `sum` (the paper) or `clamped_root` (the public code).
        pub scale: FactorScale = FactorScale::Sum,
        /// The interval `[lo, hi]` of `scale = "clamped_root"` (the public GML-PA code's).
        pub clamp: [f64; 2] = [0.5, 1.5],
        /// The iterations of the intrinsic-mean fixed point (see `stiefel::intrinsic_mean`).
        pub mean_iterations: usize = 50,
        /// A fixed `ϕ_s` instead of the per-batch factor (ablations and oracle cases): with
        /// `fixed_phi_s = 1.0` and `eps2 = 0.0` a GML loss is its baseline.
        pub fixed_phi_s: Option<f64> = None,
        /// The eigenvalues `λ` used with `fixed_phi_s` (their sum enters the loss as `-ε2 Σλ`).
        pub fixed_eigenvalues: Vec<f64> = Vec::new(),
    }
}

impl GeodesicFactorConfig {
    /// Checks the parameters; `loss` names the loss in the message.
    pub fn validate(&self, loss: &str) -> Result<(), LossError> {
        let err = |what: String| Err(LossError::Config(format!("{loss}: factor.{what}")));
        if self.dims.is_empty() || self.dims.contains(&0) {
            return err(format!("dims must be positive and non-empty, got {:?}", self.dims));
        }
        let smallest = self.dims.iter().copied().min().unwrap_or(0);
        if self.p == 0 || self.p > smallest {
            return err(format!("p must satisfy 1 ≤ p ≤ min(dims) = {smallest}, got {}", self.p));
        }
        if self.neighbors == 0 {
            return err("neighbors must be at least 1".into());
        }
        if !(self.eps1 >= 0.0 && self.eps1.is_finite()) {
            return err(format!("eps1 must be finite and ≥ 0, got {}", self.eps1));
        }
        if let Some(phi) = self.fixed_phi_s
            && !(phi > 0.0 && phi.is_finite())
        {
            return err(format!("fixed_phi_s must be finite and > 0, got {phi}"));
        }
        let [lo, hi] = self.clamp;
        if !(lo > 0.0 && lo <= hi && hi.is_finite()) {
            return err(format!("clamp must be [lo, hi] with 0 < lo ≤ hi < ∞, got [{lo}, {hi}]"));
        }
        if self.fixed_eigenvalues.iter().any(|l| !l.is_finite()) {
            return err("fixed_eigenvalues must be finite".into());
        }
        Ok(())
    }
}

/// Why a batch got the neutral factor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Degeneracy {
    /// Fewer than `k + 1` distinct points for the smallest candidate `k`.
    TooFewPoints,
    /// No discriminant structure: a single class, or no within-class scatter at all.
    SingularScatter,
    /// No triplet `(a, p, n)`, so the centre `C_m` of Eq. 7 is undefined.
    NoTriplets,
    /// The sampled `ϕ_s` is not positive (or not finite); the losses take `log ϕ_s`.
    NonPositiveFactor,
}

/// The geodesic factor of one batch.
#[derive(Clone, Debug, PartialEq)]
pub struct GeodesicFactor {
    /// `ϕ_s = Σ_i ϕ_i > 0` (Eq. 8 and the sum of Eq. 9).
    pub phi_s: f64,
    /// The `kp` LDA eigenvalues `λ_1 ≥ … ≥ λ_kp` (empty for the neutral factor).
    pub eigenvalues: Vec<f64>,
    /// The chosen LDS dimension `k` (0 for a fixed or neutral factor).
    pub dim: usize,
    /// The PIP loss (Eq. 5) of each admissible candidate dimension.
    pub pip: Vec<f64>,
    /// The centre `C_m`: the mean of `D_ap + D_an` over all triplets (Eq. 7).
    pub center: f64,
    /// `∂ϕ_s/∂C_m = N 1ᵀe_1` of the reparameterised sample (of the paper's sum scale) (for analysis; the losses treat
    /// the factor as a constant).
    pub d_phi_d_center: f64,
    /// `∂ϕ_s/∂λ̄ = ε1 Σ_i e_1ᵀu_i` of the reparameterised sample (of the paper's sum scale).
    pub d_phi_d_mean_eigenvalue: f64,
    /// Why the batch got the neutral factor, if it did.
    pub degeneracy: Option<Degeneracy>,
    /// How many points had no lifting at the mean and were projected instead.
    pub singular_lifts: usize,
    /// The LDA shrinkage used (non-zero when the within-class scatter was singular).
    pub shrinkage: f64,
    /// The edges that joined a disconnected k-NN graph (0 when it was connected).
    pub joining_edges: usize,
}

impl GeodesicFactor {
    /// The neutral factor `ϕ_s = 1`, `λ = []` of a degenerate batch.
    pub fn neutral(reason: Degeneracy) -> Self {
        Self {
            degeneracy: Some(reason),
            ..Self::fixed(1.0, Vec::new())
        }
    }

    /// A given `ϕ_s` and `λ` (see [`GeodesicFactorConfig::fixed_phi_s`]).
    pub fn fixed(phi_s: f64, eigenvalues: Vec<f64>) -> Self {
        Self {
            phi_s,
            eigenvalues,
            dim: 0,
            pip: Vec::new(),
            center: 0.0,
            d_phi_d_center: 0.0,
            d_phi_d_mean_eigenvalue: 0.0,
            degeneracy: None,
            singular_lifts: 0,
            shrinkage: 0.0,
            joining_edges: 0,
        }
    }

    /// `Σ_i λ_i`, the sum that enters every GML loss as `-ε2 Σλ`.
    pub fn eigenvalue_sum(&self) -> f64 {
        self.eigenvalues.iter().sum()
    }
}

/// Counts of the geodesic factor on the calling thread since it started (see [`factor_counts`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct FactorCounts {
    /// Batches whose factor was computed (not fixed).
    pub batches: u64,
    /// Batches with fewer than `k + 1` distinct points.
    pub too_few_points: u64,
    /// Batches whose k-NN graph was disconnected and had its components joined (not
    /// degenerate: they keep their factor).
    pub disconnected_graph: u64,
    /// Batches without discriminant structure.
    pub singular_scatter: u64,
    /// Batches without a triplet.
    pub no_triplets: u64,
    /// Batches whose sampled `ϕ_s` was not positive.
    pub non_positive_factor: u64,
    /// Batches whose within-class scatter was singular and shrunk (not degenerate: they keep
    /// their factor).
    pub shrunk_scatter: u64,
    /// Points, over all batches, without a lifting at the mean (projected instead).
    pub singular_lifts: u64,
    /// The sum of `ϕ_s` over the computed batches, neutral ones included (as 1).
    pub phi_s_sum: f64,
    /// The sum of `Σλ` over the computed batches.
    pub eigenvalue_sum: f64,
}

impl FactorCounts {
    /// The batches that got the neutral factor, whatever the reason.
    pub fn degenerate(&self) -> u64 {
        self.too_few_points + self.singular_scatter + self.no_triplets + self.non_positive_factor
    }

    /// The counts accumulated since `earlier`, a snapshot of the same thread.
    pub fn since(&self, earlier: &FactorCounts) -> FactorCounts {
        FactorCounts {
            batches: self.batches - earlier.batches,
            too_few_points: self.too_few_points - earlier.too_few_points,
            disconnected_graph: self.disconnected_graph - earlier.disconnected_graph,
            singular_scatter: self.singular_scatter - earlier.singular_scatter,
            no_triplets: self.no_triplets - earlier.no_triplets,
            non_positive_factor: self.non_positive_factor - earlier.non_positive_factor,
            shrunk_scatter: self.shrunk_scatter - earlier.shrunk_scatter,
            singular_lifts: self.singular_lifts - earlier.singular_lifts,
            phi_s_sum: self.phi_s_sum - earlier.phi_s_sum,
            eigenvalue_sum: self.eigenvalue_sum - earlier.eigenvalue_sum,
        }
    }

    /// The mean `ϕ_s` per computed batch (`None` before the first).
    pub fn mean_phi_s(&self) -> Option<f64> {
        (self.batches > 0).then(|| self.phi_s_sum / self.batches as f64)
    }

    /// Adds one computed batch's factor.
    fn record(&mut self, factor: &GeodesicFactor) {
        self.batches += 1;
        match factor.degeneracy {
            Some(Degeneracy::TooFewPoints) => self.too_few_points += 1,
            Some(Degeneracy::SingularScatter) => self.singular_scatter += 1,
            Some(Degeneracy::NoTriplets) => self.no_triplets += 1,
            Some(Degeneracy::NonPositiveFactor) => self.non_positive_factor += 1,
            None => {}
        }
        self.shrunk_scatter += u64::from(factor.shrinkage > 0.0);
        self.disconnected_graph += u64::from(factor.joining_edges > 0);
        self.singular_lifts += factor.singular_lifts as u64;
        self.phi_s_sum += factor.phi_s;
        self.eigenvalue_sum += factor.eigenvalue_sum();
    }
}

thread_local! {
    /// The counters behind [`factor_counts`]. A loss cannot report them through its output
    /// (whose type every loss shares), so training reads them between steps. They are per
    /// thread because a loss is evaluated on the thread that runs its training loop: two
    /// trainings in one process (tests run in parallel) then count only their own batches.
    static COUNTS: std::cell::Cell<FactorCounts> = const {
        std::cell::Cell::new(FactorCounts {
            batches: 0,
            too_few_points: 0,
            disconnected_graph: 0,
            singular_scatter: 0,
            no_triplets: 0,
            non_positive_factor: 0,
            shrunk_scatter: 0,
            singular_lifts: 0,
            phi_s_sum: 0.0,
            eigenvalue_sum: 0.0,
        })
    };
}

/// A snapshot of the calling thread's factor counters: computed batches, degenerate batches
/// by reason, shrunk scatters, joined graphs, singular liftings and the sums of `ϕ_s` and
/// `Σλ`, over every GML loss evaluated on this thread. Differences of two snapshots
/// ([`FactorCounts::since`]) give an epoch's counts.
pub fn factor_counts() -> FactorCounts {
    COUNTS.with(|c| c.get())
}

/// Euclidean distances `[N, N]` from a loss's `[N, N]` matrix (row-major): for a similarity
/// `s` (an inner product), `√max(0, s_ii + s_jj - 2 s_ij)` (for the cosine, `√(2 - 2s)`, the
/// distance of the L2-normalised embeddings); for a distance with `power` `q`, `d^{1/q}`.
///
/// Choice: the factor is computed from the loss's own detached matrix, so that the embedding
/// and the matrix entry points give the same factor; the geodesic analysis wants a metric, so
/// powers are undone and similarities turned into the distance they induce.
pub fn euclidean_from_matrix(values: &[f64], n: usize, is_similarity: bool, power: f64) -> Result<Vec<f64>, LossError> {
    square(values.len(), n, "distance matrix")?;
    Ok((0..n * n)
        .map(|k| {
            let (i, j) = (k / n, k % n);
            if i == j {
                0.0
            } else if is_similarity {
                (values[i * n + i] + values[j * n + j] - 2.0 * values[k])
                    .max(0.0)
                    .sqrt()
            } else if power == 1.0 {
                values[k].max(0.0)
            } else {
                values[k].max(0.0).powf(1.0 / power)
            }
        })
        .collect())
}

/// Checks that `len` values make the `[n, n]` matrix `what`.
fn square(len: usize, n: usize, what: &str) -> Result<(), LossError> {
    if len == n * n {
        Ok(())
    } else {
        Err(LossError::Shape(format!(
            "the {what} has {len} values, but {n} labels need [{n}, {n}] = {}",
            n * n
        )))
    }
}

/// `C_m`: the mean of `D_ap + D_an` over all triplets (`y_a = y_p`, `a ≠ p`, `y_n ≠ y_a`) of
/// `dist` `[N, N]`, in O(N²); `None` without a triplet.
fn triplet_center(dist: &[f64], labels: &[u32]) -> Option<f64> {
    let n = labels.len();
    let (mut sum, mut count) = (0.0, 0.0);
    for a in 0..n {
        let (mut pos_n, mut pos_sum, mut neg_n, mut neg_sum) = (0.0, 0.0, 0.0, 0.0);
        for j in 0..n {
            if j == a {
                continue;
            }
            if labels[j] == labels[a] {
                pos_n += 1.0;
                pos_sum += dist[a * n + j];
            } else {
                neg_n += 1.0;
                neg_sum += dist[a * n + j];
            }
        }
        // Each positive pair appears with every negative of its anchor and vice versa.
        sum += neg_n * pos_sum + pos_n * neg_sum;
        count += pos_n * neg_n;
    }
    (count > 0.0).then(|| sum / count)
}

/// The geodesic factor of a batch with Euclidean distances `dist` (`[N, N]`, row-major, of the
/// L2-normalised embeddings; see [`euclidean_from_matrix`]) and `labels`; `seed` drives the
/// uniform sample of Eq. 7. A fixed factor is returned as configured. Degenerate batches get
/// [`GeodesicFactor::neutral`] and bump their counter. A matrix of the wrong size or with a
/// non-finite entry is an error.
pub fn geodesic_factor(
    config: &GeodesicFactorConfig,
    dist: &[f64],
    labels: &[u32],
    seed: u64,
) -> Result<GeodesicFactor, LossError> {
    if let Some(phi) = config.fixed_phi_s {
        return Ok(GeodesicFactor::fixed(phi, config.fixed_eigenvalues.clone()));
    }
    square(dist.len(), labels.len(), "distance matrix")?;
    if let Some(k) = dist.iter().position(|d| !d.is_finite()) {
        let n = labels.len();
        return Err(LossError::Shape(format!(
            "the distance matrix has the non-finite entry {} at [{}, {}]",
            dist[k],
            k / n,
            k % n
        )));
    }
    let factor = compute(config, dist, labels, seed).unwrap_or_else(GeodesicFactor::neutral);
    COUNTS.with(|c| {
        let mut counts = c.get();
        counts.record(&factor);
        c.set(counts);
    });
    Ok(factor)
}

/// The factor's five steps (see the module documentation); `Err` names the degeneracy.
fn compute(
    config: &GeodesicFactorConfig,
    dist: &[f64],
    labels: &[u32],
    seed: u64,
) -> Result<GeodesicFactor, Degeneracy> {
    let n = labels.len();
    let p = config.p;
    let distinct = distinct_points(dist, n, 1e-12);
    // Only dimensions that `distinct` points can span (k + 1 points for k dimensions).
    let candidates: Vec<usize> = config.dims.iter().copied().filter(|&k| k < distinct).collect();
    if candidates.is_empty() {
        return Err(Degeneracy::TooFewPoints);
    }
    let center = triplet_center(dist, labels).ok_or(Degeneracy::NoTriplets)?;
    let geo = geodesic_distances(dist, n, config.neighbors);
    let lds = classical_mds(&geo.distances, n);
    let embedded = classical_mds(dist, n);
    let span = embedded.leading_basis(embedded.rank(1e-10));
    let (k, pip) = choose_dimension(&candidates, &span, |k| lds.leading_basis(k)).ok_or(Degeneracy::TooFewPoints)?;
    // Choice: each sample's first k·p Isomap coordinates, read column-major as a k × p matrix,
    // projected onto St(k, p) (its polar factor); coordinates beyond N - 1 are 0.
    let coords = lds.coordinates(k * p);
    let points: Vec<DMatrix<f64>> = (0..n)
        .map(|i| {
            let x = DMatrix::from_fn(k, p, |r, c| {
                let col = c * k + r;
                if col < coords.ncols() { coords[(i, col)] } else { 0.0 }
            });
            polar_projection(&x).unwrap_or_else(|| canonical_point(k, p))
        })
        .collect();
    let mean = intrinsic_mean(&points, config.mean_iterations, 1e-10);
    let mut singular_lifts = 0;
    let mut vectors = DMatrix::zeros(n, k * p);
    for (i, q) in points.iter().enumerate() {
        let (v, projected) = lift_or_project(&mean.w, q);
        singular_lifts += usize::from(projected);
        for (j, x) in vectorize(&v).into_iter().enumerate() {
            vectors[(i, j)] = x;
        }
    }
    let lda = lda(&vectors, labels).ok_or(Degeneracy::SingularScatter)?;
    let m = lda.eigenvalues.len();
    let mean_eigenvalue = lda.eigenvalues.iter().sum::<f64>() / m as f64;
    // Choice: the eigenvector's sign is free; it is taken with 1ᵀe_1 ≥ 0 so that the centre
    // of the sample, C_m 1, projects to a non-negative ϕ.
    let mut e1: Vec<f64> = lda.eigenvectors.column(0).iter().copied().collect();
    if e1.iter().sum::<f64>() < 0.0 {
        e1.iter_mut().for_each(|x| *x = -*x);
    }
    let e1_sum: f64 = e1.iter().sum();
    let half_width = config.eps1 * mean_eigenvalue;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    // ϕ_i = e_1ᵀ(C_m 1 + ε1 λ̄ u_i) = C_m 1ᵀe_1 + ε1 λ̄ e_1ᵀu_i; `noise` is Σ_i e_1ᵀu_i.
    let (mut noise, mut abs_sum) = (0.0, 0.0);
    for _ in 0..n {
        let mut projected = 0.0;
        for &e in &e1 {
            let u: f64 = rng.random::<f64>() * 2.0 - 1.0;
            projected += e * u;
        }
        noise += projected;
        abs_sum += (center * e1_sum + half_width * projected).abs();
    }
    let phi_s = match config.scale {
        // ϕ_s = Σ_i ϕ_i = N C_m 1ᵀe_1 + ε1 λ̄ Σ_i e_1ᵀu_i.
        FactorScale::Sum => n as f64 * center * e1_sum + half_width * noise,
        FactorScale::ClampedRoot => (abs_sum / n as f64).sqrt().clamp(config.clamp[0], config.clamp[1]),
    };
    if !(phi_s > 0.0 && phi_s.is_finite()) {
        return Err(Degeneracy::NonPositiveFactor);
    }
    Ok(GeodesicFactor {
        phi_s,
        eigenvalues: lda.eigenvalues,
        dim: k,
        pip,
        center,
        d_phi_d_center: n as f64 * e1_sum,
        d_phi_d_mean_eigenvalue: config.eps1 * noise,
        degeneracy: None,
        singular_lifts,
        shrinkage: lda.shrinkage,
        joining_edges: geo.joining_edges,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Euclidean distances of the L2-normalised rows of `x` `[n, d]`.
    fn distances(x: &[f64], n: usize, d: usize) -> Vec<f64> {
        let rows: Vec<Vec<f64>> = x
            .chunks(d)
            .map(|r| {
                let norm = r.iter().map(|v| v * v).sum::<f64>().sqrt().max(1e-12);
                r.iter().map(|v| v / norm).collect()
            })
            .collect();
        (0..n * n)
            .map(|k| {
                let (a, b) = (&rows[k / n], &rows[k % n]);
                a.iter().zip(b).map(|(u, v)| (u - v) * (u - v)).sum::<f64>().sqrt()
            })
            .collect()
    }

    fn batch(n: usize, d: usize, classes: u32, seed: u64) -> (Vec<f64>, Vec<u32>) {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let labels: Vec<u32> = (0..n as u32).map(|i| i % classes).collect();
        let centres: Vec<f64> = (0..classes as usize * d)
            .map(|_| rng.random::<f64>() * 2.0 - 1.0)
            .collect();
        let x = (0..n * d)
            .map(|k| centres[labels[k / d] as usize * d + k % d] + 0.4 * (rng.random::<f64>() - 0.5))
            .collect();
        (x, labels)
    }

    #[test]
    fn an_ordinary_batch_gets_a_positive_seeded_factor() {
        let (n, d) = (24, 8);
        let (x, labels) = batch(n, d, 4, 1);
        let dist = distances(&x, n, d);
        let config = GeodesicFactorConfig::default();
        let f = geodesic_factor(&config, &dist, &labels, 5).unwrap();
        assert_eq!(f.degeneracy, None, "{f:?}");
        assert!([3, 4, 5].contains(&f.dim));
        assert_eq!(f.eigenvalues.len(), f.dim * config.p);
        assert!(f.phi_s > 0.0 && f.phi_s.is_finite());
        assert!(f.eigenvalues.iter().all(|l| l.is_finite() && *l >= 0.0));
        // Same seed, same factor; the sample moves with the seed only through the noise term.
        assert_eq!(f, geodesic_factor(&config, &dist, &labels, 5).unwrap());
        let g = geodesic_factor(&config, &dist, &labels, 6).unwrap();
        assert_eq!(g.eigenvalues, f.eigenvalues);
        let centre_part = f.center * f.d_phi_d_center;
        let mean_eigenvalue = f.eigenvalues.iter().sum::<f64>() / f.eigenvalues.len() as f64;
        assert!((f.phi_s - centre_part - mean_eigenvalue * f.d_phi_d_mean_eigenvalue).abs() < 1e-9 * f.phi_s);
    }

    #[test]
    fn a_matrix_of_the_wrong_size_or_with_nan_is_an_error_naming_it() {
        let config = GeodesicFactorConfig::default();
        let e = geodesic_factor(&config, &[0.0; 8], &[0, 1, 2], 0)
            .unwrap_err()
            .to_string();
        assert!(e.contains("8 values") && e.contains("[3, 3]"), "{e}");
        let mut dist = vec![1.0; 9];
        dist[5] = f64::NAN;
        let e = geodesic_factor(&config, &dist, &[0, 1, 2], 0).unwrap_err().to_string();
        assert!(e.contains("non-finite") && e.contains("[1, 2]"), "{e}");
        assert!(euclidean_from_matrix(&[0.0; 3], 2, true, 1.0).is_err());
    }

    #[test]
    fn the_public_codes_clamped_root_scale_stays_in_its_interval() {
        let (n, d) = (24, 8);
        let (x, labels) = batch(n, d, 4, 1);
        let dist = distances(&x, n, d);
        let sum = geodesic_factor(&GeodesicFactorConfig::default(), &dist, &labels, 5).unwrap();
        let code = GeodesicFactorConfig {
            scale: FactorScale::ClampedRoot,
            clamp: [0.5, 1.5],
            ..GeodesicFactorConfig::default()
        };
        let f = geodesic_factor(&code, &dist, &labels, 5).unwrap();
        // Same eigenpairs and centre, only the scale differs: with every ϕ_i of the same sign
        // (the noise is ε1 λ̄ ≪ C_m 1ᵀe_1 here), mean |ϕ_i| = ϕ_s / N.
        assert_eq!((f.eigenvalues.clone(), f.center), (sum.eigenvalues.clone(), sum.center));
        let want = (sum.phi_s / n as f64).sqrt().clamp(0.5, 1.5);
        assert!((f.phi_s - want).abs() < 1e-12, "{} vs {want}", f.phi_s);
        let narrow = GeodesicFactorConfig {
            clamp: [0.9, 0.9],
            ..code.clone()
        };
        assert_eq!(geodesic_factor(&narrow, &dist, &labels, 5).unwrap().phi_s, 0.9);
        let bad = GeodesicFactorConfig {
            clamp: [1.5, 0.5],
            ..code
        };
        assert!(bad.validate("gml_pa").unwrap_err().to_string().contains("factor.clamp"));
    }

    #[test]
    fn degenerate_batches_are_neutral_and_counted() {
        let config = GeodesicFactorConfig::default();
        let cases: Vec<(Vec<f64>, Vec<u32>, usize, Degeneracy)> = vec![
            // Four copies of two points: 2 distinct < k + 1.
            (
                vec![1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0],
                vec![0, 1, 0, 1],
                2,
                Degeneracy::TooFewPoints,
            ),
            // One class: no triplet.
            (batch(8, 6, 1, 2).0, vec![0; 8], 6, Degeneracy::NoTriplets),
        ];
        for (x, labels, d, reason) in cases {
            let n = labels.len();
            let before = factor_counts();
            let f = geodesic_factor(&config, &distances(&x, n, d), &labels, 0).unwrap();
            assert_eq!(f, GeodesicFactor::neutral(reason));
            // The counters are per thread, so this batch is the only one counted.
            let counted = factor_counts().since(&before);
            assert_eq!((counted.batches, counted.degenerate()), (1, 1), "{counted:?}");
            assert_eq!(counted.phi_s_sum, 1.0);
        }
        // Two tight, far-apart clusters with one neighbour each: a disconnected graph, joined.
        let (mut x, labels) = batch(12, 6, 2, 3);
        for (k, v) in x.iter_mut().enumerate() {
            *v = if labels[k / 6] == 0 { 1.0 } else { -1.0 } * (1.0 + 0.01 * *v) * if k % 6 == 0 { 1.0 } else { 0.1 };
        }
        let one = GeodesicFactorConfig {
            neighbors: 1,
            ..config.clone()
        };
        let before = factor_counts().disconnected_graph;
        let f = geodesic_factor(&one, &distances(&x, 12, 6), &labels, 0).unwrap();
        assert!(f.joining_edges > 0 && f.phi_s.is_finite(), "{f:?}");
        assert!(factor_counts().disconnected_graph > before);
        // Four classes of two identical points each: triplets exist, but every class collapses
        // to one tangent vector, so there is no within-class scatter.
        let (x, _) = batch(4, 6, 4, 4);
        let x: Vec<f64> = x
            .chunks(6)
            .flat_map(|r| r.iter().chain(r).copied().collect::<Vec<_>>())
            .collect();
        let labels = [0, 0, 1, 1, 2, 2, 3, 3];
        let before = factor_counts().singular_scatter;
        let f = geodesic_factor(&config, &distances(&x, 8, 6), &labels, 0).unwrap();
        assert_eq!(f, GeodesicFactor::neutral(Degeneracy::SingularScatter));
        assert!(factor_counts().singular_scatter > before);
    }

    #[test]
    fn similarities_and_powers_convert_to_euclidean_distances() {
        let (n, d) = (5, 3);
        let (x, _) = batch(n, d, 2, 7);
        let dist = distances(&x, n, d);
        let rows: Vec<Vec<f64>> = x
            .chunks(d)
            .map(|r| {
                let norm = r.iter().map(|v| v * v).sum::<f64>().sqrt();
                r.iter().map(|v| v / norm).collect()
            })
            .collect();
        let cos: Vec<f64> = (0..n * n)
            .map(|k| rows[k / n].iter().zip(&rows[k % n]).map(|(a, b)| a * b).sum())
            .collect();
        let squared: Vec<f64> = dist.iter().map(|v| v * v).collect();
        for (a, b) in euclidean_from_matrix(&cos, n, true, 1.0).unwrap().iter().zip(&dist) {
            assert!((a - b).abs() < 1e-7, "{a} vs {b}");
        }
        for (a, b) in euclidean_from_matrix(&squared, n, false, 2.0)
            .unwrap()
            .iter()
            .zip(&dist)
        {
            assert!((a - b).abs() < 1e-12);
        }
    }
}
