//! What the benchmark's modules share: its metrics, one map's scores and the per-pair records
//! written to `benchmark.json`.

use std::collections::BTreeMap;

use serde::Serialize;

/// One column of the benchmark's table.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Metric {
    /// Its key in the JSON and the table.
    pub name: &'static str,
    /// What it measures against: `localisation` (the object mask), `complexity` (nothing),
    /// `faithfulness` (the model's score), `parts` (the renderer's parts), `partner` (the map
    /// against another partner).
    pub family: &'static str,
    /// Which way is better (`higher`, `lower`), or `descriptive`.
    pub better: &'static str,
    /// The definition.
    pub definition: &'static str,
}

/// The share of pixels the top-k intersection counts: `k = ⌈0.1·H·W⌉`.
pub const TOP_K_FRACTION: f64 = 0.1;

/// The table's metrics, in column order. Every map is taken as evidence *for* the similarity:
/// negative values (DIML's flows between dissimilar cells) count as 0.
pub const METRICS: [Metric; 15] = [
    Metric {
        name: "pointing",
        family: "localisation",
        better: "higher",
        definition: "1 if a maximum of the query's map lies on the object (Quantus' tie rule), else 0",
    },
    Metric {
        name: "mass",
        family: "localisation",
        better: "higher",
        definition: "relevance mass accuracy: the share of the map's sum inside the object mask",
    },
    Metric {
        name: "rank",
        family: "localisation",
        better: "higher",
        definition: "relevance rank accuracy: the share of the mask covered by the map's |mask| largest pixels",
    },
    Metric {
        name: "auc",
        family: "localisation",
        better: "higher",
        definition: "ROC AUC of the map as a score for the object's pixels",
    },
    Metric {
        name: "top_k",
        family: "localisation",
        better: "higher",
        definition: "the share of the map's k = 10 % largest pixels on the object",
    },
    Metric {
        name: "sparseness",
        family: "complexity",
        better: "descriptive",
        definition: "Gini index of |map| (0 uniform, towards 1 concentrated)",
    },
    Metric {
        name: "entropy",
        family: "complexity",
        better: "descriptive",
        definition: "entropy of |map| / sum as a distribution over pixels (ln(H·W) uniform)",
    },
    Metric {
        name: "road",
        family: "faithfulness",
        better: "higher",
        definition: "ROAD's (AUC_LeRF - AUC_MoRF) / 2 of s(q, r) / s0, pixels removed by noisy linear imputation",
    },
    Metric {
        name: "deletion",
        family: "faithfulness",
        better: "higher",
        definition: "AUC_random - AUC_MoRF: how much faster s(q, r) / s0 falls removing the map's pixels first than in random order",
    },
    Metric {
        name: "insertion",
        family: "faithfulness",
        better: "higher",
        definition: "AUC_insertion - AUC_random: s(q, r) / s0 keeping only the map's most relevant pixels (the rest imputed; the LeRF curve read from its other end) against random pixels",
    },
    Metric {
        name: "part_rho",
        family: "parts",
        better: "higher",
        definition: "Spearman correlation, over the query's parts (3 or more), of the map's sum on each part and the fall of s(q, r) when a counterfactual render removes it",
    },
    Metric {
        name: "differing_mass",
        family: "parts",
        better: "descriptive",
        definition: "different-class pairs: the share of the map's sum on the query's parts in the slots where the two classes differ",
    },
    Metric {
        name: "shared_mass",
        family: "parts",
        better: "higher",
        definition: "same-class pairs: the share of the map's sum on the query's parts (all shared by the partner's class)",
    },
    Metric {
        name: "partner_spearman",
        family: "partner",
        better: "lower",
        definition: "Spearman correlation of the query's map against its positive and against its negative partner (1: the partner changes nothing)",
    },
    Metric {
        name: "partner_ssim",
        family: "partner",
        better: "lower",
        definition: "SSIM of the two min-max normalised maps of the query against its positive and its negative partner",
    },
];

/// The randomisation test's measures, per cascade step.
pub const RANDOMISATION_METRICS: [&str; 2] = ["spearman", "ssim"];

/// A map's scores: a value per metric, or why there is none.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Scores {
    /// Metric → value.
    pub values: BTreeMap<String, f64>,
    /// Metric → why it has no value for this map.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub missing: BTreeMap<String, String>,
}

impl Scores {
    /// Records `metric`'s value, or why there is none (a non-finite value is recorded as missing).
    pub fn set(&mut self, metric: &str, value: Result<f64, String>) {
        match value {
            Ok(v) if v.is_finite() => {
                self.values.insert(metric.into(), v);
            }
            Ok(v) => {
                self.missing.insert(metric.into(), format!("not finite ({v})"));
            }
            Err(reason) => {
                self.missing.insert(metric.into(), reason);
            }
        }
    }
}

/// One explained pair: the query's map of every method and baseline, scored.
#[derive(Debug, Clone, Serialize)]
pub struct PairRecord {
    /// The triplet the pair comes from (its same-class and different-class pair share the query).
    pub triplet: usize,
    /// `same` or `different` class.
    pub relation: &'static str,
    /// The query's manifest path.
    pub query: String,
    /// The partner's manifest path.
    pub partner: String,
    /// `s0 = s(q, r)`, the similarity the maps explain.
    pub similarity: f64,
    /// Parts set: the fall `s0 − s(q without the slot, r)` for every slot the query has a part in.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub part_drops: BTreeMap<String, f64>,
    /// Method or baseline → its scores.
    pub methods: BTreeMap<String, Scores>,
}

/// One step of the randomisation cascade for one pair: every map compared with the trained
/// model's.
#[derive(Debug, Clone, Serialize)]
pub struct RandomisationRecord {
    /// The pair (index into the same-class pairs).
    pub pair: usize,
    /// What is fresh at this step: `head`, then the head and every stage down to this one.
    pub step: String,
    /// Method or baseline → `spearman` and `ssim` against the trained model's map.
    pub methods: BTreeMap<String, Scores>,
}
