//! Quadruplet loss (Chen et al. 2017, "Beyond triplet loss", Eq. 3), in the form used by the
//! DML benchmark code that DIML's Table 1 builds on (plain distances, two margins):
//!
//! `mean_t [d(a,p) - d(a,n) + α₁]_+ + mean_q [d(a,p) - d(n,k) + α₂]_+`
//!
//! where each triplet `(a, p, n)` is extended by a fourth sample `k` whose label differs
//! from both the anchor's and the negative's (Chen et al.: `s_k ≠ s_n`, `s_k ≠ s_a`). The
//! second term pushes negative pairs that do not share the anchor apart, relative to the
//! positive distance. There is no PML oracle; the tests compare with a naive loop and with
//! finite differences.

use super::kinds::{Batch, Computed, Context, PairInput, on_pairs};
use super::triplet_margin::{TripletsPerAnchor, resolve_triplets};
use super::{LossModule, LossOutput, RegisteredLoss};
use crate::distance::Distance;
use crate::error::LossError;
use crate::ops::gather_pairs;
use crate::reducer::{Reducer, SubLoss};
use crate::tuples::Triplets;
use burn::tensor::activation::relu;
use rand::{Rng, SeedableRng};

dml_config::config! {
    /// Configuration of the quadruplet loss.
    #[derive(Clone, Debug, PartialEq)]
    pub struct QuadrupletLossConfig {
        /// The triplet margin α₁ (as in the benchmark code).
        pub margin_triplet: f64 = 0.2,
        /// The quadruplet margin α₂.
        pub margin_quadruplet: f64 = 0.2,
        /// Triplets per anchor without a miner.
        pub triplets_per_anchor: TripletsPerAnchor = TripletsPerAnchor::All,
        /// Distance override (else Euclidean on normalised embeddings).
        pub distance: Option<Distance> = None,
        /// Reducer override (else the mean, per term).
        pub reducer: Option<Reducer> = None,
    }
}

/// The quadruplet loss on its own.
pub type QuadrupletLoss = LossModule<QuadrupletLossConfig>;

impl RegisteredLoss for QuadrupletLossConfig {
    const NAME: &'static str = "quadruplet";
    const DEFAULT_DISTANCE: Distance = Distance::euclidean();
    const DEFAULT_REDUCER: Reducer = Reducer::Mean;
    const PAIR_BASED: bool = true;

    fn distance(&self) -> Option<&Distance> {
        self.distance.as_ref()
    }

    fn reducer(&self) -> Option<&Reducer> {
        self.reducer.as_ref()
    }

    fn evaluate(&self, ctx: &Context<'_>, batch: Batch<'_>) -> Result<LossOutput, LossError> {
        on_pairs(self, ctx, batch, Self::compute)
    }
}

/// Quadruplets `(a, p, n, k)`: a triplet plus a fourth sample of a third class.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Quadruplets {
    /// Anchors.
    pub a: Vec<usize>,
    /// Positives.
    pub p: Vec<usize>,
    /// Negatives.
    pub n: Vec<usize>,
    /// Fourth samples (label differs from `a`'s and `n`'s).
    pub k: Vec<usize>,
}

impl Quadruplets {
    /// Extends each triplet with a fourth sample drawn uniformly (from `seed`) among those
    /// whose label differs from the anchor's and the negative's; triplets without such a
    /// sample (batches of two classes) get none.
    pub fn sample(triplets: &Triplets, labels: &[u32], seed: u64) -> Self {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x9e37_79b9_7f4a_7c15);
        let mut out = Quadruplets::default();
        let mut candidates = Vec::with_capacity(labels.len());
        for i in 0..triplets.len() {
            let (a, p, n) = (triplets.a[i], triplets.p[i], triplets.n[i]);
            candidates.clear();
            candidates.extend((0..labels.len()).filter(|&k| labels[k] != labels[a] && labels[k] != labels[n]));
            if candidates.is_empty() {
                continue;
            }
            let k = candidates[rng.random_range(0..candidates.len())];
            out.a.push(a);
            out.p.push(p);
            out.n.push(n);
            out.k.push(k);
        }
        out
    }

    /// Number of quadruplets.
    pub fn len(&self) -> usize {
        self.a.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.a.is_empty()
    }
}

impl QuadrupletLossConfig {
    fn compute(&self, input: &PairInput<'_>) -> Result<Computed, LossError> {
        let t = resolve_triplets(input.tuples, input.labels, self.triplets_per_anchor, input.seed);
        if t.is_empty() {
            return Ok(Computed::empty(2));
        }
        let q = Quadruplets::sample(&t, input.labels, input.seed);
        // margin(x, y): x - y for a distance, y - x for a similarity.
        let margin = |x, y| if input.sim { y - x } else { x - y };
        let ap = gather_pairs(&input.mat, &t.a, &t.p);
        let an = gather_pairs(&input.mat, &t.a, &t.n);
        let triplet = relu(margin(ap, an) + self.margin_triplet);
        let quad = if q.is_empty() {
            SubLoss::zero()
        } else {
            let qap = gather_pairs(&input.mat, &q.a, &q.p);
            let nk = gather_pairs(&input.mat, &q.n, &q.k);
            SubLoss::elements(relu(margin(qap, nk) + self.margin_quadruplet))
        };
        Ok(Computed {
            subs: vec![SubLoss::elements(triplet), quad],
            tuples: t.len() + q.len(),
        })
    }
}
