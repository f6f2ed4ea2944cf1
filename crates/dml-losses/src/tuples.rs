//! Typed index tuples (pairs and triplets) and their conversions (PML
//! `loss_and_miner_utils`).

use rand::Rng;

/// Positive pairs `(a1[k], p[k])` and negative pairs `(a2[k], n[k])`, as batch indices.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pairs {
    /// Anchors of the positive pairs.
    pub a1: Vec<usize>,
    /// Positives (same label as `a1`, different index).
    pub p: Vec<usize>,
    /// Anchors of the negative pairs.
    pub a2: Vec<usize>,
    /// Negatives (different label from `a2`).
    pub n: Vec<usize>,
}

/// Triplets `(a[k], p[k], n[k])`: `p` shares the anchor's label, `n` does not.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Triplets {
    /// Anchors.
    pub a: Vec<usize>,
    /// Positives.
    pub p: Vec<usize>,
    /// Negatives.
    pub n: Vec<usize>,
}

/// What a miner returns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tuples {
    /// Positive and negative pairs.
    Pairs(Pairs),
    /// Triplets.
    Triplets(Triplets),
}

impl Pairs {
    /// Every positive pair (`i != j`, same label) and every negative pair, in row-major
    /// order (PML `get_all_pairs_indices`).
    pub fn all(labels: &[u32]) -> Self {
        let mut out = Pairs::default();
        for (i, &li) in labels.iter().enumerate() {
            for (j, &lj) in labels.iter().enumerate() {
                if li == lj {
                    if i != j {
                        out.a1.push(i);
                        out.p.push(j);
                    }
                } else {
                    out.a2.push(i);
                    out.n.push(j);
                }
            }
        }
        out
    }

    /// Number of positive plus negative pairs.
    pub fn len(&self) -> usize {
        self.a1.len() + self.a2.len()
    }

    /// Whether there is no pair at all.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Triplets {
    /// Every triplet, ordered by anchor, positive, negative (PML `get_all_triplets_indices`).
    pub fn all(labels: &[u32]) -> Self {
        let mut out = Triplets::default();
        let n = labels.len();
        for a in 0..n {
            for p in 0..n {
                if p == a || labels[p] != labels[a] {
                    continue;
                }
                for (k, &lk) in labels.iter().enumerate() {
                    if lk != labels[a] {
                        out.a.push(a);
                        out.p.push(p);
                        out.n.push(k);
                    }
                }
            }
        }
        out
    }

    /// Every triplet `(a1[i], p[i], n[j])` whose positive and negative pair share the anchor
    /// (PML `convert_to_triplets` for pairs).
    pub fn from_pairs(pairs: &Pairs) -> Self {
        let mut by_anchor: std::collections::HashMap<usize, Vec<usize>> = std::collections::HashMap::new();
        for (j, &a) in pairs.a2.iter().enumerate() {
            by_anchor.entry(a).or_default().push(pairs.n[j]);
        }
        let mut out = Triplets::default();
        for (i, &a) in pairs.a1.iter().enumerate() {
            if let Some(negs) = by_anchor.get(&a) {
                for &n in negs {
                    out.a.push(a);
                    out.p.push(pairs.p[i]);
                    out.n.push(n);
                }
            }
        }
        out
    }

    /// Random triplets (PML `get_random_triplet_indices`): for every anchor of every label
    /// with at least two members and at least one negative, `per_anchor` triplets (default:
    /// the class size) with a uniformly drawn positive (never the anchor itself) and a
    /// negative drawn uniformly, or from the row of `weights` (`[N, N]`, row-major) when
    /// given. Anchors whose weights over the negatives sum to zero are skipped.
    pub fn random<R: Rng>(labels: &[u32], per_anchor: Option<usize>, weights: Option<&[f64]>, rng: &mut R) -> Self {
        let n = labels.len();
        let mut unique: Vec<u32> = labels.to_vec();
        unique.sort_unstable();
        unique.dedup();
        let mut out = Triplets::default();
        for &label in &unique {
            let members: Vec<usize> = (0..n).filter(|&i| labels[i] == label).collect();
            let negatives: Vec<usize> = (0..n).filter(|&i| labels[i] != label).collect();
            if members.len() < 2 || negatives.is_empty() {
                continue;
            }
            let k = per_anchor.unwrap_or(members.len());
            for (ai, &a) in members.iter().enumerate() {
                // The anchor's cumulative negative weights, built once per anchor.
                let cumulative: Option<Vec<f64>> = weights.map(|w| {
                    let mut acc = 0.0;
                    negatives
                        .iter()
                        .map(|&j| {
                            let v = w[a * n + j];
                            acc += if v.is_finite() && v > 0.0 { v } else { 0.0 };
                            acc
                        })
                        .collect()
                });
                if let Some(c) = &cumulative
                    && c.last().is_none_or(|&t| t <= 0.0)
                {
                    continue;
                }
                for _ in 0..k {
                    // A uniform positive among the other members of the class.
                    let mut pi = rng.random_range(0..members.len() - 1);
                    if pi >= ai {
                        pi += 1;
                    }
                    let neg = match &cumulative {
                        None => negatives[rng.random_range(0..negatives.len())],
                        Some(c) => {
                            let total = *c.last().unwrap_or(&0.0);
                            let u = rng.random::<f64>() * total;
                            let idx = c.partition_point(|&x| x <= u).min(c.len() - 1);
                            negatives[idx]
                        }
                    };
                    out.a.push(a);
                    out.p.push(members[pi]);
                    out.n.push(neg);
                }
            }
        }
        out
    }

    /// Number of triplets.
    pub fn len(&self) -> usize {
        self.a.len()
    }

    /// Whether there is no triplet.
    pub fn is_empty(&self) -> bool {
        self.a.is_empty()
    }

    /// The triplets as pairs: `(a, p)` positive and `(a, n)` negative (PML
    /// `convert_to_pairs` for triplets).
    pub fn to_pairs(&self) -> Pairs {
        Pairs {
            a1: self.a.clone(),
            p: self.p.clone(),
            a2: self.a.clone(),
            n: self.n.clone(),
        }
    }
}

impl Tuples {
    /// As pairs (triplets become their two pairs).
    pub fn to_pairs(&self) -> Pairs {
        match self {
            Tuples::Pairs(p) => p.clone(),
            Tuples::Triplets(t) => t.to_pairs(),
        }
    }

    /// As triplets (pairs are joined on their anchor).
    pub fn to_triplets(&self) -> Triplets {
        match self {
            Tuples::Pairs(p) => Triplets::from_pairs(p),
            Tuples::Triplets(t) => t.clone(),
        }
    }

    /// Number of tuples (pairs count positive plus negative).
    pub fn len(&self) -> usize {
        match self {
            Tuples::Pairs(p) => p.len(),
            Tuples::Triplets(t) => t.len(),
        }
    }

    /// Whether there is no tuple.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every index mentioned, in order (used for PML's miner weights); only the anchors
    /// when `anchors_only` (PML's `using_ref`, for losses against proxies).
    fn indices(&self, anchors_only: bool) -> Vec<usize> {
        match (self, anchors_only) {
            (Tuples::Pairs(p), false) => [&p.a1[..], &p.p, &p.a2, &p.n].concat(),
            (Tuples::Pairs(p), true) => [&p.a1[..], &p.a2].concat(),
            (Tuples::Triplets(t), false) => [&t.a[..], &t.p, &t.n].concat(),
            (Tuples::Triplets(t), true) => t.a.clone(),
        }
    }
}

/// Per-sample weights from mined tuples (PML `convert_to_weights`): the number of times
/// each sample occurs divided by the largest such count; all ones without tuples.
pub(crate) fn miner_weights(tuples: Option<&Tuples>, n: usize, anchors_only: bool) -> Vec<f64> {
    let Some(t) = tuples.filter(|t| !t.is_empty()) else {
        return vec![1.0; n];
    };
    let mut counts = vec![0usize; n];
    for i in t.indices(anchors_only) {
        counts[i] += 1;
    }
    let max = counts.iter().copied().max().unwrap_or(1).max(1) as f64;
    counts.iter().map(|&c| c as f64 / max).collect()
}

/// The positive pairs to use: all of them, or those of the mined tuples.
pub(crate) fn pairs_or_all(tuples: Option<&Tuples>, labels: &[u32]) -> Pairs {
    tuples.map_or_else(|| Pairs::all(labels), Tuples::to_pairs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn all_pairs_and_triplets_count() {
        let labels = [0, 0, 1, 1, 1];
        let p = Pairs::all(&labels);
        assert_eq!(p.a1.len(), 2 + 6);
        assert_eq!(p.a2.len(), 25 - 5 - 8);
        let t = Triplets::all(&labels);
        // Class 0: 2 anchors x 1 positive x 3 negatives; class 1: 3 x 2 x 2.
        assert_eq!(t.len(), 6 + 12);
        let back = Triplets::from_pairs(&p);
        assert_eq!(back.len(), t.len());
    }

    #[test]
    fn random_triplets_are_valid_and_seeded() {
        let labels = [0, 0, 0, 1, 1, 2];
        let mut r1 = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let mut r2 = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let a = Triplets::random(&labels, None, None, &mut r1);
        let b = Triplets::random(&labels, None, None, &mut r2);
        assert_eq!(a, b);
        assert_eq!(a.len(), 3 * 3 + 2 * 2);
        for k in 0..a.len() {
            assert_ne!(a.a[k], a.p[k]);
            assert_eq!(labels[a.a[k]], labels[a.p[k]]);
            assert_ne!(labels[a.a[k]], labels[a.n[k]]);
        }
    }

    #[test]
    fn miner_weights_are_relative_counts() {
        let t = Tuples::Triplets(Triplets {
            a: vec![0, 0],
            p: vec![1, 1],
            n: vec![2, 3],
        });
        assert_eq!(miner_weights(Some(&t), 5, false), vec![1.0, 1.0, 0.5, 0.5, 0.0]);
        assert_eq!(miner_weights(None, 2, false), vec![1.0, 1.0]);
    }
}
