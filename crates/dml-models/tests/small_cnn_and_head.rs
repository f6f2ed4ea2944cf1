//! The small CNN's stage shapes and the embedding head's pooling and normalisation.

use burn::tensor::{Device, Tensor, TensorData};
use dml_models::{EmbeddingHeadConfig, Pooling, SmallCnnConfig};

fn values(t: Tensor<2>) -> Vec<f32> {
    t.into_data().try_to_vec::<f32>().unwrap()
}

#[test]
fn small_cnn_returns_four_stages() {
    let device = Device::flex();
    let cnn = SmallCnnConfig::default().init(&device).unwrap();
    let maps = cnn.forward_features(Tensor::<4>::ones([2, 3, 28, 28], &device));
    let dims: Vec<[usize; 4]> = maps.stages.iter().map(|s| s.dims()).collect();
    assert_eq!(
        dims,
        vec![[2, 32, 28, 28], [2, 64, 14, 14], [2, 128, 7, 7], [2, 256, 3, 3]]
    );
    assert!(
        SmallCnnConfig {
            in_channels: 3,
            widths: [8, 0, 8, 8]
        }
        .init(&device)
        .is_err()
    );
}

#[test]
fn pooling_matches_hand_computed_values() {
    let device = Device::flex();
    // One image, two channels of 2×2: channel 0 = [1, 2, 3, 6], channel 1 = [-1, -2, -3, -6].
    let features = Tensor::<4>::from_data(
        TensorData::new(vec![1f32, 2., 3., 6., -1., -2., -3., -6.], [1, 2, 2, 2]),
        &device,
    );
    let head = |pooling| {
        EmbeddingHeadConfig {
            in_channels: 2,
            dim: 3,
            pooling,
            normalize: true,
        }
        .init(&device)
        .unwrap()
    };
    assert_eq!(values(head(Pooling::Avg).pool(features.clone())), vec![3.0, -3.0]);
    assert_eq!(values(head(Pooling::Max).pool(features.clone())), vec![6.0, -1.0]);
    assert_eq!(values(head(Pooling::AvgMax).pool(features.clone())), vec![9.0, -4.0]);
    // Normalised embeddings have unit rows.
    let batch = Tensor::<4>::random([5, 2, 3, 3], burn::tensor::Distribution::Normal(0.0, 1.0), &device);
    let embeddings = values(head(Pooling::AvgMax).forward(batch));
    for row in embeddings.chunks(3) {
        let norm: f32 = row.iter().map(|v| v * v).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "{row:?}");
    }
}

#[test]
fn frozen_batchnorm_keeps_running_statistics_and_gets_no_gradient() {
    use burn::module::Module;
    use dml_models::{BackboneConfig, EmbeddingModelConfig};
    let device = Device::flex().autodiff();
    let config = |freeze| EmbeddingModelConfig {
        backbone: BackboneConfig::from_name("small_cnn").unwrap(),
        dim: 8,
        pooling: Pooling::Avg,
        normalize: true,
        freeze_batchnorm: freeze,
    };
    let images = Tensor::<4>::random([4, 3, 12, 12], burn::tensor::Distribution::Normal(2.0, 3.0), &device);
    for freeze in [false, true] {
        let model = config(freeze).init(&device).unwrap();
        // A training-mode batch norm normalises with the batch statistics, a frozen one with
        // the running statistics (mean 0, variance 1 at init): the outputs differ.
        let before: Vec<u8> = model.valid().into_record().into_bytes().unwrap().to_vec();
        let (emb, _) = model.forward_with_features(images.clone());
        let grads = emb.sum().backward();
        let after: Vec<u8> = model.valid().into_record().into_bytes().unwrap().to_vec();
        // Running statistics are updated by a training-mode forward pass only (`valid` syncs
        // the pending running-state update before the record is taken).
        assert_eq!(
            before == after,
            freeze,
            "freeze = {freeze}: running statistics changed = {}",
            before != after
        );
        let mut params = 0;
        let mut with_grad = 0;
        model.backbone.visit(&mut CountGrads {
            grads: &grads,
            params: &mut params,
            with_grad: &mut with_grad,
        });
        // The small CNN's convolutions have no bias: 4 conv weights, 4 × (gamma, beta) and
        // 4 × (running mean, running variance); the running statistics never get a gradient.
        assert_eq!(params, 20);
        assert_eq!(with_grad, if freeze { 4 } else { 12 }, "freeze = {freeze}");
    }
}

struct CountGrads<'a> {
    grads: &'a burn::tensor::Gradients,
    params: &'a mut usize,
    with_grad: &'a mut usize,
}

impl burn::module::ModuleVisitor for CountGrads<'_> {
    fn visit_float<const D: usize>(&mut self, param: &burn::module::Param<Tensor<D>>) {
        *self.params += 1;
        if param.val().grad(self.grads).is_some() {
            *self.with_grad += 1;
        }
    }
}
