//! Isomap (Tenenbaum et al. 2000) of one batch, the first step of PPGML's geodesic factor
//! (Kim & Song 2022, Sec. III-A-1): a k-nearest-neighbour graph on the batch's distances,
//! the shortest paths through it as geodesic distances, and classical multidimensional
//! scaling (MDS) of those distances as the low-dimensional space (LDS).
//!
//! Everything works on a row-major `[N, N]` distance matrix, so that the factor can be computed
//! from the embeddings and from a precomputed matrix alike.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use nalgebra::{DMatrix, SymmetricEigen};

/// The number of pairwise distinct points among the `n` rows of `dist` (`[N, N]`, row-major):
/// a point is a duplicate of an earlier one when their distance is at most `tol`.
///
/// Isomap cannot place `k + 1` points in general position in `k` dimensions when fewer are
/// distinct, which is one of the degenerate batches of the geodesic factor.
pub fn distinct_points(dist: &[f64], n: usize, tol: f64) -> usize {
    assert_eq!(dist.len(), n * n, "distance matrix must be [{n}, {n}]");
    (0..n).filter(|&i| (0..i).all(|j| dist[i * n + j] > tol)).count()
}

/// A queue entry of Dijkstra's algorithm, ordered so that `BinaryHeap` pops the nearest first.
#[derive(PartialEq)]
struct Entry(f64, usize);

impl Eq for Entry {}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Entry {
    fn cmp(&self, other: &Self) -> Ordering {
        // Reversed: the smallest distance is the "largest" entry; ties by index keep it total.
        other.0.total_cmp(&self.0).then_with(|| other.1.cmp(&self.1))
    }
}

/// Geodesic distances of a batch: shortest paths through its k-nearest-neighbour graph.
#[derive(Clone, Debug)]
pub struct Geodesics {
    /// The distances `[N, N]`, row-major, symmetric.
    pub distances: Vec<f64>,
    /// How many edges joined a disconnected k-NN graph (0 when it was connected).
    pub joining_edges: usize,
}

/// Geodesic distances `[N, N]` (row-major): shortest paths through the symmetric
/// `neighbors`-nearest-neighbour graph of `dist` (`[N, N]`, row-major), whose edges weigh their
/// distance (Isomap's first two steps, as scikit-learn's `Isomap(n_neighbors)`).
///
/// The graph is symmetrised (an edge when either point is among the other's nearest
/// neighbours), because a directed k-NN graph would give asymmetric "distances". Ties between
/// equally near neighbours are broken by index, so the graph is deterministic.
///
/// A disconnected graph (well-separated classes with fewer members than `neighbors + 1` make
/// one often) would leave infinite distances. As scikit-learn's Isomap, the components are then
/// joined by their shortest connecting edges: the component of point 0 repeatedly takes the
/// shortest edge to a point outside it (Prim's rule on components), so that every geodesic is
/// finite; [`Geodesics::joining_edges`] counts the edges added.
pub fn geodesic_distances(dist: &[f64], n: usize, neighbors: usize) -> Geodesics {
    assert_eq!(dist.len(), n * n, "distance matrix must be [{n}, {n}]");
    let k = neighbors.min(n.saturating_sub(1));
    let mut adjacent: Vec<Vec<(usize, f64)>> = vec![Vec::new(); n];
    let mut order: Vec<usize> = Vec::with_capacity(n);
    for i in 0..n {
        order.clear();
        order.extend((0..n).filter(|&j| j != i));
        order.sort_by(|&a, &b| dist[i * n + a].total_cmp(&dist[i * n + b]).then(a.cmp(&b)));
        for &j in &order[..k] {
            let w = dist[i * n + j];
            adjacent[i].push((j, w));
            adjacent[j].push((i, w));
        }
    }
    let joining_edges = join_components(dist, n, &mut adjacent);
    let mut geo = vec![f64::INFINITY; n * n];
    let mut heap = BinaryHeap::new();
    for source in 0..n {
        let row = &mut geo[source * n..(source + 1) * n];
        row[source] = 0.0;
        heap.push(Entry(0.0, source));
        while let Some(Entry(d, u)) = heap.pop() {
            if d > row[u] {
                continue;
            }
            for &(v, w) in &adjacent[u] {
                let candidate = d + w;
                if candidate < row[v] {
                    row[v] = candidate;
                    heap.push(Entry(candidate, v));
                }
            }
        }
    }
    // Dijkstra from each source gives the same value both ways up to rounding; the average
    // makes the matrix exactly symmetric, as the MDS eigenproblem assumes.
    for i in 0..n {
        for j in 0..i {
            let m = 0.5 * (geo[i * n + j] + geo[j * n + i]);
            geo[i * n + j] = m;
            geo[j * n + i] = m;
        }
    }
    Geodesics {
        distances: geo,
        joining_edges,
    }
}

/// Adds to `adjacent` the edges that join its components (see [`geodesic_distances`]) and
/// returns how many it added.
fn join_components(dist: &[f64], n: usize, adjacent: &mut [Vec<(usize, f64)>]) -> usize {
    if n == 0 {
        return 0;
    }
    // Marks everything reachable from the points already inside.
    fn reach(adjacent: &[Vec<(usize, f64)>], inside: &mut [bool], mut stack: Vec<usize>) {
        while let Some(u) = stack.pop() {
            for &(v, _) in &adjacent[u] {
                if !inside[v] {
                    inside[v] = true;
                    stack.push(v);
                }
            }
        }
    }
    let mut inside = vec![false; n];
    inside[0] = true;
    reach(adjacent, &mut inside, vec![0]);
    let mut added = 0;
    while inside.iter().any(|&x| !x) {
        let mut best = (f64::INFINITY, 0, 0);
        for i in (0..n).filter(|&i| inside[i]) {
            for j in (0..n).filter(|&j| !inside[j]) {
                if dist[i * n + j] < best.0 {
                    best = (dist[i * n + j], i, j);
                }
            }
        }
        let (w, i, j) = best;
        adjacent[i].push((j, w));
        adjacent[j].push((i, w));
        inside[j] = true;
        reach(adjacent, &mut inside, vec![j]);
        added += 1;
    }
    added
}

/// Classical (Torgerson) MDS of a distance matrix: the eigenpairs of the doubly centred Gram
/// matrix `B = -1/2 J (D ∘ D) J`, `J = I - 11ᵀ/N`, sorted by decreasing eigenvalue.
#[derive(Clone, Debug)]
pub struct Mds {
    /// The `N` eigenvalues of `B`, largest first (negative ones occur for non-Euclidean
    /// distances such as geodesic ones).
    pub eigenvalues: Vec<f64>,
    /// The unit eigenvectors `[N, N]`, one column per eigenvalue in the same order. The sign of
    /// each column is fixed (its entry of largest magnitude is positive; the first such entry
    /// on ties) so that the coordinates do not depend on the eigensolver's arbitrary signs.
    pub basis: DMatrix<f64>,
}

impl Mds {
    /// The coordinates `[N, dims]` of the points in the first `dims` dimensions: the
    /// eigenvectors scaled by the square root of their eigenvalue (0 for a non-positive one,
    /// so that a direction the distances do not support contributes nothing).
    pub fn coordinates(&self, dims: usize) -> DMatrix<f64> {
        let n = self.basis.nrows();
        let dims = dims.min(self.basis.ncols());
        DMatrix::from_fn(n, dims, |i, j| self.basis[(i, j)] * self.eigenvalues[j].max(0.0).sqrt())
    }

    /// How many eigenvalues exceed `rel_tol` times the largest one: the rank of the
    /// configuration (at most `N - 1`, since `B` is centred).
    pub fn rank(&self, rel_tol: f64) -> usize {
        let top = self.eigenvalues.first().copied().unwrap_or(0.0);
        if top <= 0.0 {
            return 0;
        }
        self.eigenvalues.iter().filter(|&&l| l > rel_tol * top).count()
    }

    /// The first `dims` columns of [`Self::basis`], `[N, dims]`: an orthonormal basis of the
    /// `dims`-dimensional MDS configuration.
    pub fn leading_basis(&self, dims: usize) -> DMatrix<f64> {
        let dims = dims.min(self.basis.ncols());
        self.basis.columns(0, dims).into_owned()
    }
}

/// Classical MDS of `dist` (`[N, N]`, row-major, symmetric).
pub fn classical_mds(dist: &[f64], n: usize) -> Mds {
    assert_eq!(dist.len(), n * n, "distance matrix must be [{n}, {n}]");
    let sq = DMatrix::from_fn(n, n, |i, j| {
        let d = 0.5 * (dist[i * n + j] + dist[j * n + i]);
        d * d
    });
    let row_means: Vec<f64> = (0..n).map(|i| sq.row(i).sum() / n as f64).collect();
    let total = row_means.iter().sum::<f64>() / n as f64;
    let b = DMatrix::from_fn(n, n, |i, j| -0.5 * (sq[(i, j)] - row_means[i] - row_means[j] + total));
    let eigen = SymmetricEigen::new(b);
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &c| eigen.eigenvalues[c].total_cmp(&eigen.eigenvalues[a]).then(a.cmp(&c)));
    let eigenvalues = order.iter().map(|&j| eigen.eigenvalues[j]).collect();
    let mut basis = DMatrix::zeros(n, n);
    for (col, &j) in order.iter().enumerate() {
        let v = eigen.eigenvectors.column(j);
        let pivot = (0..n).fold(0, |best, i| if v[i].abs() > v[best].abs() { i } else { best });
        let sign = if v[pivot] < 0.0 { -1.0 } else { 1.0 };
        basis.set_column(col, &(v * sign));
    }
    Mds { eigenvalues, basis }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Points on a line: geodesic and Euclidean distances agree, MDS has rank 1 and recovers
    /// the distances.
    #[test]
    fn isomap_of_a_line_recovers_its_distances() {
        let xs: [f64; 6] = [0.0, 1.0, 2.5, 3.0, 4.5, 7.0];
        let n = xs.len();
        let dist: Vec<f64> = (0..n * n).map(|k| (xs[k / n] - xs[k % n]).abs()).collect();
        let geo = geodesic_distances(&dist, n, 2);
        assert_eq!(geo.joining_edges, 0);
        let geo = geo.distances;
        for (g, d) in geo.iter().zip(&dist) {
            assert!((g - d).abs() < 1e-12, "{g} vs {d}");
        }
        let mds = classical_mds(&geo, n);
        assert_eq!(mds.rank(1e-9), 1);
        let y = mds.coordinates(1);
        for i in 0..n {
            for j in 0..n {
                assert!(((y[(i, 0)] - y[(j, 0)]).abs() - dist[i * n + j]).abs() < 1e-9);
            }
        }
        // The sign convention: the entry of largest magnitude is positive.
        let col = mds.basis.column(0);
        let pivot = (0..n).fold(0, |b, i| if col[i].abs() > col[b].abs() { i } else { b });
        assert!(col[pivot] > 0.0);
    }

    #[test]
    fn geodesics_follow_the_graph_and_components_are_joined() {
        // Three points on a circle's arc: with one neighbour the far pair goes around.
        let n = 3;
        let dist = vec![0.0, 1.0, 1.5, 1.0, 0.0, 1.0, 1.5, 1.0, 0.0];
        let geo = geodesic_distances(&dist, n, 1).distances;
        assert_eq!(geo[2], 2.0);
        // Two far-apart pairs with one neighbour each: two components, joined by one edge.
        let dist = vec![
            0.0, 0.1, 5.0, 5.0, //
            0.1, 0.0, 5.0, 5.0, //
            5.0, 5.0, 0.0, 0.1, //
            5.0, 5.0, 0.1, 0.0,
        ];
        let joined = geodesic_distances(&dist, 4, 1);
        assert_eq!(joined.joining_edges, 1);
        assert_eq!(joined.distances[3], 5.1, "0 → 1 → 3 through the joining edge");
        assert_eq!(geodesic_distances(&dist, 4, 2).joining_edges, 0);
        assert_eq!(distinct_points(&dist, 4, 1e-12), 4);
        assert_eq!(distinct_points(&[0.0, 0.0, 0.0, 0.0], 2, 1e-12), 1);
    }
}
