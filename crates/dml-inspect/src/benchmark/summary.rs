//! The benchmark's table: every metric's mean over the pairs with a 95 % confidence interval
//! (Student's t), per method and baseline, and its markdown form.

use std::collections::BTreeMap;

use serde::Serialize;
use statrs::distribution::{ContinuousCDF, StudentsT};

use super::types::{METRICS, PairRecord, RANDOMISATION_METRICS, RandomisationRecord, Scores};

/// Metric (or measure) → cell: one row of a table.
pub type Row = BTreeMap<String, Cell>;

/// Method → its row.
pub type Table = BTreeMap<String, Row>;

/// Method → per cascade step, the step's name and its row.
pub type CascadeTable = BTreeMap<String, Vec<(String, Row)>>;

/// One cell of the table.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    /// Mean over the pairs that have the metric.
    pub mean: Option<f64>,
    /// Half-width of the 95 % interval `t₀.₉₇₅,ₙ₋₁ · sd / √n` (none below 2 values).
    pub ci95: Option<f64>,
    /// Pairs averaged.
    pub n: usize,
    /// Why no pair has the metric, when none has (the first reason met).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl Cell {
    /// The cell of `values`, or of none with `reason`.
    pub fn of(values: &[f64], reason: Option<String>) -> Self {
        let n = values.len();
        if n == 0 {
            return Self {
                mean: None,
                ci95: None,
                n,
                reason,
            };
        }
        let mean = values.iter().sum::<f64>() / n as f64;
        let ci95 = (n >= 2).then(|| {
            let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
            let t = StudentsT::new(0.0, 1.0, (n - 1) as f64)
                .map(|d| d.inverse_cdf(0.975))
                .unwrap_or(f64::NAN);
            t * (var / n as f64).sqrt()
        });
        Self {
            mean: Some(mean),
            ci95,
            n,
            reason: None,
        }
    }

    /// `0.423 ± 0.031`, `0.423` (one value) or `n/a`.
    pub fn show(&self) -> String {
        match (self.mean, self.ci95) {
            (Some(m), Some(c)) => format!("{m:.3} ± {c:.3}"),
            (Some(m), None) => format!("{m:.3}"),
            _ => "n/a".into(),
        }
    }
}

/// The cell of `metric` over `scores`.
fn cell<'a>(scores: impl Iterator<Item = &'a Scores>, metric: &str) -> Cell {
    let mut values = Vec::new();
    let mut reason = None;
    for s in scores {
        if let Some(&v) = s.values.get(metric) {
            values.push(v);
        } else if reason.is_none() {
            reason = s.missing.get(metric).cloned();
        }
    }
    Cell::of(&values, reason)
}

/// Method → metric → cell, over every pair of `pairs`.
pub fn table(methods: &[String], pairs: &[PairRecord]) -> Table {
    methods
        .iter()
        .map(|m| {
            let row = METRICS
                .iter()
                .map(|metric| {
                    (
                        metric.name.to_string(),
                        cell(pairs.iter().filter_map(|p| p.methods.get(m)), metric.name),
                    )
                })
                .collect();
            (m.clone(), row)
        })
        .collect()
}

/// Method → step → measure → cell, over every pair of the cascade.
pub fn randomisation_table(methods: &[String], steps: &[String], records: &[RandomisationRecord]) -> CascadeTable {
    methods
        .iter()
        .map(|m| {
            let rows = steps
                .iter()
                .map(|step| {
                    let scores = || {
                        records
                            .iter()
                            .filter(|r| &r.step == step)
                            .filter_map(|r| r.methods.get(m))
                    };
                    let cells = RANDOMISATION_METRICS
                        .iter()
                        .map(|measure| (measure.to_string(), cell(scores(), measure)))
                        .collect();
                    (step.clone(), cells)
                })
                .collect();
            (m.clone(), rows)
        })
        .collect()
}

/// The markdown table: a row per method (then the baselines), a column per metric; `n/a` cells
/// are explained below it, once per reason.
pub fn markdown_table(methods: &[String], table: &Table) -> String {
    let mut out = String::from("| method |");
    for m in &METRICS {
        out.push_str(&format!(" {} |", m.name));
    }
    out.push_str("\n|---|");
    out.push_str(&"---|".repeat(METRICS.len()));
    out.push('\n');
    let mut reasons: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for method in methods {
        out.push_str(&format!("| {method} |"));
        for metric in &METRICS {
            let c = &table[method][metric.name];
            out.push_str(&format!(" {} |", c.show()));
            if let Some(r) = &c.reason {
                let entry = reasons.entry(r.clone()).or_default();
                let name = metric.name.to_string();
                if !entry.contains(&name) {
                    entry.push(name);
                }
            }
        }
        out.push('\n');
    }
    if !reasons.is_empty() {
        out.push_str("\nNot available:\n\n");
        for (reason, metrics) in reasons {
            out.push_str(&format!("- {}: {reason}\n", metrics.join(", ")));
        }
    }
    out
}

/// The randomisation table in markdown: a row per method, a column per cascade step, each cell
/// `Spearman / SSIM` with the trained model's map.
pub fn markdown_randomisation(methods: &[String], steps: &[String], table: &CascadeTable) -> String {
    let mut out = String::from("| method |");
    for s in steps {
        out.push_str(&format!(" {s} |"));
    }
    out.push_str("\n|---|");
    out.push_str(&"---|".repeat(steps.len()));
    out.push('\n');
    for m in methods {
        out.push_str(&format!("| {m} |"));
        for (_, cells) in &table[m] {
            let show = |k: &str| cells[k].mean.map_or("n/a".to_string(), |v| format!("{v:.2}"));
            out.push_str(&format!(" {} / {} |", show("spearman"), show("ssim")));
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The interval of 1, 2, 3: mean 2, sd 1, t(0.975, 2) = 4.302653 → 4.302653 / √3.
    #[test]
    fn the_interval_is_students() {
        let c = Cell::of(&[1.0, 2.0, 3.0], None);
        assert_eq!(c.mean, Some(2.0));
        assert!(
            (c.ci95.unwrap() - 4.302_652_729_7 / 3f64.sqrt()).abs() < 1e-6,
            "{:?}",
            c.ci95
        );
        assert_eq!(Cell::of(&[5.0], None).ci95, None);
        let none = Cell::of(&[], Some("no masks".into()));
        assert_eq!(none.show(), "n/a");
        assert_eq!(none.reason.as_deref(), Some("no masks"));
    }
}
