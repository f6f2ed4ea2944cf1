//! Seeded k-means++ with Lloyd's iterations, deterministic for a given seed.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

use crate::distance::Distance;
use crate::embeddings::Embeddings;
use crate::error::EvalError;
use crate::knn::knn_with;
use crate::search::SearchOptions;

/// Settings of [`kmeans`].
#[derive(Debug, Clone, PartialEq)]
pub struct KMeansConfig {
    /// Seed of the `ChaCha8Rng` that drives k-means++ seeding; equal seeds give equal clusterings.
    pub seed: u64,
    /// Maximum number of Lloyd iterations (assignment + update). Default 100.
    pub max_iter: usize,
    /// Candidate centres drawn per k-means++ step, keeping the one that lowers the potential most. `1` is
    /// the classic k-means++ of Arthur and Vassilvitskii (the default); scikit-learn uses
    /// `2 + floor(ln k)`.
    pub local_trials: usize,
    /// Options of the nearest-centre search in each assignment step.
    pub search: SearchOptions,
}

impl Default for KMeansConfig {
    fn default() -> Self {
        Self {
            seed: 0,
            max_iter: 100,
            local_trials: 1,
            search: SearchOptions::default(),
        }
    }
}

/// The outcome of [`kmeans`].
#[derive(Debug, Clone, PartialEq)]
pub struct KMeansResult {
    /// Cluster of every row, in `0..n_clusters`.
    pub assignments: Vec<u32>,
    /// `n_clusters × dim` centroids, row-major.
    pub centroids: Vec<f32>,
    /// Sum of squared Euclidean distances of rows to their centroid at the final assignment.
    pub inertia: f64,
    /// Lloyd iterations run.
    pub iterations: usize,
    /// Whether the assignment stopped changing before `max_iter`.
    pub converged: bool,
}

/// Points per deterministic reduction chunk: sums over points are formed per fixed chunk and then added in
/// chunk order, so results do not depend on the number of threads.
const CHUNK: usize = 4096;

/// Clusters the rows of `points` into `n_clusters` clusters with Euclidean k-means.
///
/// Seeding is k-means++ (D² sampling with [`KMeansConfig::local_trials`] candidates per step, driven by
/// `ChaCha8Rng::seed_from_u64(seed)`); Lloyd iterations then alternate exact nearest-centroid assignment
/// (ties to the lower centroid index, through the same search as [`crate::knn`]) and mean updates in `f64`
/// until no assignment changes or `max_iter` is reached. A cluster that becomes empty is re-seeded with the
/// point farthest from its centroid. The result depends only on the data, `n_clusters` and the config.
///
/// # Errors
/// [`EvalError::ZeroK`] when `n_clusters == 0`, [`EvalError::TooManyClusters`] when it exceeds the rows,
/// [`EvalError::Options`] for invalid search options.
pub fn kmeans(points: &Embeddings<'_>, n_clusters: usize, config: &KMeansConfig) -> Result<KMeansResult, EvalError> {
    let (n, dim) = (points.rows(), points.dim());
    if n_clusters == 0 {
        return Err(EvalError::ZeroK { what: "n_clusters" });
    }
    if n_clusters > n {
        return Err(EvalError::TooManyClusters { n_clusters, rows: n });
    }
    let mut centroids = seed_plus_plus(
        points,
        n_clusters,
        config.seed,
        config.local_trials.max(1),
        config.search.threads,
    )?;
    let mut assignments = vec![u32::MAX; n];
    let mut iterations = 0;
    let mut converged = false;
    let mut dist = Vec::new();
    while iterations < config.max_iter {
        iterations += 1;
        let centres = Embeddings::new(&centroids, n_clusters, dim)?;
        let nn = knn_with(points, &centres, 1, Distance::Euclidean, false, &config.search, None)?;
        let changed = nn.indices.iter().zip(&assignments).any(|(a, b)| a != b);
        assignments = nn.indices;
        dist = nn.distances;
        if !changed {
            converged = true;
            break;
        }
        let empty = update_means(points, &assignments, n_clusters, &mut centroids);
        relocate_empty(points, &empty, &dist, &mut centroids);
    }
    if dist.is_empty() {
        // max_iter == 0: assign once so that the result is still a valid clustering.
        let centres = Embeddings::new(&centroids, n_clusters, dim)?;
        let nn = knn_with(points, &centres, 1, Distance::Euclidean, false, &config.search, None)?;
        assignments = nn.indices;
        dist = nn.distances;
    }
    let inertia = dist.iter().map(|&d| f64::from(d) * f64::from(d)).sum();
    Ok(KMeansResult {
        assignments,
        centroids,
        inertia,
        iterations,
        converged,
    })
}

/// Squared Euclidean distance with eight independent accumulators so that it vectorises.
#[inline]
fn sq_dist(a: &[f32], b: &[f32]) -> f64 {
    let mut acc = [0.0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for l in 0..8 {
            let t = x[l] - y[l];
            acc[l] += t * t;
        }
    }
    let mut s: f64 = acc.iter().map(|&v| f64::from(v)).sum();
    for (x, y) in ra.iter().zip(rb) {
        let t = f64::from(x - y);
        s += t * t;
    }
    s
}

/// k-means++ seeding. Keeps, per point, the squared distance to and index of its closest chosen centre,
/// and skips points that a new centre cannot improve by the triangle inequality
/// (`|c_new - c_a| >= 2·d(x, c_a)` implies `d(x, c_new) >= d(x, c_a)`), which makes large `k` affordable.
fn seed_plus_plus(
    points: &Embeddings<'_>,
    k: usize,
    seed: u64,
    trials: usize,
    threads: Option<usize>,
) -> Result<Vec<f32>, EvalError> {
    crate::search::with_threads(threads, || {
        let (n, dim) = (points.rows(), points.dim());
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut centres: Vec<f32> = Vec::with_capacity(k * dim);
        let first = rng.random_range(0..n);
        centres.extend_from_slice(points.row(first));
        let mut closest: Vec<f64> = (0..n)
            .into_par_iter()
            .map(|i| sq_dist(points.row(i), points.row(first)))
            .collect();
        let mut owner = vec![0u32; n];
        let mut chosen = vec![first];
        let mut cc = vec![0.0f64; k];
        for c in 1..k {
            let pot = chunked_sum(&closest);
            let mut best: Option<(f64, usize, Vec<f64>)> = None;
            for _ in 0..trials {
                let cand = if pot > 0.0 {
                    sample_d2(&closest, rng.random::<f64>() * pot)
                } else {
                    // Every point coincides with a centre: take the first point not chosen yet.
                    (0..n).find(|i| !chosen.contains(i)).unwrap_or(0)
                };
                let cp = points.row(cand);
                for (j, slot) in cc.iter_mut().enumerate().take(c) {
                    *slot = sq_dist(cp, &centres[j * dim..(j + 1) * dim]).sqrt();
                }
                let updated: Vec<f64> = closest
                    .par_iter()
                    .zip(owner.par_iter())
                    .enumerate()
                    .with_min_len(CHUNK)
                    .map(|(i, (&d2, &o))| {
                        // Pruned points keep their distance; the margin absorbs f32 rounding.
                        if cc[o as usize] >= 2.0 * d2.sqrt() * (1.0 + 1e-6) + 1e-30 {
                            d2
                        } else {
                            d2.min(sq_dist(points.row(i), cp))
                        }
                    })
                    .collect();
                let p = chunked_sum(&updated);
                if best.as_ref().is_none_or(|b| p < b.0) {
                    best = Some((p, cand, updated));
                }
            }
            let (_, cand, updated) = best.expect("at least one local trial runs");
            for (i, (o, (&old, &new))) in owner.iter_mut().zip(closest.iter().zip(&updated)).enumerate() {
                if new < old || i == cand {
                    *o = c as u32;
                }
            }
            closest = updated;
            chosen.push(cand);
            centres.extend_from_slice(points.row(cand));
        }
        Ok(centres)
    })
}

/// Sum of `v` formed per fixed chunk and added in order, independent of the thread count.
fn chunked_sum(v: &[f64]) -> f64 {
    let parts: Vec<f64> = v.par_chunks(CHUNK).map(|c| c.iter().sum::<f64>()).collect();
    parts.iter().sum()
}

/// The first index whose cumulative weight exceeds `u` (D² sampling); zero-weight points are never drawn.
fn sample_d2(weights: &[f64], u: f64) -> usize {
    let mut acc = 0.0;
    let mut last_positive = 0;
    for (i, &w) in weights.iter().enumerate() {
        if w > 0.0 {
            acc += w;
            last_positive = i;
            if acc > u {
                return i;
            }
        }
    }
    // Rounding can leave u at or above the total: fall back to the last point with weight.
    last_positive
}

/// Replaces every centroid by the `f64` mean of its points; returns the clusters that got no point.
fn update_means(points: &Embeddings<'_>, assign: &[u32], k: usize, centroids: &mut [f32]) -> Vec<usize> {
    let dim = points.dim();
    let mut sums = vec![0.0f64; k * dim];
    let mut counts = vec![0usize; k];
    for (i, &a) in assign.iter().enumerate() {
        let a = a as usize;
        counts[a] += 1;
        for (s, &x) in sums[a * dim..(a + 1) * dim].iter_mut().zip(points.row(i)) {
            *s += f64::from(x);
        }
    }
    let mut empty = Vec::new();
    for c in 0..k {
        if counts[c] == 0 {
            empty.push(c);
            continue;
        }
        let inv = 1.0 / counts[c] as f64;
        for (o, s) in centroids[c * dim..(c + 1) * dim]
            .iter_mut()
            .zip(&sums[c * dim..(c + 1) * dim])
        {
            *o = (s * inv) as f32;
        }
    }
    empty
}

/// Moves each empty cluster's centroid onto a distinct point, farthest from its centroid first (ties to the
/// lower index), as scikit-learn does.
fn relocate_empty(points: &Embeddings<'_>, empty: &[usize], dist: &[f32], centroids: &mut [f32]) {
    if empty.is_empty() {
        return;
    }
    let dim = points.dim();
    let mut order: Vec<usize> = (0..dist.len()).collect();
    order.sort_by(|&a, &b| dist[b].total_cmp(&dist[a]).then(a.cmp(&b)));
    for (&c, &p) in empty.iter().zip(&order) {
        centroids[c * dim..(c + 1) * dim].copy_from_slice(points.row(p));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three well separated blobs of 40 points in 5 dimensions.
    fn blobs() -> (Vec<f32>, Vec<u32>) {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut data = Vec::new();
        let mut labels = Vec::new();
        for i in 0..120u32 {
            let c = i % 3;
            labels.push(c);
            for d in 0..5 {
                let centre = if d as u32 == c { 20.0 } else { 0.0 };
                data.push(centre + rng.random_range(-1.0..1.0f32));
            }
        }
        (data, labels)
    }

    #[test]
    fn recovers_separated_blobs_and_is_deterministic() {
        let (data, labels) = blobs();
        let e = Embeddings::new(&data, 120, 5).unwrap();
        let cfg = KMeansConfig {
            seed: 11,
            ..KMeansConfig::default()
        };
        let a = kmeans(&e, 3, &cfg).unwrap();
        assert!(a.converged);
        // Same blob ⇔ same cluster.
        for i in 0..120 {
            for j in 0..120 {
                assert_eq!(
                    labels[i] == labels[j],
                    a.assignments[i] == a.assignments[j],
                    "points {i}, {j}"
                );
            }
        }
        let b = kmeans(&e, 3, &cfg).unwrap();
        assert_eq!(a, b);
        let one = kmeans(
            &e,
            3,
            &KMeansConfig {
                search: SearchOptions {
                    threads: Some(1),
                    ..Default::default()
                },
                ..cfg.clone()
            },
        )
        .unwrap();
        assert_eq!(a.assignments, one.assignments);
        assert_eq!(a.centroids, one.centroids);
    }

    #[test]
    fn greedy_trials_and_seeds_still_recover_blobs() {
        let (data, labels) = blobs();
        let e = Embeddings::new(&data, 120, 5).unwrap();
        for seed in 0..5 {
            let cfg = KMeansConfig {
                seed,
                local_trials: 3,
                ..KMeansConfig::default()
            };
            let r = kmeans(&e, 3, &cfg).unwrap();
            let mut map = [u32::MAX; 3];
            for (l, a) in labels.iter().zip(&r.assignments) {
                if map[*l as usize] == u32::MAX {
                    map[*l as usize] = *a;
                }
                assert_eq!(map[*l as usize], *a, "seed {seed}");
            }
        }
    }

    #[test]
    fn centroids_are_means_and_inertia_matches() {
        // Two clusters on a line: {0, 1, 2} and {10, 12}.
        let data = [0.0f32, 1.0, 2.0, 10.0, 12.0];
        let e = Embeddings::new(&data, 5, 1).unwrap();
        let r = kmeans(&e, 2, &KMeansConfig::default()).unwrap();
        let (lo, hi) = if r.centroids[0] < r.centroids[1] {
            (0, 1)
        } else {
            (1, 0)
        };
        assert_eq!(r.centroids[lo], 1.0);
        assert_eq!(r.centroids[hi], 11.0);
        assert!(
            (r.inertia - (1.0 + 0.0 + 1.0 + 1.0 + 1.0)).abs() < 1e-4,
            "{}",
            r.inertia
        );
        assert_eq!(r.assignments[0], r.assignments[2]);
        assert_ne!(r.assignments[0], r.assignments[3]);
    }

    #[test]
    fn errors_on_bad_cluster_counts() {
        let data = [0.0f32, 1.0];
        let e = Embeddings::new(&data, 2, 1).unwrap();
        assert_eq!(
            kmeans(&e, 0, &KMeansConfig::default()).unwrap_err(),
            EvalError::ZeroK { what: "n_clusters" }
        );
        assert_eq!(
            kmeans(&e, 3, &KMeansConfig::default()).unwrap_err(),
            EvalError::TooManyClusters { n_clusters: 3, rows: 2 }
        );
    }

    #[test]
    fn duplicate_points_do_not_break_seeding() {
        let data = [5.0f32; 8];
        let e = Embeddings::new(&data, 4, 2).unwrap();
        let r = kmeans(&e, 3, &KMeansConfig::default()).unwrap();
        assert_eq!(r.assignments.len(), 4);
        assert!(r.assignments.iter().all(|&a| a < 3));
        assert_eq!(r.inertia, 0.0);
    }
}
