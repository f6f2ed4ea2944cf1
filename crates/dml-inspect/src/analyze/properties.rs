//! The embedding side of the analysis: NR-Precision of the class and of every property column of
//! the manifest on each model's test embeddings (Kobs et al., Table 6), and the Mann–Whitney U test
//! between two groups of models.

use std::collections::BTreeMap;
use std::sync::Arc;

use dml_data::{ImageDataset, Manifest};
use dml_explain::analysis::{NrPrecision, mann_whitney_u, nr_precision_many};
use dml_train::{Progress, RunModel, retrieval};

use crate::error::InspectError;

use super::report::{GroupTest, NrRow};

/// The properties compared: the class (the positive reference: the synthetic set's shape), then
/// every property column (an invisible one such as the synthetic set's `control` is the negative
/// reference).
pub(super) fn names(manifest: &Manifest) -> Vec<String> {
    let mut properties = vec!["class".to_string()];
    properties.extend(manifest.property_names.iter().cloned());
    properties
}

/// Each test image's value of every property, as dense codes in order of first appearance:
/// `codes[property][item]`.
fn codes(manifest: &Manifest, test: &ImageDataset, properties: &[String]) -> Vec<Vec<u32>> {
    (0..properties.len())
        .map(|p| {
            let mut index = BTreeMap::<&str, u32>::new();
            (0..test.len())
                .map(|item| {
                    let record = &manifest.records[test.record_index(item)];
                    let value = if p == 0 {
                        record.class_name.as_str()
                    } else {
                        record.properties[p - 1].as_str()
                    };
                    let next = index.len() as u32;
                    *index.entry(value).or_insert(next)
                })
                .collect()
        })
        .collect()
}

/// `nr[model][property]`: NR-Precision of every property on each run's test embeddings.
pub(super) fn nr_precision(
    runs: &[RunModel],
    manifest: &Manifest,
    test: &Arc<ImageDataset>,
    properties: &[String],
    progress: &dyn Progress,
) -> Result<Vec<Vec<NrPrecision>>, InspectError> {
    let codes = codes(manifest, test, properties);
    let columns: Vec<&[u32]> = codes.iter().map(Vec::as_slice).collect();
    let bar = progress.bar(runs.len(), "embeddings");
    let mut nr = Vec::with_capacity(runs.len());
    for run in runs {
        let e = retrieval::embed(
            &run.model,
            test,
            run.config.eval.batch_size,
            run.config.data.threads,
            &run.device,
            None,
        )?;
        let values = if properties.is_empty() {
            Vec::new()
        } else {
            nr_precision_many(&e.data, e.dim, &columns).map_err(|err| InspectError::statistic("NR-Precision", err))?
        };
        nr.push(values);
        bar.step(None);
    }
    bar.finish();
    Ok(nr)
}

/// One row per model and property.
pub(super) fn nr_rows(names: &[String], properties: &[String], nr: &[Vec<NrPrecision>]) -> Vec<NrRow> {
    names
        .iter()
        .zip(nr)
        .flat_map(|(model, values)| {
            properties.iter().zip(values).map(move |(property, v)| NrRow {
                model: model.clone(),
                property: property.clone(),
                nr_precision: v.nr_precision,
                r_precision: v.r_precision,
                significant: v.significant,
            })
        })
        .collect()
}

/// The Mann–Whitney U test of every property between the first two `groups` (none with fewer).
pub(super) fn group_tests(
    groups: &[(String, Vec<String>)],
    names: &[String],
    properties: &[String],
    nr: &[Vec<NrPrecision>],
) -> Result<Vec<GroupTest>, InspectError> {
    let [(first, a), (second, b), ..] = groups else {
        return Ok(Vec::new());
    };
    let of = |members: &[String], p: usize| -> Vec<f64> {
        members
            .iter()
            .map(|m| nr[names.iter().position(|n| n == m).expect("validated by checked_names")][p].nr_precision)
            .collect()
    };
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let mut tests = Vec::new();
    for (p, property) in properties.iter().enumerate() {
        let (x, y) = (of(a, p), of(b, p));
        let test = mann_whitney_u(&x, &y).map_err(|e| InspectError::statistic("Mann-Whitney U", e))?;
        tests.push(GroupTest {
            property: property.clone(),
            first: (first.clone(), mean(&x)),
            second: (second.clone(), mean(&y)),
            test,
        });
    }
    Ok(tests)
}
