//! Signal-to-noise-ratio contrastive loss (Yuan et al. 2019, "Signal-to-Noise Ratio: A Robust
//! Distance Metric for Deep Metric Learning"; PML `SignalToNoiseRatioContrastiveLoss`): the
//! contrastive loss (see `contrastive`) on the SNR distance `var(x_i - x_j) / var(x_i)`.

use super::contrastive::{check_margins, contrastive};
use super::kinds::{Batch, Context, on_pairs, require_distance};
use super::{LossModule, LossOutput, RegisteredLoss};
use crate::distance::Distance;
use crate::error::LossError;
use crate::reducer::Reducer;

dml_config::config! {
    /// Configuration of the SNR-contrastive loss.
    #[derive(Clone, Debug, PartialEq)]
    pub struct SnrContrastiveLossConfig {
        /// Positive pairs closer than this cost nothing (PML's default).
        pub pos_margin: f64 = 0.0,
        /// Negative pairs farther than this cost nothing.
        pub neg_margin: f64 = 1.0,
        /// Distance override; it must be an SNR distance (else the SNR distance on normalised
        /// embeddings).
        pub distance: Option<Distance> = None,
        /// Reducer override (else the average of the non-zero terms, per sub-loss).
        pub reducer: Option<Reducer> = None,
    }
}

/// The SNR-contrastive loss on its own.
pub type SnrContrastiveLoss = LossModule<SnrContrastiveLossConfig>;

impl RegisteredLoss for SnrContrastiveLossConfig {
    const NAME: &'static str = "snr_contrastive";
    const DEFAULT_DISTANCE: Distance = Distance::snr();
    const DEFAULT_REDUCER: Reducer = Reducer::AvgNonZero;
    const PAIR_BASED: bool = true;

    fn distance(&self) -> Option<&Distance> {
        self.distance.as_ref()
    }

    fn reducer(&self) -> Option<&Reducer> {
        self.reducer.as_ref()
    }

    fn validate(&self, distance: &Distance) -> Result<(), LossError> {
        require_distance(
            Self::NAME,
            matches!(distance, Distance::Snr { .. }),
            "the SNR distance",
            distance,
        )?;
        check_margins(self.pos_margin, self.neg_margin)
    }

    fn evaluate(&self, ctx: &Context<'_>, batch: Batch<'_>) -> Result<LossOutput, LossError> {
        on_pairs(self, ctx, batch, |c, input| {
            contrastive(c.pos_margin, c.neg_margin, input)
        })
    }
}
