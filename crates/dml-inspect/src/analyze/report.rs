//! What `train analyze` is asked ([`AnalyzeRequest`]) and what it computed ([`AnalyzeReport`],
//! written as `analysis.json`, with its rows).

use std::path::PathBuf;

use dml_explain::analysis::MannWhitney;
use dml_explain::saliency::smoothgrad::MapOrder;
use serde::Serialize;

/// What `train analyze` is asked to do.
#[derive(Debug, Clone)]
pub struct AnalyzeRequest {
    /// The run directories (at least two), trained on the same dataset and image size.
    pub runs: Vec<PathBuf>,
    /// Named groups of runs (by run directory name), e.g. `ranking = [a, b]`; the first two are
    /// compared by a Mann–Whitney U test per property.
    pub groups: Vec<(String, Vec<String>)>,
    /// `best`, `latest` or a checkpoint directory of every run.
    pub checkpoint: String,
    /// Device override for every run.
    pub device: Option<String>,
    /// Test images whose saliency is compared.
    pub images: usize,
    /// SmoothGrad samples per image (the paper: 50).
    pub samples: usize,
    /// The post-processing order of the maps.
    pub order: MapOrder,
    /// Seed of the image choice and of the SmoothGrad noise.
    pub seed: u64,
    /// Output directory.
    pub out: PathBuf,
}

/// One model pair of the correlation table.
#[derive(Debug, Clone, Serialize)]
pub struct PairRow {
    /// First model.
    pub a: String,
    /// Second model.
    pub b: String,
    /// `tanh(mean atanh r)` of the per-image Pearson correlations.
    pub mean_r: f64,
    /// `tanh(std atanh r)`.
    pub spread: f64,
    /// Mean Jensen–Shannon divergence in nats (the authors' code).
    pub jsd_nats: f64,
    /// The same in bits (the paper's, bounded by 1).
    pub jsd_bits: f64,
}

/// One model's NR-Precision of one property.
#[derive(Debug, Clone, Serialize)]
pub struct NrRow {
    /// The model.
    pub model: String,
    /// The property column.
    pub property: String,
    /// Mean NR-Precision over the queries (Eq. 5).
    pub nr_precision: f64,
    /// R-Precision of the property (Eq. 4).
    pub r_precision: f64,
    /// `|NR-Precision| > 2.576`.
    pub significant: bool,
}

/// The Mann–Whitney comparison of two groups for one property.
#[derive(Debug, Clone, Serialize)]
pub struct GroupTest {
    /// The property.
    pub property: String,
    /// The first group's name and mean NR-Precision.
    pub first: (String, f64),
    /// The second group's name and mean NR-Precision.
    pub second: (String, f64),
    /// The test on the models' NR-Precision values.
    pub test: MannWhitney,
}

/// Everything `train analyze` computed (`analysis.json`).
#[derive(Debug, Clone, Serialize)]
pub struct AnalyzeReport {
    /// Model names (run directory names), in order.
    pub models: Vec<String>,
    /// Each model's distance, as its loss configuration names it.
    pub distances: Vec<String>,
    /// Test images compared.
    pub images: usize,
    /// SmoothGrad samples per image.
    pub samples: usize,
    /// The post-processing order.
    pub order: MapOrder,
    /// Every model pair.
    pub pairs: Vec<PairRow>,
    /// Every model and property.
    pub nr_precision: Vec<NrRow>,
    /// The group comparisons (when two groups were given).
    pub group_tests: Vec<GroupTest>,
    /// Saliency maps per second over all models.
    pub maps_per_second: f64,
    /// The files written.
    pub files: Vec<PathBuf>,
}
