//! Stage access for explanations: `forward_from(s, stages[s])` reproduces the last stage for
//! every backbone and stage, stage names resolve (and unknown ones are errors naming the
//! stages), and a head built from PyTorch-layout weights computes `normalize(W u + b)`.

use burn::tensor::{Device, Distribution, Tensor, TensorData};
use dml_models::{BackboneConfig, BnInceptionConfig, EmbeddingHead, Pooling, ResNetConfig, SmallCnnConfig};

fn values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data().iter::<f32>().collect()
}

#[test]
fn forward_from_each_stage_reproduces_the_last_map() {
    let device = Device::flex();
    let backbones = [
        BackboneConfig::SmallCnn(SmallCnnConfig {
            widths: [4, 8, 8, 16],
            ..SmallCnnConfig::default()
        }),
        BackboneConfig::ResNet(ResNetConfig {
            widths: [4, 8, 8, 16],
            ..ResNetConfig::resnet50()
        }),
        BackboneConfig::BnInception(BnInceptionConfig::default()),
    ];
    for config in backbones {
        let backbone = config.init(&device).unwrap();
        let x = Tensor::random([2, 3, 64, 64], Distribution::Normal(0.0, 1.0), &device);
        let maps = backbone.forward_features(x);
        let names = backbone.stage_names();
        assert_eq!(maps.stages.len(), names.len(), "{names:?}");
        let want = values(maps.last().clone());
        for (s, name) in names.iter().enumerate() {
            assert_eq!(backbone.stage_index(name).unwrap(), s);
            let got = values(backbone.forward_from(s, maps.stages[s].clone()));
            assert_eq!(got.len(), want.len(), "{name}");
            let worst = got.iter().zip(&want).fold(0.0f32, |m, (g, w)| m.max((g - w).abs()));
            assert!(worst <= 1e-4, "{name}: forward_from differs by {worst}");
        }
        let e = backbone.stage_index("layer9").unwrap_err().to_string();
        assert!(e.contains("layer9") && e.contains(names[0]), "{e}");
    }
}

#[test]
fn head_from_pytorch_weights_projects_and_normalises() {
    let device = Device::flex();
    // W [D=2, C=3] in nn.Linear's layout, b [2]; the features are constant maps, so GAP = value.
    let w = Tensor::from_data(TensorData::new(vec![1.0f32, 0.0, 2.0, 0.0, 1.0, -1.0], [2, 3]), &device);
    let b = Tensor::from_data(TensorData::new(vec![0.5f32, -0.5], [2]), &device);
    let head = EmbeddingHead::from_weights(w.clone(), b.clone(), Pooling::Avg, true).unwrap();
    let u = [1.0f32, 2.0, 3.0];
    let maps = Tensor::<1>::from_data(TensorData::new(u.to_vec(), [3]), &device)
        .reshape([1, 3, 1, 1])
        .expand([1, 3, 2, 2]);
    // e = W u + b = [1 + 6 + 0.5, 2 - 3 - 0.5] = [7.5, -1.5].
    assert_eq!(values(head.project(maps.clone())), vec![7.5, -1.5]);
    let norm = (7.5f32 * 7.5 + 1.5 * 1.5).sqrt();
    let f = values(head.forward(maps));
    assert!(
        (f[0] - 7.5 / norm).abs() < 1e-6 && (f[1] + 1.5 / norm).abs() < 1e-6,
        "{f:?}"
    );
    let bad = Tensor::from_data(TensorData::new(vec![0.0f32; 3], [3]), &device);
    let e = EmbeddingHead::from_weights(w, bad, Pooling::Avg, true)
        .unwrap_err()
        .to_string();
    assert!(e.contains("[2, 3]") && e.contains("[3]"), "{e}");
}
