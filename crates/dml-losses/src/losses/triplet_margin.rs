//! Triplet margin loss (PML `TripletMarginLoss`): `[d_ap - d_an + margin]_+`, or its smooth
//! version `softplus(d_ap - d_an + margin)`, per triplet.

use burn::tensor::activation::{relu, softplus};
use rand::SeedableRng;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{Computed, PairInput};
use crate::distance::Distance;
use crate::error::LossError;
use crate::ops::gather_pairs;
use crate::reducer::{Reducer, SubLoss};
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

/// Configuration of the triplet margin loss.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TripletMarginLossConfig {
    /// The margin (PML default 0.05).
    pub margin: f64,
    /// Use `min(d_an, d_pn)` as the negative distance (PML `swap`, default false).
    pub swap: bool,
    /// `softplus` instead of the hinge (PML `smooth_loss`, default false).
    pub smooth_loss: bool,
    /// Triplets per anchor without a miner (default `"all"`).
    pub triplets_per_anchor: TripletsPerAnchor,
    /// Distance override (default Euclidean on normalised embeddings).
    pub distance: Option<Distance>,
    /// Reducer override (default average of non-zero).
    pub reducer: Option<Reducer>,
}

impl Default for TripletMarginLossConfig {
    fn default() -> Self {
        Self {
            margin: 0.05,
            swap: false,
            smooth_loss: false,
            triplets_per_anchor: TripletsPerAnchor::All,
            distance: None,
            reducer: None,
        }
    }
}

impl TripletMarginLossConfig {
    pub(super) fn validate(&self) -> Result<(), LossError> {
        if !self.margin.is_finite() {
            return Err(LossError::Config(format!(
                "triplet_margin: margin must be finite, got {}",
                self.margin
            )));
        }
        Ok(())
    }

    /// Per-triplet `[margin(d_ap, d_an) + margin]_+` with `margin(x, y) = x - y` for a
    /// distance and `y - x` for a similarity.
    pub(super) fn compute(&self, input: &PairInput<'_>) -> Result<Computed, LossError> {
        let t = resolve_triplets(input.tuples, input.labels, self.triplets_per_anchor, input.seed);
        if t.is_empty() {
            return Ok(Computed::empty(1));
        }
        let ap = gather_pairs(&input.mat, &t.a, &t.p);
        let mut an = gather_pairs(&input.mat, &t.a, &t.n);
        if self.swap {
            let pn = gather_pairs(&input.mat, &t.p, &t.n);
            // The "smallest distance" of the two: min for a distance, max for a similarity.
            an = if input.sim { an.max_pair(pn) } else { an.min_pair(pn) };
        }
        let violation = if input.sim { an - ap } else { ap - an } + self.margin;
        let losses = if self.smooth_loss {
            softplus(violation, 1.0)
        } else {
            relu(violation)
        };
        Ok(Computed {
            subs: vec![SubLoss::elements(losses)],
            tuples: t.len(),
        })
    }
}
