//! The `[similarity_mining]` section's checks against the rest of a run (the section itself is
//! `dml_explain::SimilarityMiningConfig`).

use dml_explain::{SimilarityMiningConfig, TupleKind};
use dml_losses::LossConfig;

use crate::error::TrainError;

use super::diml::DimlConfig;

/// The losses whose tuples similarity mining follows when `similarity_mining.tuple` is unset.
pub const SUPPORTED: &str = "triplet losses (triplet_margin: triplets) and pair losses (contrastive: positive pairs); \
     other losses need similarity_mining.tuple";

/// The tuple kind mining uses with `loss` (see [`SUPPORTED`]).
pub fn tuple_kind(config: &SimilarityMiningConfig, loss: &LossConfig) -> Result<TupleKind, TrainError> {
    if let Some(kind) = config.tuple {
        return Ok(kind);
    }
    match loss.name() {
        "triplet_margin" => Ok(TupleKind::Triplet),
        "contrastive" => Ok(TupleKind::SiameseSame),
        other => Err(TrainError::Config(format!(
            "similarity_mining.enabled: the {other} loss has no tuple kind of its own; set similarity_mining.tuple \
             (triplet, siamese_same or quadruplet). Supported without it: {SUPPORTED}"
        ))),
    }
}

/// Checks the `[similarity_mining]` section against the rest of the run, naming the key.
pub fn validate(config: &SimilarityMiningConfig, loss: &LossConfig, diml: &DimlConfig) -> Result<(), TrainError> {
    if !config.enabled {
        return Ok(());
    }
    config
        .validate("similarity_mining")
        .map_err(|e| TrainError::Config(e.to_string()))?;
    tuple_kind(config, loss)?;
    if diml.enabled {
        return Err(TrainError::Config(
            "similarity_mining.enabled: cannot be combined with [diml] enabled = true (both reshape the loss); enable one".into(),
        ));
    }
    Ok(())
}
