//! The miner each loss trains with when the configuration names none: the tuple selection of the
//! loss's paper, or no miner at all.
//!
//! Choosing a loss (`--loss`, `--set loss.name=…`, a `[loss]` section with another name) also
//! chooses this miner, unless the same command line or file names a miner itself (`--miner`,
//! `--set miner=…`, a `[miner]` section). One table, so that `docs/training.md`, `--help` and the code
//! cannot disagree.

use dml_losses::{MinerConfig, MultiSimilarityMinerConfig, TripletMarginMinerConfig, TripletType};

/// Every loss with a paper-default miner, the miner's name and why; every other loss of the
/// registry trains without a miner (proxy and classification losses compare with learnt class
/// representatives, the remaining pair losses weight every pair of the batch themselves).
pub const PAPER_MINERS: &[(&str, &str, &str)] = &[
    (
        "margin",
        "distance_weighted",
        "Wu et al. 2017 train the margin loss on distance-weighted samples",
    ),
    (
        "triplet_margin",
        "triplet_margin (semihard)",
        "semi-hard triplets (Schroff et al. 2015, FaceNet), the usual partner of the triplet loss",
    ),
    (
        "multi_similarity",
        "multi_similarity",
        "Wang et al. 2019 mine informative pairs (ε = 0.1) before weighting them",
    ),
    (
        "gml_ms",
        "multi_similarity",
        "GML-MS keeps its multi-similarity baseline's pair mining",
    ),
];

/// The miner that `loss` (a registry name) trains with by default; `None` for no miner.
pub fn paper_miner(loss: &str) -> Option<MinerConfig> {
    match loss {
        "margin" => Some(MinerConfig::DistanceWeighted(Default::default())),
        "triplet_margin" => Some(MinerConfig::TripletMargin(TripletMarginMinerConfig {
            type_of_triplets: TripletType::Semihard,
            ..TripletMarginMinerConfig::default()
        })),
        "multi_similarity" | "gml_ms" => Some(MinerConfig::MultiSimilarity(MultiSimilarityMinerConfig::default())),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_and_the_function_agree_and_name_registered_losses() {
        for name in dml_losses::LossConfig::names() {
            let listed = PAPER_MINERS.iter().find(|(loss, _, _)| loss == name);
            let miner = paper_miner(name);
            assert_eq!(listed.is_some(), miner.is_some(), "{name}");
            if let (Some((_, miner_name, _)), Some(miner)) = (listed, miner) {
                let toml = toml::Value::try_from(&miner).unwrap();
                let actual = toml["name"].as_str().unwrap();
                assert!(miner_name.starts_with(actual), "{name}: {miner_name} vs {actual}");
                miner.init().unwrap();
            }
        }
        for (loss, _, _) in PAPER_MINERS {
            assert!(dml_losses::LossConfig::names().contains(loss), "{loss}");
        }
    }
}
