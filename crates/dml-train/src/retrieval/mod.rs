//! Retrieval evaluation: embedding a split with a model ([`embed`]), scoring it ([`score`]), and
//! re-ranking a query's neighbours by DIML's structural similarity ([`rerank`]) or AVSL's overall
//! distance `d̂` ([`avsl`]).

pub mod avsl;
pub mod embed;
pub mod rerank;
pub mod score;

pub use embed::{LocalEmbeddings, SplitEmbeddings, each_batch, embed};
pub use score::{accuracy_config, distance_for, evaluate, score, score_report};
