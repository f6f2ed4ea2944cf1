//! Uniformly random triplets.

use rand::SeedableRng;

use super::MineInput;
use crate::error::LossError;
use crate::tuples::{Triplets, Tuples};

dml_config::config! {
    /// Configuration of the random-triplet miner.
    #[derive(Clone, Debug, PartialEq)]
    pub struct RandomTripletsMinerConfig {
        /// Triplets per anchor (without it: the size of the anchor's class, as PML's
        /// `get_random_triplet_indices`).
        pub triplets_per_anchor: Option<usize> = None,
    }
}

impl RandomTripletsMinerConfig {
    pub(super) fn validate(&self) -> Result<(), LossError> {
        if self.triplets_per_anchor == Some(0) {
            return Err(LossError::Config(
                "random_triplets miner: triplets_per_anchor must be positive".into(),
            ));
        }
        Ok(())
    }

    /// Random valid triplets drawn from `seed`.
    pub(super) fn mine(&self, input: &MineInput<'_>) -> Tuples {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(input.seed);
        Tuples::Triplets(Triplets::random(input.labels, self.triplets_per_anchor, None, &mut rng))
    }
}
