//! N-pairs loss (Sohn 2016, Eq. 3; PML `NPairsLoss`): one positive pair per class, and the
//! cross-entropy of each anchor against all chosen positives.

use super::kinds::{Batch, Computed, Context, PairInput, on_pairs};
use super::{LossModule, LossOutput, RegisteredLoss};
use crate::distance::Distance;
use crate::error::LossError;
use crate::ops::{cross_entropy, index1};
use crate::reducer::{Reducer, SubLoss};
use crate::tuples::pairs_or_all;

dml_config::config! {
    /// Configuration of the N-pairs loss.
    #[derive(Clone, Debug, PartialEq)]
    pub struct NPairsLossConfig {
        /// Distance override (else the dot product of normalised embeddings).
        pub distance: Option<Distance> = None,
        /// Reducer override (else the mean).
        pub reducer: Option<Reducer> = None,
    }
}

/// The N-pairs loss on its own.
pub type NPairsLoss = LossModule<NPairsLossConfig>;

impl RegisteredLoss for NPairsLossConfig {
    const NAME: &'static str = "n_pairs";
    const DEFAULT_DISTANCE: Distance = Distance::dot_product();
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

impl NPairsLossConfig {
    /// The first positive pair of each label, in label order (PML
    /// `convert_to_pos_pairs_with_unique_labels`).
    fn compute(&self, input: &PairInput<'_>) -> Result<Computed, LossError> {
        let pairs = pairs_or_all(input.tuples, input.labels);
        let mut chosen: Vec<(u32, usize, usize)> = Vec::new();
        for (&a, &p) in pairs.a1.iter().zip(&pairs.p) {
            let l = input.labels[a];
            if !chosen.iter().any(|c| c.0 == l) {
                chosen.push((l, a, p));
            }
        }
        chosen.sort_by_key(|c| c.0);
        if chosen.is_empty() {
            return Ok(Computed::empty(1));
        }
        let k = chosen.len();
        let anchors: Vec<usize> = chosen.iter().map(|c| c.1).collect();
        let positives: Vec<usize> = chosen.iter().map(|c| c.2).collect();
        let device = input.mat.device();
        let sub = input
            .mat
            .clone()
            .select(0, index1(&anchors, &device))
            .select(1, index1(&positives, &device));
        let logits = if input.sim { sub } else { sub.neg() };
        let targets: Vec<usize> = (0..k).collect();
        Ok(Computed {
            subs: vec![SubLoss::elements(cross_entropy(logits, &targets))],
            tuples: k,
        })
    }
}
