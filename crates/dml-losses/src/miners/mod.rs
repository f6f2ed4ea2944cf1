//! Miners: select informative pairs or triplets from a detached distance matrix (PML
//! `miners`). Mining runs on the host over `f64` values: it is pure index selection, so it
//! needs no graph, and a few loops over an `[N, N]` matrix are far cheaper than the many
//! small tensor operations that a device-side implementation would need.

mod batch_hard;
mod distance_weighted;
mod multi_similarity;
mod pair_margin;
mod random_triplets;
mod triplet_margin;

pub use batch_hard::BatchHardMinerConfig;
pub use distance_weighted::DistanceWeightedMinerConfig;
pub use multi_similarity::MultiSimilarityMinerConfig;
pub use pair_margin::PairMarginMinerConfig;
pub use random_triplets::RandomTripletsMinerConfig;
pub use triplet_margin::{TripletMarginMinerConfig, TripletType};

use burn::tensor::Tensor;
use serde::{Deserialize, Serialize};

use crate::distance::Distance;
use crate::error::LossError;
use crate::host::HostMatrix;
use crate::tuples::Tuples;

/// A miner as configured in TOML (`[miner] name = "distance_weighted" cutoff = 0.5`).
/// Every parameter is optional and defaults to PML's value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "name", rename_all = "snake_case")]
pub enum MinerConfig {
    /// Triplets that violate a margin (PML `TripletMarginMiner`).
    TripletMargin(TripletMarginMinerConfig),
    /// The hardest positive and hardest negative of every anchor (Hermans et al. 2017,
    /// PML `BatchHardMiner`).
    BatchHard(BatchHardMinerConfig),
    /// Multi-similarity pair mining (Wang et al. 2019, PML `MultiSimilarityMiner`).
    MultiSimilarity(MultiSimilarityMinerConfig),
    /// Positive pairs beyond and negative pairs within a margin (PML `PairMarginMiner`).
    PairMargin(PairMarginMinerConfig),
    /// Distance-weighted negative sampling (Wu et al. 2017, PML `DistanceWeightedMiner`).
    DistanceWeighted(DistanceWeightedMinerConfig),
    /// Uniformly random triplets.
    RandomTriplets(RandomTripletsMinerConfig),
}

/// What a miner sees: a detached matrix of the batch against itself.
pub struct MineInput<'a> {
    /// The `[N, N]` matrix (distances or similarities).
    pub matrix: &'a HostMatrix,
    /// Labels, length N.
    pub labels: &'a [u32],
    /// Embedding dimension (distance-weighted sampling's density depends on it).
    pub dim: usize,
    /// Seed for stochastic miners.
    pub seed: u64,
}

impl MinerConfig {
    /// All valid names.
    pub fn names() -> &'static [&'static str] {
        &[
            "triplet_margin",
            "batch_hard",
            "multi_similarity",
            "pair_margin",
            "distance_weighted",
            "random_triplets",
        ]
    }

    /// The PML-default configuration of a miner, by name.
    pub fn default_for(name: &str) -> Result<MinerConfig, LossError> {
        Ok(match name {
            "triplet_margin" => MinerConfig::TripletMargin(Default::default()),
            "batch_hard" => MinerConfig::BatchHard(Default::default()),
            "multi_similarity" => MinerConfig::MultiSimilarity(Default::default()),
            "pair_margin" => MinerConfig::PairMargin(Default::default()),
            "distance_weighted" => MinerConfig::DistanceWeighted(Default::default()),
            "random_triplets" => MinerConfig::RandomTriplets(Default::default()),
            other => {
                return Err(LossError::Config(format!(
                    "unknown miner `{other}`, expected one of {:?}",
                    Self::names()
                )));
            }
        })
    }

    /// Validates the configuration and builds the miner.
    pub fn init(&self) -> Result<Miner, LossError> {
        let miner = Miner { config: self.clone() };
        miner.distance().validate()?;
        match self {
            MinerConfig::DistanceWeighted(c) => c.validate(&miner.distance())?,
            MinerConfig::MultiSimilarity(c) => c.validate()?,
            MinerConfig::TripletMargin(c) => c.validate()?,
            MinerConfig::RandomTriplets(c) => c.validate()?,
            MinerConfig::BatchHard(_) | MinerConfig::PairMargin(_) => {}
        }
        Ok(miner)
    }
}

/// A validated miner.
#[derive(Clone, Debug)]
pub struct Miner {
    config: MinerConfig,
}

impl Miner {
    /// The configuration it was built from.
    pub fn config(&self) -> &MinerConfig {
        &self.config
    }

    /// The distance the miner ranks with (its own, as in PML; defaults per miner).
    pub fn distance(&self) -> Distance {
        let (own, default) = match &self.config {
            MinerConfig::TripletMargin(c) => (&c.distance, Distance::euclidean()),
            MinerConfig::BatchHard(c) => (&c.distance, Distance::euclidean()),
            MinerConfig::MultiSimilarity(c) => (&c.distance, Distance::cosine()),
            MinerConfig::PairMargin(c) => (&c.distance, Distance::euclidean()),
            MinerConfig::DistanceWeighted(c) => (&c.distance, Distance::euclidean()),
            MinerConfig::RandomTriplets(_) => (&None, Distance::euclidean()),
        };
        own.clone().unwrap_or(default)
    }

    /// Whether the miner ignores the matrix (random sampling needs only labels).
    pub(crate) fn needs_matrix(&self) -> bool {
        !matches!(self.config, MinerConfig::RandomTriplets(_))
    }

    /// Mines tuples from `embeddings` `[N, D]` (detached; no graph is built) and `labels`.
    pub fn mine(&self, embeddings: Tensor<2>, labels: &[u32], seed: u64) -> Result<Tuples, LossError> {
        let [n, dim] = embeddings.dims();
        if labels.len() != n {
            return Err(LossError::Shape(format!("{n} embeddings but {} labels", labels.len())));
        }
        let matrix = if self.needs_matrix() {
            let d = self.distance();
            HostMatrix::from_tensor(d.self_matrix(embeddings.detach()), d.is_similarity())
        } else {
            HostMatrix {
                n,
                values: Vec::new(),
                is_similarity: false,
            }
        };
        Ok(self.mine_matrix(&MineInput {
            matrix: &matrix,
            labels,
            dim,
            seed,
        }))
    }

    /// Mines tuples from a host matrix. For a similarity matrix "closer" means larger.
    pub fn mine_matrix(&self, input: &MineInput<'_>) -> Tuples {
        match &self.config {
            MinerConfig::TripletMargin(c) => c.mine(input),
            MinerConfig::BatchHard(c) => c.mine(input),
            MinerConfig::MultiSimilarity(c) => c.mine(input),
            MinerConfig::PairMargin(c) => c.mine(input),
            MinerConfig::DistanceWeighted(c) => c.mine(input),
            MinerConfig::RandomTriplets(c) => c.mine(input),
        }
    }
}
