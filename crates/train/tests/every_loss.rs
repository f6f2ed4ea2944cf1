//! Every loss of the catalogue plugs into the same training loop through the
//! configuration alone and trains one epoch on the synthetic set without a non-finite
//! loss (the loop stops with an error on NaN or infinity, naming epoch and step); the
//! GML losses of PPGML also record their geodesic factor in the epoch's metrics.

mod common;

use dml_losses::LossConfig;
use dml_train::Silent;
use dml_train::{RunOptions, train};

#[test]
fn each_loss_trains_one_epoch_without_nan() {
    let runs = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    for name in LossConfig::names() {
        let loss = format!("loss.name=\"{name}\"");
        let config = common::tiny_config(
            runs.path(),
            name,
            &[
                &loss,
                "miner=none",
                "train.epochs=1",
                "train.samples_per_epoch=100",
                "eval.every=0",
            ],
        );
        match train(&config, &RunOptions::default(), &Silent) {
            Ok(summary) => {
                let last = summary.history.last().unwrap();
                let ok = last.train_loss.is_some_and(f64::is_finite) && last.metrics.precision_at_1.is_finite();
                if !ok {
                    failures.push(format!("{name}: {last:?}"));
                }
                // PPGML's losses record their geodesic factor of every step; no other loss
                // records one.
                let factors_ok = match (name.starts_with("gml_"), &last.geodesic) {
                    (true, Some(g)) => {
                        g.batches > 0 && g.phi_s_sum.is_finite() && g.mean_phi_s().is_some_and(|p| p > 0.0)
                    }
                    (false, None) => true,
                    _ => false,
                };
                if !factors_ok {
                    failures.push(format!("{name}: geodesic factor record {:?}", last.geodesic));
                }
            }
            Err(e) => failures.push(format!("{name}: {e}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} losses failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
