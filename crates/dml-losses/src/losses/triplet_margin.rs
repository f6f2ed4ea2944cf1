//! Triplet margin loss (PML `TripletMarginLoss`): `[d_ap - d_an + margin]_+`, or its smooth
//! version `softplus(d_ap - d_an + margin)`, per triplet.

use rand::SeedableRng;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::kinds::{Batch, Context, HostInput, on_host};
use super::{LossModule, LossOutput, RegisteredLoss};
use crate::distance::Distance;
use crate::error::LossError;
use crate::host_grad::{HostLoss, reducer_weights, softplus};
use crate::reducer::Reducer;
use crate::tuples::{Triplets, Tuples};

/// How many triplets per anchor a triplet-based loss uses when no miner is given.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TripletsPerAnchor {
    /// Every valid triplet (`"all"`, PML's default).
    #[default]
    All,
    /// This many random triplets per anchor (an integer), drawn from the forward seed.
    Count(usize),
}

impl Serialize for TripletsPerAnchor {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            TripletsPerAnchor::All => s.serialize_str("all"),
            TripletsPerAnchor::Count(n) => s.serialize_u64(*n as u64),
        }
    }
}

impl<'de> Deserialize<'de> for TripletsPerAnchor {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Count(u64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Count(0) => Err(serde::de::Error::custom(
                "triplets_per_anchor must be positive or \"all\"",
            )),
            Raw::Count(n) => Ok(TripletsPerAnchor::Count(n as usize)),
            Raw::Text(t) if t == "all" => Ok(TripletsPerAnchor::All),
            Raw::Text(t) => Err(serde::de::Error::custom(format!(
                "triplets_per_anchor must be \"all\" or a positive integer, got \"{t}\""
            ))),
        }
    }
}

/// The triplets a triplet-based loss uses: the mined ones, else all or random ones.
pub(crate) fn resolve_triplets(
    tuples: Option<&Tuples>,
    labels: &[u32],
    per_anchor: TripletsPerAnchor,
    seed: u64,
) -> Triplets {
    match (tuples, per_anchor) {
        (Some(t), _) => t.to_triplets(),
        (None, TripletsPerAnchor::All) => Triplets::all(labels),
        (None, TripletsPerAnchor::Count(k)) => {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
            Triplets::random(labels, Some(k), None, &mut rng)
        }
    }
}

dml_config::config! {
    /// Configuration of the triplet margin loss.
    #[derive(Clone, Debug, PartialEq)]
    pub struct TripletMarginLossConfig {
        /// The margin (PML's default).
        pub margin: f64 = 0.05,
        /// Use `min(d_an, d_pn)` as the negative distance (PML `swap`).
        pub swap: bool = false,
        /// `softplus` instead of the hinge (PML `smooth_loss`).
        pub smooth_loss: bool = false,
        /// Triplets per anchor without a miner.
        pub triplets_per_anchor: TripletsPerAnchor = TripletsPerAnchor::All,
        /// Distance override (else Euclidean on normalised embeddings).
        pub distance: Option<Distance> = None,
        /// Reducer override (else the average of the non-zero terms).
        pub reducer: Option<Reducer> = None,
    }
}

/// The triplet margin loss on its own.
pub type TripletMarginLoss = LossModule<TripletMarginLossConfig>;

impl RegisteredLoss for TripletMarginLossConfig {
    const NAME: &'static str = "triplet_margin";
    const DEFAULT_DISTANCE: Distance = Distance::euclidean();
    const DEFAULT_REDUCER: Reducer = Reducer::AvgNonZero;
    const PAIR_BASED: bool = true;
    const HOST_EVALUATED: bool = true;

    fn distance(&self) -> Option<&Distance> {
        self.distance.as_ref()
    }

    fn reducer(&self) -> Option<&Reducer> {
        self.reducer.as_ref()
    }

    fn validate(&self, _distance: &Distance) -> Result<(), LossError> {
        if !self.margin.is_finite() {
            return Err(LossError::Config(format!(
                "triplet_margin: margin must be finite, got {}",
                self.margin
            )));
        }
        Ok(())
    }

    fn evaluate(&self, ctx: &Context<'_>, batch: Batch<'_>) -> Result<LossOutput, LossError> {
        on_host(self, ctx, batch, |c, input| (c.host(input), Vec::new()))
    }
}

impl TripletMarginLossConfig {
    /// Per-triplet `[margin(d_ap, d_an) + margin]_+` (or its softplus) with `margin(x, y)
    /// = x - y` for a distance and `y - x` for a similarity, evaluated on the host with its
    /// gradient with respect to the matrix.
    fn host(&self, input: &HostInput<'_>) -> HostLoss {
        let n = input.mat.n;
        let m = &input.mat.values;
        let sim = input.mat.is_similarity;
        let mut grad = vec![0.0; n * n];
        let t = resolve_triplets(input.tuples, input.labels, self.triplets_per_anchor, input.seed);
        if t.is_empty() {
            return HostLoss {
                value: 0.0,
                grad,
                tuples: 0,
            };
        }
        let k = t.len();
        let mut losses = Vec::with_capacity(k);
        let mut slopes = Vec::with_capacity(k);
        let mut entries = Vec::with_capacity(k);
        for i in 0..k {
            let ap = t.a[i] * n + t.p[i];
            let mut an = t.a[i] * n + t.n[i];
            if self.swap {
                // The harder of anchor-negative and positive-negative (PML `smallest_dist`).
                let pn = t.p[i] * n + t.n[i];
                if input.mat.closer(m[pn], m[an]) {
                    an = pn;
                }
            }
            let v = if sim { m[an] - m[ap] } else { m[ap] - m[an] } + self.margin;
            let (l, slope) = if self.smooth_loss {
                softplus(v)
            } else if v > 0.0 {
                (v, 1.0)
            } else {
                (0.0, 0.0)
            };
            losses.push(l);
            slopes.push(slope);
            entries.push((ap, an));
        }
        let w = reducer_weights(input.reducer, &losses, None);
        let sign = if sim { -1.0 } else { 1.0 };
        let mut value = 0.0;
        for i in 0..k {
            value += w[i] * losses[i];
            let g = w[i] * slopes[i];
            if g != 0.0 {
                grad[entries[i].0] += sign * g;
                grad[entries[i].1] -= sign * g;
            }
        }
        HostLoss { value, grad, tuples: k }
    }
}
