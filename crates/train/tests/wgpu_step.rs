//! One training step on wgpu (Mesa lavapipe on a GPU-less machine) agrees with the same
//! step on flex: same starting weights, same batch, same loss value and updated weights.
//!
//! `DML_STEP_DEVICE` names another device to compare with flex (`cuda` in a build with the
//! `cuda` feature, `wgpu:discrete`, …); on a GPU machine the test runs once per device.

mod common;

use burn::module::Module;
use burn::tensor::{Device, Tensor, TensorData};
use dml_train::Learner;
use dml_train::Silent;
use dml_train::device::parse_device;

/// Every float tensor of the model (weights and batch-norm statistics), flattened.
fn weights(learner: &Learner) -> Vec<f32> {
    struct Collect(Vec<f32>);
    impl burn::module::ModuleVisitor for Collect {
        fn visit_float<const D: usize>(&mut self, param: &burn::module::Param<Tensor<D>>) {
            self.0.extend(param.val().into_data().try_to_vec::<f32>().unwrap());
        }
    }
    let mut c = Collect(Vec::new());
    learner.model.valid().visit(&mut c);
    c.0
}

#[test]
fn one_step_on_wgpu_matches_flex() {
    let other = std::env::var("DML_STEP_DEVICE").unwrap_or_else(|_| "wgpu".into());
    let runs = tempfile::tempdir().unwrap();
    // SGD, so that weight differences after the step are gradient differences (Adam's
    // first step moves every weight by ±lr whatever the gradient's size, which turns a
    // rounding difference in a near-zero gradient into a full step of difference).
    let config = common::tiny_config(runs.path(), "wgpu", &["optimizer.name=sgd"]);
    let flex = parse_device("flex").unwrap().autodiff();
    let device = parse_device(&other)
        .unwrap_or_else(|e| panic!("DML_STEP_DEVICE={other:?}: {e}"))
        .autodiff();
    let mut a = Learner::new(&config, 5, &flex, &Silent).unwrap();
    let mut b = Learner::new(&config, 5, &device, &Silent).unwrap();
    // Start from identical weights: flex's initialisation copied onto the other device.
    b.model = b.model.load_record(a.model.valid().into_record());
    assert_eq!(weights(&a), weights(&b));

    let (n, side) = (20usize, 16usize);
    let pixels: Vec<f32> = (0..n * 3 * side * side)
        .map(|i| ((i * 7919) % 997) as f32 / 500.0 - 1.0)
        .collect();
    let labels: Vec<u32> = (0..n as u32).map(|i| i / 4).collect();
    let images = |d: &Device| Tensor::<4>::from_data(TensorData::new(pixels.clone(), [n, 3, side, side]), d);
    let initial = weights(&a);
    let lrs = [1e-2, 1e-2, 1e-2];
    let la = a.step(images(&flex), &labels, 7, lrs).unwrap();
    let lb = b.step(images(&device), &labels, 7, lrs).unwrap();
    assert!(
        (la - lb).abs() <= 1e-4 * la.abs().max(1.0),
        "loss flex {la} vs {other} {lb}"
    );
    let (wa, wb) = (weights(&a), weights(&b));
    assert_eq!(wa.len(), wb.len());
    // f32 convolutions summed in different orders on the two backends: the updated
    // weights (and batch-norm running statistics) agree to 1e-4 absolute, while the step
    // itself moved them by much more.
    let worst = wa.iter().zip(&wb).map(|(x, y)| (x - y).abs()).fold(0.0f32, f32::max);
    let moved = wa
        .iter()
        .zip(&initial)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0f32, f32::max);
    eprintln!("{other}: loss {lb} (flex {la}); largest weight difference {worst:e}, largest step {moved:e}");
    assert!(
        worst < 1e-4,
        "largest weight difference after one step on {other}: {worst}"
    );
    assert!(moved > 100.0 * worst, "the step moved weights by at most {moved}");
    assert!(wa != initial, "the step changed nothing");
}
