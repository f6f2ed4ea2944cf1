//! The files of the analysis: the CSV tables, the correlation heat map, the saliency grid,
//! `report.md` and `analysis.json`.

use std::path::{Path, PathBuf};

use dml_explain::analysis::ComparisonMatrix;
use dml_explain::render::{GridRow, ValueRange, denormalize, map_grid, matrix_heatmap, save_png_atomic};
use dml_explain::saliency::smoothgrad::MapOrder;
use dml_train::config::DataConfig;

use crate::error::InspectError;
use crate::io::write_json;

use super::report::{AnalyzeReport, NrRow, PairRow};
use super::saliency::Saliency;

/// Writes `text` to `path` atomically.
fn write_text(path: &Path, text: &str) -> Result<(), InspectError> {
    dml_data::write_atomic(path, text.as_bytes()).map_err(|e| InspectError::io(path, e))
}

/// `saliency_pairs.csv`: one row per model pair.
pub(super) fn pairs_csv(out: &Path, pairs: &[PairRow]) -> Result<PathBuf, InspectError> {
    let mut csv = String::from("model_a,model_b,mean_r,spread,jsd_nats,jsd_bits\n");
    for p in pairs {
        csv += &format!(
            "{},{},{},{},{},{}\n",
            p.a, p.b, p.mean_r, p.spread, p.jsd_nats, p.jsd_bits
        );
    }
    let path = out.join("saliency_pairs.csv");
    write_text(&path, &csv)?;
    Ok(path)
}

/// `nr_precision.csv`: one row per model and property.
pub(super) fn nr_csv(out: &Path, rows: &[NrRow]) -> Result<PathBuf, InspectError> {
    let mut csv = String::from("model,property,nr_precision,r_precision,significant\n");
    for r in rows {
        csv += &format!(
            "{},{},{},{},{}\n",
            r.model, r.property, r.nr_precision, r.r_precision, r.significant
        );
    }
    let path = out.join("nr_precision.csv");
    write_text(&path, &csv)?;
    Ok(path)
}

/// `saliency_correlation.png`: the models' mean saliency correlations as a heat map (its scale from
/// the lowest correlation, or 0, to 1).
pub(super) fn correlation_heatmap(
    out: &Path,
    matrix: &ComparisonMatrix,
    names: &[String],
) -> Result<PathBuf, InspectError> {
    let n = names.len();
    let correlations: Vec<f32> = (0..n * n)
        .map(|k| matrix.correlation_at(k / n, k % n).mean as f32)
        .collect();
    let low = correlations.iter().copied().fold(1.0f32, f32::min).min(0.0);
    let range = ValueRange::new(low, 1.0)?;
    let heat = matrix_heatmap(&correlations, names, range, 72, 2)?;
    let path = out.join("saliency_correlation.png");
    save_png_atomic(&heat, &path)?;
    Ok(path)
}

/// `saliency_grid.png`: the first (at most six) images in rows, each model's map in the columns.
pub(super) fn saliency_grid(
    out: &Path,
    saliency: &Saliency,
    data: &DataConfig,
    names: &[String],
) -> Result<PathBuf, InspectError> {
    let shown = saliency.images.len().min(6);
    let rgb: Vec<image::RgbImage> = saliency.images[..shown]
        .iter()
        .map(|(v, h, w)| denormalize(v, *h, *w, data.mean, data.std))
        .collect::<Result<_, _>>()?;
    let rows: Vec<GridRow> = (0..shown)
        .map(|k| GridRow {
            image: &rgb[k],
            maps: saliency.maps.iter().map(|m| m[k].as_slice()).collect(),
        })
        .collect();
    let grid = map_grid(&rows, names, 144, 1)?;
    let path = out.join("saliency_grid.png");
    save_png_atomic(&grid, &path)?;
    Ok(path)
}

/// `report.md` and `analysis.json` (the report as it stands, without these two files); returns
/// both paths.
pub(super) fn summaries(
    out: &Path,
    report: &AnalyzeReport,
    properties: &[String],
) -> Result<[PathBuf; 2], InspectError> {
    let path = out.join("report.md");
    write_text(&path, &markdown(report, properties))?;
    let json = out.join("analysis.json");
    write_json(&json, report)?;
    Ok([path, json])
}

/// `report.md`: the Table 2 and Table 6 analogues and the group tests.
fn markdown(r: &AnalyzeReport, properties: &[String]) -> String {
    let mut s = format!(
        "# Do the models learn similar features?\n\n{} models, SmoothGrad saliency ({} samples, {} order) on {} test images \
         against a black image, each under its own distance.\n\n## Saliency similarity (Kobs et al., Table 2)\n\n\
         | model A | model B | Pearson r (Fisher mean ± spread) | JSD (bits) | JSD (nats) |\n|---|---|---|---|---|\n",
        r.models.len(),
        r.samples,
        match r.order {
            MapOrder::Code => "the code's",
            MapOrder::Paper => "the paper's",
        },
        r.images
    );
    for p in &r.pairs {
        s += &format!(
            "| {} | {} | {:.3} ± {:.3} | {:.4} | {:.4} |\n",
            p.a, p.b, p.mean_r, p.spread, p.jsd_bits, p.jsd_nats
        );
    }
    s += "\n## NR-Precision of the image properties (Kobs et al., Table 6)\n\n";
    s += "Values beyond ±2.576 (marked \\*) differ from chance at the 1 % level.\n\n| model |";
    for p in properties {
        s += &format!(" {p} |");
    }
    s += "\n|---|";
    s += &"---|".repeat(properties.len());
    s += "\n";
    for m in &r.models {
        s += &format!("| {m} |");
        for p in properties {
            if let Some(row) = r.nr_precision.iter().find(|x| &x.model == m && &x.property == p) {
                let star = if row.significant { "\\*" } else { "" };
                s += &format!(" {:.2}{star} |", row.nr_precision);
            }
        }
        s += "\n";
    }
    if !r.group_tests.is_empty() {
        s += "\n## Groups (Mann–Whitney U, two-sided)\n\n| property | group A (mean NR) | group B (mean NR) | U | p |\n|---|---|---|---|---|\n";
        for t in &r.group_tests {
            s += &format!(
                "| {} | {} ({:.2}) | {} ({:.2}) | {:.1} | {:.3} |\n",
                t.property, t.first.0, t.first.1, t.second.0, t.second.1, t.test.u1, t.test.p_two_sided
            );
        }
    }
    s += &format!("\nSaliency maps per second: {:.1}.\n", r.maps_per_second);
    s
}
