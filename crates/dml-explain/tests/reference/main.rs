//! The explanation methods against their oracles: every case of the kinds below in
//! `$DML_REFERENCE_DIR` (default: the workspace's `tests/fixtures/reference`), each failing case
//! named; the folder must hold at least one case of these kinds.
//!
//! - `similarity_attention` (PyTorch; Zheng et al., Eq. 1–3): [`similarity_attention`].
//! - `avsl` (the authors' code, zbr17/AVSL; Zhang et al., Eq. 1–11): [`avsl`].
//! - `smoothgrad` (the authors' explainer, konstantinkobs/DML-analysis; Kobs et al., Eq. 1–2):
//!   [`smoothgrad`].
//! - `saliency_comparison`, `nr_precision`, `mann_whitney` (NumPy / SciPy and the authors' code;
//!   Kobs et al., Sec. 3.1, Eq. 4–5, Sec. 4.2): [`saliency_comparison`], [`nr_precision`],
//!   [`mann_whitney`].
//! - `explanation_metric` (Quantus 0.6), `map_similarity` (SciPy, scikit-image) and
//!   `road_imputation` (ROAD's imputer in pytorch-grad-cam): `dml_explain::metrics`,
//!   [`explanation_metric`], [`map_similarity`], [`road_imputation`].

mod analysis_common;
mod avsl;
mod explanation_metric;
mod mann_whitney;
mod map_similarity;
mod nr_precision;
mod road_imputation;
mod saliency_comparison;
mod similarity_attention;
mod smoothgrad;

use dml_testkit::{Report, cases_or_panic};

const KINDS: [&str; 9] = [
    "similarity_attention",
    "avsl",
    "smoothgrad",
    "saliency_comparison",
    "nr_precision",
    "mann_whitney",
    "explanation_metric",
    "map_similarity",
    "road_imputation",
];

#[test]
fn explanation_cases_match_their_oracles() {
    let mut report = Report::new();
    let mut counts = std::collections::BTreeMap::<String, usize>::new();
    for case in cases_or_panic("reference", &KINDS) {
        *counts.entry(case.kind().to_string()).or_default() += 1;
        let outcome = match case.kind() {
            "similarity_attention" => similarity_attention::run(&case),
            "avsl" => avsl::run(&case),
            "smoothgrad" => smoothgrad::run(&case),
            "saliency_comparison" => analysis_common::run_with(&case, saliency_comparison::run_saliency_comparison),
            "nr_precision" => analysis_common::run_with(&case, nr_precision::run_nr_precision),
            "mann_whitney" => analysis_common::run_with(&case, mann_whitney::run_mann_whitney),
            "explanation_metric" => analysis_common::run_with(&case, explanation_metric::run_explanation_metric),
            "map_similarity" => analysis_common::run_with(&case, map_similarity::run_map_similarity),
            "road_imputation" => analysis_common::run_with(&case, road_imputation::run_road_imputation),
            other => Err(format!("no checker for kind {other}")),
        };
        report.record(&case, outcome);
    }
    eprintln!("cases per kind: {counts:?}");
    report.finish("explanation");
}
