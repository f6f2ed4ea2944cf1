//! A run whose learning rates explode stops with a divergence error that says where and
//! why, instead of failing later in evaluation or training on garbage; no checkpoint ever
//! holds a non-finite weight, `latest.json` keeps naming the last good epoch, and resuming
//! from it works.

mod common;

use std::path::Path;
use std::sync::{Mutex, MutexGuard, PoisonError};

use burn::module::{Module, ModuleVisitor, Param};
use burn::tensor::Tensor;
use dml_train::Silent;
use dml_train::device::parse_device;
use dml_train::{Learner, RunOptions, TrainConfig, TrainError, checkpoint, train};

/// Serialises the tests of this file: the device's seeded generator is shared by the
/// whole process, so two runs initialising their models at once would interleave its draws
/// and neither would be reproducible.
fn one_at_a_time() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Every float tensor (weights, batch-norm statistics, the loss's β) of a checkpoint,
/// loaded the way `--resume` loads it: whether all of them are finite.
fn checkpoint_is_finite(config: &TrainConfig, dir: &Path) -> bool {
    struct AllFinite(bool);
    impl ModuleVisitor for AllFinite {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            self.0 &= param.val().into_data().iter::<f64>().all(f64::is_finite);
        }
    }
    let device = parse_device("flex").unwrap().autodiff();
    // The synthetic set's training split has five classes.
    let learner = Learner::new(config, 5, &device, &Silent).unwrap().load(dir).unwrap();
    let mut check = AllFinite(true);
    learner.model.valid().visit(&mut check);
    learner.loss.valid().visit(&mut check);
    check.0
}

/// What a diverged run reported.
struct Divergence {
    config: TrainConfig,
    message: String,
    step: usize,
    value: String,
}

/// Runs a tiny 3-epoch run whose first epoch trains at the usual rates and whose schedule
/// multiplies them by 1e12 from epoch 2 on (the backbone and the head then train at 1e9,
/// β at 1e10), which drives the weights to infinity within a few steps. Checks what every
/// divergence must satisfy and returns the details.
fn diverge(name: &str, runs: &Path, extra: &[&str]) -> Divergence {
    let mut sets = vec![
        "train.epochs=3",
        "train.samples_per_epoch=100",
        "schedule.step_epochs=1",
        "schedule.gamma=1e12",
    ];
    sets.extend(extra);
    let config = common::tiny_config(runs, name, &sets);
    let error = train(&config, &RunOptions::default(), &Silent).expect_err("the run must diverge");
    let message = error.to_string();
    println!("{message}");
    let TrainError::Diverged {
        epoch,
        step,
        steps,
        global_step,
        value,
        lrs,
        last_good,
    } = error
    else {
        panic!("expected a divergence error, got: {message}");
    };
    assert_eq!(epoch, 2, "{message}");
    assert_eq!(steps, 5, "{message}");
    assert!((1..=steps).contains(&step), "{message}");
    assert_eq!(global_step, (steps + step) as u64, "{message}");
    assert!(value.contains("NaN") || value.contains("inf"), "{message}");
    assert_eq!(lrs, [1e-3 * 1e12, 1e-3 * 1e12, 1e-2 * 1e12]);
    for part in [
        "epoch 2".to_string(),
        format!("step {step} of 5"),
        format!("global step {global_step}"),
        value.clone(),
        "backbone 1e9".to_string(),
        "head 1e9".to_string(),
        "loss 1e10".to_string(),
    ] {
        assert!(message.contains(&part), "{part:?} missing from: {message}");
    }

    // The first epoch's checkpoint is the latest, it is named in the error, and neither it
    // nor any other checkpoint directory holds a non-finite value.
    let run = config.run_path();
    let latest = checkpoint::pointed(&run, "latest.json")
        .unwrap()
        .expect("epoch 1 was committed");
    assert!(latest.ends_with("checkpoints/epoch-0001"), "{}", latest.display());
    assert_eq!(last_good.as_deref(), Some(latest.as_path()));
    assert!(message.contains(&latest.display().to_string()), "{message}");
    assert_eq!(checkpoint::read_state(&latest).unwrap().epochs_done, 1);
    let mut checkpoints = 0;
    for entry in std::fs::read_dir(run.join("checkpoints")).unwrap() {
        let dir = entry.unwrap().path();
        assert!(
            checkpoint_is_finite(&config, &dir),
            "{} holds non-finite weights",
            dir.display()
        );
        checkpoints += 1;
    }
    assert_eq!(checkpoints, 1);
    Divergence {
        config,
        message,
        step,
        value,
    }
}

#[test]
fn weights_that_explode_under_a_bounded_loss_are_caught_before_the_checkpoint() {
    let _serial = one_at_a_time();
    let runs = tempfile::tempdir().unwrap();
    // The margin loss on L2-normalised embeddings stays finite whatever the weights do, so
    // only the check of the weights at the end of the epoch can catch this run.
    let d = diverge("bounded", runs.path(), &[]);
    assert_eq!(d.step, 5, "{}", d.message);
    assert!(d.value.starts_with("parameter "), "{}", d.message);

    // Resuming restores epoch 1 and replays epoch 2 exactly, so it diverges at the same
    // step with the same message, and still leaves epoch 1 as the latest checkpoint.
    let resumed = RunOptions {
        resume: true,
        ..RunOptions::default()
    };
    let again = train(&d.config, &resumed, &Silent).expect_err("the resumed run must diverge too");
    assert_eq!(again.to_string(), d.message);
    let latest = checkpoint::pointed(&d.config.run_path(), "latest.json")
        .unwrap()
        .unwrap();
    assert!(latest.ends_with("checkpoints/epoch-0001"), "{}", latest.display());
}

#[test]
fn an_unbounded_loss_that_overflows_stops_the_run_at_that_step() {
    let _serial = one_at_a_time();
    let runs = tempfile::tempdir().unwrap();
    // The triplet margin loss on raw embeddings overflows as soon as they do, and the step
    // that sees it stops the run there rather than at the end of the epoch.
    let d = diverge(
        "unbounded",
        runs.path(),
        &["model.normalize=false", "loss.name=triplet_margin", "miner=none"],
    );
    assert!(!d.value.starts_with("parameter "), "{}", d.message);
}
