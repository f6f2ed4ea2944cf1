//! BN-Inception's stage shapes (Cadene's `bninception` gives 1024 × 7 × 7 for a 224² input)
//! and its wiring as the `bn_inception` backbone. Weight import and gradients are tested next
//! to the code, where the loaded fields can be inspected.

use std::path::Path;

use burn::tensor::{Device, Distribution, Tensor};
use dml_models::{BackboneConfig, BnInceptionConfig, EmbeddingModelConfig, Pooling};

fn stage_dims(maps: &dml_models::FeatureMaps) -> Vec<[usize; 4]> {
    maps.stages.iter().map(|s| s.dims()).collect()
}

/// The sizes PyTorch's `bninception` produces at 224²: conv1 112, pool1 56 and pool2 28 (with
/// `ceil_mode=True`; rounding down would give 55 and 27), 3c → 14, 4e → 7.
#[test]
fn stages_at_224() {
    let device = Device::flex();
    let model = BnInceptionConfig::default().init(&device).unwrap();
    let images = Tensor::<4>::random([1, 3, 224, 224], Distribution::Normal(0.0, 1.0), &device);
    let maps = model.forward_features(images);
    assert_eq!(
        stage_dims(&maps),
        vec![
            [1, 64, 56, 56],
            [1, 192, 28, 28],
            [1, 320, 28, 28],
            [1, 608, 14, 14],
            [1, 1024, 7, 7]
        ]
    );
    let last: Vec<f32> = maps.last().clone().into_data().try_to_vec::<f32>().unwrap();
    assert!(
        last.iter().all(|v| v.is_finite() && *v >= 0.0),
        "ReLU outputs are finite and ≥ 0"
    );
}

/// Small inputs through the `bn_inception` backbone, batch 2: 64², and 96², whose reduction
/// module 4e halves 6 × 6 to an odd 3 × 3 (its strided convolutions and rounded-up pool agree).
#[test]
fn stages_at_64_and_96_through_the_named_backbone() {
    let device = Device::flex();
    let config = BackboneConfig::from_name("bn_inception").unwrap();
    assert!(BackboneConfig::NAMES.contains(&"bn_inception"));
    assert_eq!(config.out_channels(), 1024);
    let backbone = config.init(&device).unwrap();
    let run = |side: usize| {
        let images = Tensor::<4>::random([2, 3, side, side], Distribution::Normal(0.0, 1.0), &device);
        stage_dims(&backbone.forward_features(images))
    };
    assert_eq!(
        run(64),
        vec![
            [2, 64, 16, 16],
            [2, 192, 8, 8],
            [2, 320, 8, 8],
            [2, 608, 4, 4],
            [2, 1024, 2, 2]
        ]
    );
    assert_eq!(
        run(96),
        vec![
            [2, 64, 24, 24],
            [2, 192, 12, 12],
            [2, 320, 12, 12],
            [2, 608, 6, 6],
            [2, 1024, 3, 3]
        ]
    );
    let mut backbone = backbone.freeze_batchnorm();
    let e = backbone
        .load_pretrained(Path::new("/nonexistent/bn_inception.pth"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("/nonexistent/bn_inception.pth"), "{e}");
}

#[test]
fn embedding_model_on_bn_inception() {
    let device = Device::flex();
    let model = EmbeddingModelConfig {
        backbone: BackboneConfig::from_name("bn_inception").unwrap(),
        dim: 16,
        pooling: Pooling::AvgMax,
        normalize: true,
        freeze_batchnorm: true,
    }
    .init(&device)
    .unwrap();
    let images = Tensor::<4>::random([2, 3, 64, 64], Distribution::Normal(0.0, 1.0), &device);
    let embeddings = model.forward(images);
    assert_eq!(embeddings.dims(), [2, 16]);
    let norms: Vec<f32> = embeddings
        .powf_scalar(2.0)
        .sum_dim(1)
        .into_data()
        .try_to_vec::<f32>()
        .unwrap();
    assert!(norms.iter().all(|n| (n - 1.0).abs() < 1e-4), "{norms:?}");
}
