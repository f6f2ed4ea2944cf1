//! The retrieval metrics a run reports and records, and their names on the command line.

use dml_eval::{AccuracyReport, Metric};
use dml_losses::geodesic::FactorCounts;
use serde::{Deserialize, Serialize};

use crate::error::TrainError;

/// Retrieval metrics of one evaluation (PML `AccuracyCalculator` semantics).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    /// Precision@1.
    pub precision_at_1: f64,
    /// R-Precision.
    pub r_precision: f64,
    /// MAP@R.
    pub map_at_r: f64,
}

impl Metrics {
    /// The reported three of a report (NaN where one was not computed).
    pub fn from_report(report: &AccuracyReport) -> Self {
        let get = |v: Option<f64>| v.unwrap_or(f64::NAN);
        Self {
            precision_at_1: get(report.precision_at_1),
            r_precision: get(report.r_precision),
            map_at_r: get(report.mean_average_precision_at_r),
        }
    }
}

/// One evaluation of a run (a line of `metrics.jsonl`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricsRecord {
    /// Epochs completed when evaluated (0 = before training).
    pub epoch: usize,
    /// The reported split.
    pub split: String,
    /// Metrics on the reported split.
    pub metrics: Metrics,
    /// Metrics on the `val` split, when the dataset has one.
    pub val: Option<Metrics>,
    /// Mean training loss of the epoch (absent before training).
    pub train_loss: Option<f64>,
    /// Learning-rate factor of the step schedule during the epoch.
    pub lr_factor: f64,
    /// Training throughput of the epoch in images per second (timing; not part of the
    /// reproducible state).
    pub images_per_sec: Option<f64>,
    /// What PPGML's geodesic factor did during the epoch (GML losses only): batches computed,
    /// degenerate batches by reason, and the sums of `ϕ_s` and `Σλ`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub geodesic: Option<FactorCounts>,
}

/// The metrics of every reported evaluation (training's `metrics.jsonl`, `eval`'s table by
/// default).
pub const REPORTED: [Metric; 3] = [
    Metric::PrecisionAt1,
    Metric::RPrecision,
    Metric::MeanAveragePrecisionAtR,
];

/// Every metric `dml-eval` computes, as `eval` writes them into `metrics.json`: PML's five k-NN
/// metrics, Recall@1, 2, 4 and 8 (the DML literature's R@K) and NMI / AMI of a k-means clustering.
pub fn all_metrics() -> Vec<Metric> {
    let mut all = Metric::PML_KNN.to_vec();
    all.extend([1, 2, 4, 8].map(Metric::RecallAt));
    all.extend([Metric::Nmi, Metric::Ami]);
    all
}

/// The value of `metric` in `report` (`None` when it was not computed).
pub fn metric_value(report: &AccuracyReport, metric: Metric) -> Option<f64> {
    match metric {
        Metric::PrecisionAt1 => report.precision_at_1,
        Metric::RPrecision => report.r_precision,
        Metric::MeanAveragePrecisionAtR => report.mean_average_precision_at_r,
        Metric::MeanAveragePrecision => report.mean_average_precision,
        Metric::MeanReciprocalRank => report.mean_reciprocal_rank,
        Metric::RecallAt(k) => report.recall_at_k.get(&k).copied(),
        Metric::Nmi => report.nmi,
        Metric::Ami => report.ami,
    }
}

/// The name `eval --metrics` accepts and its table prints for `metric`.
pub fn metric_name(metric: Metric) -> String {
    match metric {
        Metric::PrecisionAt1 => "p@1".into(),
        Metric::RPrecision => "r-precision".into(),
        Metric::MeanAveragePrecisionAtR => "map@r".into(),
        Metric::MeanAveragePrecision => "map".into(),
        Metric::MeanReciprocalRank => "mrr".into(),
        Metric::RecallAt(k) => format!("recall@{k}"),
        Metric::Nmi => "nmi".into(),
        Metric::Ami => "ami".into(),
    }
}

/// Parses `eval --metrics`: a comma-separated list of `p@1`, `r-precision`, `map@r`, `map`, `mrr`,
/// `recall@K` (any K ≥ 1), `nmi`, `ami`, or `all` (every metric of [`all_metrics`]).
pub fn parse_metrics(list: &str) -> Result<Vec<Metric>, TrainError> {
    let mut out = Vec::new();
    for item in list
        .split(',')
        .map(|s| s.trim().to_ascii_lowercase())
        .filter(|s| !s.is_empty())
    {
        let metric = match item.as_str() {
            "all" => {
                out.extend(all_metrics());
                continue;
            }
            "p@1" | "precision@1" => Metric::PrecisionAt1,
            "r-precision" | "r_precision" => Metric::RPrecision,
            "map@r" => Metric::MeanAveragePrecisionAtR,
            "map" => Metric::MeanAveragePrecision,
            "mrr" => Metric::MeanReciprocalRank,
            "nmi" => Metric::Nmi,
            "ami" => Metric::Ami,
            other => match other.strip_prefix("recall@").map(str::parse::<usize>) {
                Some(Ok(k)) if k > 0 => Metric::RecallAt(k),
                _ => {
                    return Err(TrainError::Argument(format!(
                        "--metrics: unknown metric {other:?}; expected p@1, r-precision, map@r, map, mrr, \
                         recall@K, nmi, ami or all"
                    )));
                }
            },
        };
        out.push(metric);
    }
    if out.is_empty() {
        return Err(TrainError::Argument("--metrics: no metric named".into()));
    }
    let mut unique = Vec::new();
    for m in out {
        if !unique.contains(&m) {
            unique.push(m);
        }
    }
    Ok(unique)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric_names_parse_back_and_unknown_ones_are_listed() {
        for m in all_metrics() {
            assert_eq!(parse_metrics(&metric_name(m)).unwrap(), vec![m]);
        }
        assert_eq!(parse_metrics("all").unwrap(), all_metrics());
        assert_eq!(
            parse_metrics("p@1, recall@16,p@1").unwrap(),
            vec![Metric::PrecisionAt1, Metric::RecallAt(16)]
        );
        let e = parse_metrics("p@2").unwrap_err().to_string();
        assert!(e.contains("\"p@2\"") && e.contains("recall@K"), "{e}");
    }
}
