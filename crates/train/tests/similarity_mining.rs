//! Similarity mining in training (Zheng et al., Eq. 3) through the configuration alone: the
//! triplet (with a triplet miner), Siamese (contrastive, positive pairs) and quadruplet
//! configurations each train an epoch; learnable `a`, `b` move and are checkpointed; bad settings
//! are errors naming the key. (Exact resumption is `mining_resume.rs`: a test binary of its own,
//! because runs in parallel threads of one process share the device's random generator.)

mod common;

use burn::tensor::{Distribution, Tensor};
use common::MINING;
use dml_train::Silent;
use dml_train::checkpoint::MINING_FILES;
use dml_train::checkpoint::resolve as checkpoint_dir;
use dml_train::{Learner, RunOptions, train};

#[test]
fn each_tuple_kind_trains_an_epoch_and_learnable_mask_parameters_move() {
    let runs = tempfile::tempdir().unwrap();
    for (name, extra) in [
        (
            "triplet",
            vec![
                "loss.name=\"triplet_margin\"",
                "miner.name=\"triplet_margin\"",
                "similarity_mining.learnable=true",
            ],
        ),
        ("siamese", vec!["loss.name=\"contrastive\"", "miner=none"]),
        (
            "quadruplet",
            vec![
                "loss.name=\"triplet_margin\"",
                "miner=none",
                "similarity_mining.tuple=\"quadruplet\"",
            ],
        ),
    ] {
        let mut sets = MINING.to_vec();
        sets.extend(extra);
        let config = common::tiny_config(runs.path(), name, &sets);
        let summary = train(&config, &RunOptions::default(), &Silent).unwrap_or_else(|e| panic!("{name}: {e}"));
        let last = summary.history.last().unwrap();
        assert!(
            last.train_loss.is_some_and(f64::is_finite) && last.metrics.precision_at_1.is_finite(),
            "{name}: {last:?}"
        );
        let dir = checkpoint_dir(&summary.run_dir, "latest", &Silent).unwrap();
        let learnable = name == "triplet";
        assert_eq!(
            dir.join(MINING_FILES[0]).is_file(),
            learnable,
            "{name}: mining checkpoint"
        );
        if learnable {
            let device = burn::tensor::Device::flex().autodiff();
            let loaded = Learner::new(&config, 5, &device, &Silent).unwrap().load(&dir).unwrap();
            let module = &loaded.mining.as_ref().unwrap().module;
            let a: f32 = module.a.val().into_scalar();
            let b: f32 = module.b.val().into_scalar();
            assert!(
                (a - 10.0).abs() > 1e-5 || (b - 0.5).abs() > 1e-5,
                "a = {a}, b = {b}: the learnable mask parameters did not move"
            );
        }
    }
}

#[test]
fn the_mining_term_adds_to_the_metric_loss() {
    let runs = tempfile::tempdir().unwrap();
    let mut sets = MINING.to_vec();
    sets.extend(["loss.name=\"triplet_margin\"", "miner=none"]);
    let config = common::tiny_config(runs.path(), "term", &sets);
    let device = burn::tensor::Device::flex().autodiff();
    let learner = Learner::new(&config, 5, &device, &Silent).unwrap();
    let images = Tensor::<4>::random([8, 3, 24, 24], Distribution::Normal(0.0, 1.0), &device);
    let labels = [0, 0, 1, 1, 2, 2, 3, 3];
    let (embeddings, features) = learner.model.forward_with_features(images.clone());
    let mining = learner.mining.as_ref().unwrap();
    let tuples = mining.tuples(embeddings.clone(), &labels, None, 0).unwrap();
    // 8 anchors × 1 positive × 6 negatives = 48 triplets, capped at max_tuples.
    assert_eq!(tuples.len(), 6);
    assert!(
        tuples
            .indices
            .chunks(3)
            .all(|t| labels[t[0]] == labels[t[1]] && labels[t[0]] != labels[t[2]])
    );
    let term = mining
        .loss(&learner.model, images, embeddings, &features, &labels, None, 0)
        .unwrap()
        .expect("triplets exist");
    let value: f32 = term.into_scalar();
    assert!(value.is_finite() && value > 0.0, "γ L_sm = {value}");
}

#[test]
fn bad_mining_settings_are_named() {
    let runs = tempfile::tempdir().unwrap();
    let resolve = |extra: &[&str]| {
        common::resolve(runs.path(), &MINING, extra)
            .map(|_| ())
            .unwrap_err()
            .to_string()
    };
    for (extra, wanted) in [
        (vec!["similarity_mining.gamma=-1"], "similarity_mining.gamma"),
        (vec!["similarity_mining.a=0"], "similarity_mining.a"),
        (vec!["similarity_mining.max_tuples=0"], "similarity_mining.max_tuples"),
        (vec!["similarity_mining.tuple=\"siamese_different\""], "positive pairs"),
        (vec!["similarity_mining.gamm=1"], "gamm"),
        // The default margin loss has no tuple kind of its own.
        (vec![], "similarity_mining.tuple"),
        (vec!["loss.name=\"triplet_margin\"", "diml.enabled=true"], "[diml]"),
    ] {
        let e = resolve(&extra);
        assert!(e.contains(wanted), "{extra:?}: {e}");
    }
}
