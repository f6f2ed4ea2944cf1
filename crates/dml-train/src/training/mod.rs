//! Training: the [`Learner`] (model, loss, optimiser groups, one step) and the loop that drives a
//! run ([`train`]: M-per-class batches, evaluation, best-model selection on `val`, atomic
//! checkpoints and exact resumption), with the parts DIML ([`diml`]), similarity mining
//! ([`mining`]) and AVSL ([`avsl`]) add to the loss, and Adam in one host pass ([`host_adam`]).

pub mod avsl;
pub mod diml;
pub mod host_adam;
mod learner;
pub mod mining;
mod run;
mod summary;

pub use learner::{Learner, StepTimes};
pub use run::train;
pub use summary::{RunOptions, RunSummary};
