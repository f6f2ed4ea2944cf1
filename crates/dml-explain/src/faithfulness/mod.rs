//! Faithfulness and localisation metrics for explanation maps, on host slices and without Burn.
//!
//! The metrics do not care which method made a map (Grad-CAM similarity attention, saliency,
//! AVSL attributions): a map is a row-major `&[f32]` of `h * w` finite values at image
//! resolution, larger meaning "more important for the similarity". Object masks are `&[bool]`
//! or `&[u8]` (`> 0` is object) of the same shape.
//!
//! - Localisation (does the map point at the object?): [`pointing_game`] (Zhang et al.,
//!   *Top-down neural attention by excitation backprop*, ECCV 2016) and [`iou_at_threshold`],
//!   each to be reported next to the same metric of the [`centre_prior()`] baseline, since objects
//!   in retrieval benchmarks are mostly centred and a map that merely peaks in the middle would
//!   otherwise look good.
//! - Faithfulness (does erasing what the map ranks first change the similarity?):
//!   [`deletion_curve`] against [`random_deletion_curve`] (the deletion metric of Petsiuk et
//!   al., *RISE*, BMVC 2018). Lower area under the deletion curve is more faithful.
//! - Reporting: [`ImageFaithfulness`] per image, [`FaithfulnessAccumulator`] and the
//!   serialisable [`FaithfulnessSummary`] over a data set.

mod centre_prior;
mod deletion;
mod error;
mod iou;
mod mask;
mod pointing;
mod summary;

pub use centre_prior::{CENTRE_PRIOR_SIGMA_FRACTION, centre_prior};
pub use deletion::{DeletionCurve, Scorer, deletion_curve, deletion_fractions, random_deletion_curve, trapezoid_auc};
pub(crate) use deletion::{check_fractions, score_batch};
pub(crate) use error::check_len;
pub use error::{DeletionError, FaithError};
pub use iou::{DEFAULT_IOU_THRESHOLD, iou_at_threshold};
pub use mask::MaskValue;
pub use pointing::pointing_game;
pub use summary::{
    FaithfulnessAccumulator, FaithfulnessParams, FaithfulnessSummary, ImageFaithfulness, MeanStd, localisation,
};
