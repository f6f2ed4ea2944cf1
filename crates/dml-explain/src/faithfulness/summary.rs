//! Per-image records and their aggregate over a data set, serialisable for JSON reports.

use serde::{Deserialize, Serialize};

use super::centre_prior::centre_prior;
use super::deletion::deletion_fractions;
use super::error::FaithError;
use super::iou::{DEFAULT_IOU_THRESHOLD, iou_at_threshold};
use super::mask::MaskValue;
use super::pointing::pointing_game;

/// The parameters of a faithfulness evaluation, recorded in its [`FaithfulnessSummary`] so a
/// JSON report says how its numbers were made. Missing keys take the defaults; unknown keys are
/// errors.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FaithfulnessParams {
    /// Threshold fraction of [`iou_at_threshold`]; default [`DEFAULT_IOU_THRESHOLD`] (0.5).
    pub iou_threshold: f64,
    /// Tolerance of [`pointing_game`] in pixels of the map's resolution; default 0 (exact).
    pub pointing_tolerance_px: usize,
    /// Fractions of the deletion curves; default `0.0, 0.1, …, 1.0`.
    pub deletion_fractions: Vec<f64>,
    /// Repeats of the random deletion curve; default 5.
    pub random_repeats: usize,
    /// Seed of the random deletion curve; default 0.
    pub seed: u64,
}

impl Default for FaithfulnessParams {
    fn default() -> Self {
        Self {
            iou_threshold: DEFAULT_IOU_THRESHOLD,
            pointing_tolerance_px: 0,
            deletion_fractions: deletion_fractions(10),
            random_repeats: 5,
            seed: 0,
        }
    }
}

/// The metrics of one image (one explanation map). A metric that was not computed (no mask for
/// this data set, deletion skipped) is `None` and left out of the means.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ImageFaithfulness {
    /// [`pointing_game`] of the method's map.
    pub pointing_hit: Option<bool>,
    /// [`iou_at_threshold`] of the method's map.
    pub iou: Option<f64>,
    /// [`pointing_game`] of the [`centre_prior`] baseline on the same mask.
    pub centre_prior_pointing_hit: Option<bool>,
    /// [`iou_at_threshold`] of the [`centre_prior`] baseline on the same mask.
    pub centre_prior_iou: Option<f64>,
    /// Area under the method's deletion curve ([`super::deletion_curve`]); lower is more faithful.
    pub deletion_auc: Option<f64>,
    /// Area under the random deletion curve ([`super::random_deletion_curve`]) of the same image.
    pub random_deletion_auc: Option<f64>,
}

/// The four localisation metrics of one map (`[h, w]`, finite) against its object mask
/// (`[h, w]`, non-empty): pointing game and IoU of the map and of the centre prior, with the
/// tolerance and threshold of `params`. The deletion fields are left `None` (they need the
/// model; fill them from [`super::deletion_curve`] and [`super::random_deletion_curve`]).
pub fn localisation<M: MaskValue>(
    map: &[f32],
    mask: &[M],
    h: usize,
    w: usize,
    params: &FaithfulnessParams,
) -> Result<ImageFaithfulness, FaithError> {
    let prior = centre_prior(h, w);
    let tolerance = params.pointing_tolerance_px;
    Ok(ImageFaithfulness {
        pointing_hit: Some(pointing_game(map, mask, h, w, tolerance)?),
        iou: Some(iou_at_threshold(map, mask, h, w, params.iou_threshold)?),
        centre_prior_pointing_hit: Some(pointing_game(&prior, mask, h, w, tolerance)?),
        centre_prior_iou: Some(iou_at_threshold(&prior, mask, h, w, params.iou_threshold)?),
        deletion_auc: None,
        random_deletion_auc: None,
    })
}

/// Mean and sample standard deviation of the values one metric took; `mean` is `None` without
/// values and `std` is `None` with fewer than two (JSON `null`, never NaN).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct MeanStd {
    /// How many images had this metric.
    pub count: usize,
    /// The mean over them (a pointing hit counts 1, a miss 0, so this is the hit rate).
    pub mean: Option<f64>,
    /// The sample standard deviation (divisor `count - 1`).
    pub std: Option<f64>,
}

impl MeanStd {
    /// The statistics of `values` (any length).
    pub fn of(values: &[f64]) -> Self {
        let count = values.len();
        if count == 0 {
            return Self::default();
        }
        let mean = values.iter().sum::<f64>() / count as f64;
        let std =
            (count > 1).then(|| (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (count - 1) as f64).sqrt());
        Self {
            count,
            mean: Some(mean),
            std,
        }
    }
}

/// The faithfulness report of a data set: the parameters and, per metric, mean and spread over
/// the images that have it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FaithfulnessSummary {
    /// How the numbers were made.
    pub params: FaithfulnessParams,
    /// Images added, whatever metrics they carry.
    pub images: usize,
    /// Pointing-game hit rate of the method.
    pub pointing_hit_rate: MeanStd,
    /// IoU of the method.
    pub iou: MeanStd,
    /// Pointing-game hit rate of the centre prior (the baseline to beat).
    pub centre_prior_pointing_hit_rate: MeanStd,
    /// IoU of the centre prior.
    pub centre_prior_iou: MeanStd,
    /// Deletion AUC of the method (lower is more faithful).
    pub deletion_auc: MeanStd,
    /// Deletion AUC of random erasure.
    pub random_deletion_auc: MeanStd,
    /// `random_deletion_auc - deletion_auc` per image that has both, paired so the spread is the
    /// spread of the difference; positive means the map is more faithful than random erasure.
    pub deletion_auc_gain: MeanStd,
}

/// Collects [`ImageFaithfulness`] records and summarises them.
#[derive(Debug, Clone, Default)]
pub struct FaithfulnessAccumulator {
    params: FaithfulnessParams,
    records: Vec<ImageFaithfulness>,
}

impl FaithfulnessAccumulator {
    /// An empty accumulator for an evaluation made with `params`.
    pub fn new(params: FaithfulnessParams) -> Self {
        Self {
            params,
            records: Vec::new(),
        }
    }

    /// Adds one image's record.
    pub fn add(&mut self, record: ImageFaithfulness) {
        self.records.push(record);
    }

    /// The records added so far, in order (for a per-image JSON dump).
    pub fn records(&self) -> &[ImageFaithfulness] {
        &self.records
    }

    /// Means and standard deviations over the records so far.
    pub fn summary(&self) -> FaithfulnessSummary {
        let stat = |get: &dyn Fn(&ImageFaithfulness) -> Option<f64>| {
            MeanStd::of(&self.records.iter().filter_map(get).collect::<Vec<_>>())
        };
        let hit = |b: Option<bool>| b.map(|b| if b { 1.0 } else { 0.0 });
        FaithfulnessSummary {
            params: self.params.clone(),
            images: self.records.len(),
            pointing_hit_rate: stat(&|r| hit(r.pointing_hit)),
            iou: stat(&|r| r.iou),
            centre_prior_pointing_hit_rate: stat(&|r| hit(r.centre_prior_pointing_hit)),
            centre_prior_iou: stat(&|r| r.centre_prior_iou),
            deletion_auc: stat(&|r| r.deletion_auc),
            random_deletion_auc: stat(&|r| r.random_deletion_auc),
            deletion_auc_gain: stat(&|r| Some(r.random_deletion_auc? - r.deletion_auc?)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_means_skip_missing_metrics_and_serialise() {
        let mut acc = FaithfulnessAccumulator::new(FaithfulnessParams::default());
        acc.add(ImageFaithfulness {
            pointing_hit: Some(true),
            iou: Some(0.5),
            deletion_auc: Some(1.0),
            random_deletion_auc: Some(4.0),
            ..Default::default()
        });
        acc.add(ImageFaithfulness {
            pointing_hit: Some(false),
            iou: Some(0.25),
            ..Default::default()
        });
        acc.add(ImageFaithfulness {
            pointing_hit: Some(true),
            deletion_auc: Some(3.0),
            random_deletion_auc: Some(4.0),
            ..Default::default()
        });
        let s = acc.summary();
        assert_eq!(s.images, 3);
        assert_eq!(s.pointing_hit_rate.count, 3);
        assert_eq!(s.pointing_hit_rate.mean, Some(2.0 / 3.0));
        assert_eq!(s.iou.mean, Some(0.375));
        assert_eq!(
            s.deletion_auc_gain,
            MeanStd {
                count: 2,
                mean: Some(2.0),
                std: Some(2.0_f64.sqrt())
            }
        );
        assert_eq!(
            s.centre_prior_iou,
            MeanStd {
                count: 0,
                mean: None,
                std: None
            }
        );
        let json = serde_json::to_string(&s).unwrap();
        assert!(
            json.contains("\"centre_prior_iou\":{\"count\":0,\"mean\":null,\"std\":null}"),
            "{json}"
        );
        let back: FaithfulnessSummary = serde_json::from_str(&json).unwrap();
        assert_eq!(back, s);
    }

    #[test]
    fn params_take_defaults_and_reject_unknown_keys() {
        let p: FaithfulnessParams = serde_json::from_str(r#"{"iou_threshold": 0.3}"#).unwrap();
        assert_eq!(
            p,
            FaithfulnessParams {
                iou_threshold: 0.3,
                ..Default::default()
            }
        );
        assert_eq!(p.deletion_fractions.len(), 11);
        assert!(serde_json::from_str::<FaithfulnessParams>(r#"{"iou_treshold": 0.3}"#).is_err());
    }

    #[test]
    fn localisation_scores_the_map_and_the_centre_prior() {
        // 8x8, object in the top-left 3x3 corner; the map peaks inside it, the centre prior at
        // the centre (outside it).
        let (h, w) = (8, 8);
        let mask: Vec<bool> = (0..h * w).map(|i| i / w < 3 && i % w < 3).collect();
        let map: Vec<f32> = (0..h * w).map(|i| if mask[i] { 1.0 } else { 0.0 }).collect();
        let r = localisation(&map, &mask, h, w, &FaithfulnessParams::default()).unwrap();
        assert_eq!(r.pointing_hit, Some(true));
        assert_eq!(r.iou, Some(1.0));
        assert_eq!(r.centre_prior_pointing_hit, Some(false));
        assert!(r.centre_prior_iou.unwrap() < 0.2);
        assert_eq!(r.deletion_auc, None);
    }
}
