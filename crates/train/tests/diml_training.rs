//! DIML training (Appendix A.3) through the configuration alone: the margin loss on
//! ½ (global + structural) distance, Multi-Similarity on ½ (global + structural) similarity and
//! ProxyNCA with spatial proxies each train an epoch on the synthetic set; the spatial proxies
//! learn and are checkpointed; unsupported settings fail with errors naming them.

mod common;

use burn::tensor::{Distribution, Tensor};
use dml_train::Silent;
use dml_train::checkpoint::resolve as checkpoint_dir;
use dml_train::{Learner, RunOptions, train};

const DIML: [&str; 4] = [
    "diml.enabled=true",
    "diml.grid=2",
    "train.epochs=1",
    "train.samples_per_epoch=120",
];

#[test]
fn each_diml_loss_trains_an_epoch_and_spatial_proxies_learn() {
    let runs = tempfile::tempdir().unwrap();
    for (name, loss, miner) in [
        ("margin", "loss.name=\"margin\"", "miner.name=\"distance_weighted\""),
        ("ms", "loss.name=\"multi_similarity\"", "miner=none"),
        ("proxy_nca", "loss.name=\"proxy_nca\"", "miner=none"),
    ] {
        let mut sets = DIML.to_vec();
        sets.extend([loss, miner, "eval.every=1"]);
        let config = common::tiny_config(runs.path(), name, &sets);
        let summary = train(&config, &RunOptions::default(), &Silent).unwrap_or_else(|e| panic!("{name}: {e}"));
        let last = summary.history.last().unwrap();
        assert!(
            last.train_loss.is_some_and(f64::is_finite) && last.metrics.precision_at_1.is_finite(),
            "{name}: {last:?}"
        );
        if name == "proxy_nca" {
            // The same seed gives the same initial proxies; after an epoch the checkpointed
            // ones must have moved.
            let dir = checkpoint_dir(&summary.run_dir, "latest", &Silent).unwrap();
            assert!(dir.join(dml_train::checkpoint::DIML_PROXIES_FILE).is_file());
            let device = burn::tensor::Device::flex().autodiff();
            let fresh = Learner::new(&config, 5, &device, &Silent).unwrap();
            let rho0 = fresh.diml.as_ref().unwrap().proxies.as_ref().unwrap().rho.val();
            let loaded = Learner::new(&config, 5, &device, &Silent).unwrap().load(&dir).unwrap();
            let rho1 = loaded.diml.as_ref().unwrap().proxies.as_ref().unwrap().rho.val();
            assert_eq!(rho0.dims(), [5, 4, 32]);
            let moved: f32 = (rho1 - rho0).abs().max().into_scalar();
            assert!(moved > 1e-4, "the spatial proxies did not learn: max change {moved}");
        }
    }
}

#[test]
fn the_structural_term_changes_the_loss() {
    let runs = tempfile::tempdir().unwrap();
    let mut sets = DIML.to_vec();
    sets.extend(["loss.name=\"margin\"", "miner=none"]);
    let config = common::tiny_config(runs.path(), "term", &sets);
    let device = burn::tensor::Device::flex().autodiff();
    let learner = Learner::new(&config, 5, &device, &Silent).unwrap();
    let images = Tensor::<4>::random([8, 3, 24, 24], Distribution::Normal(0.0, 1.0), &device);
    let labels = [0, 0, 1, 1, 2, 2, 3, 3];
    let diml = learner.diml.as_ref().unwrap();
    let with = diml
        .forward(&learner.model, &learner.loss, images.clone(), &labels, None, 0)
        .unwrap();
    let plain = learner
        .loss
        .forward(learner.model.forward(images), &labels, None, 0)
        .unwrap();
    let (a, b): (f32, f32) = (with.loss.into_scalar(), plain.loss.into_scalar());
    assert!(a.is_finite() && b.is_finite());
    assert!((a - b).abs() > 1e-5, "DIML loss {a} equals the global-only loss {b}");
}

#[test]
fn unsupported_diml_settings_are_named() {
    let runs = tempfile::tempdir().unwrap();
    let resolve = |extra: &[&str]| common::resolve(runs.path(), &DIML, extra);
    let e = resolve(&["loss.name=\"proxy_anchor\"", "miner=none"])
        .unwrap_err()
        .to_string();
    assert!(e.contains("diml.enabled") && e.contains("proxy_anchor"), "{e}");
    let e = resolve(&["diml.grid=0"]).unwrap_err().to_string();
    assert!(e.contains("diml.grid"), "{e}");
    let e = resolve(&["diml.eps=-1.0"]).unwrap_err().to_string();
    assert!(e.contains("diml.eps"), "{e}");
    let e = resolve(&["diml.sinkhorn=3"]).unwrap_err().to_string();
    assert!(e.contains("sinkhorn"), "{e}");
}
