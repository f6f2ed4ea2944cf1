//! AVSL's multi-level embedder (Eq. 15–21): the CAM's spatial mean equals the embedding at every
//! level of every backbone, for default and chosen stages; bad stage choices are errors naming them.

use burn::tensor::{Device, Distribution, Tensor};
use dml_models::{AvslEmbedderConfig, BackboneConfig, ResNetConfig, SmallCnnConfig};

fn values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data().iter::<f32>().collect()
}

#[test]
fn cam_spatial_mean_equals_the_embedding_at_every_level() {
    let device = Device::flex();
    let backbones = [
        (
            BackboneConfig::ResNet(ResNetConfig {
                widths: [4, 8, 8, 16],
                ..ResNetConfig::resnet18()
            }),
            vec![],
            ["layer2", "layer3", "layer4"],
        ),
        (
            BackboneConfig::SmallCnn(SmallCnnConfig {
                widths: [4, 8, 8, 16],
                ..SmallCnnConfig::default()
            }),
            vec!["stage1".to_string(), "stage3".to_string(), "stage4".to_string()],
            ["stage1", "stage3", "stage4"],
        ),
    ];
    for (config, stages, want) in backbones {
        let backbone = config.init(&device).unwrap();
        let embedder = AvslEmbedderConfig { stages, dim: 6 }.init(&backbone, &device).unwrap();
        let names: Vec<&str> = embedder.stages.iter().map(|&s| backbone.stage_names()[s]).collect();
        assert_eq!(names, want);
        // Rectangular input: the levels have different, non-square sizes.
        let x = Tensor::random([3, 3, 40, 56], Distribution::Normal(0.0, 1.0), &device);
        let outputs = embedder.forward(&backbone.forward_features(x));
        assert_eq!(outputs.len(), 3);
        for (l, o) in outputs.iter().enumerate() {
            let [b, r, _, _] = o.cam.dims();
            assert_eq!([b, r], [3, 6]);
            let mean = values(o.cam.clone().mean_dim(3).mean_dim(2).reshape([b, r]));
            let e = values(o.embedding.clone());
            let worst = mean.iter().zip(&e).fold(0.0f32, |m, (a, b)| m.max((a - b).abs()));
            assert!(
                worst < 1e-4,
                "{want:?} level {l}: CAM mean differs from the embedding by {worst}"
            );
        }
    }
}

#[test]
fn bad_stage_choices_are_named() {
    let device = Device::flex();
    let backbone = BackboneConfig::from_name("small_cnn").unwrap().init(&device).unwrap();
    let err = |stages: &[&str]| {
        AvslEmbedderConfig {
            stages: stages.iter().map(|s| s.to_string()).collect(),
            dim: 4,
        }
        .init(&backbone, &device)
        .unwrap_err()
        .to_string()
    };
    assert!(err(&["stage2", "layer9"]).contains("layer9"));
    assert!(err(&["stage3", "stage2"]).contains("increasing"));
    assert!(err(&["stage3"]).contains("at least two"));
}
