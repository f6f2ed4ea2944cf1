//! Similarity attention beyond the PyTorch cases: the closed form of `α` equals autodiff's
//! Grad-CAM for every pooling of the workspace's heads (with and without L2), at the last stage of
//! the small CNN and at every stage of a ResNet; the mining loss is finite and reaches the model's
//! parameters through the attention; bad input is a clear error.

use burn::tensor::{Device, Distribution, Tensor};
use dml_explain::{
    AlphaMethod, ExplainError, MiningTuples, SimilarityMiningConfig, TupleKind, min_max_normalize, similarity_attention,
};
use dml_models::{BackboneConfig, EmbeddingModel, EmbeddingModelConfig, Pooling, ResNetConfig, SmallCnnConfig};

fn values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data().iter::<f32>().collect()
}

fn assert_close(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: sizes");
    let scale = want.iter().fold(0.0f32, |m, v| m.max(v.abs())).max(1e-6);
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-4 * scale,
            "{what}[{i}]: closed form {g} vs autodiff {w} (scale {scale})"
        );
    }
}

fn model(backbone: BackboneConfig, pooling: Pooling, normalize: bool, device: &Device) -> EmbeddingModel {
    EmbeddingModelConfig {
        backbone,
        dim: 12,
        pooling,
        normalize,
        freeze_batchnorm: false,
    }
    .init(device)
    .unwrap()
}

fn tiny_resnet() -> BackboneConfig {
    BackboneConfig::ResNet(ResNetConfig {
        widths: [4, 8, 8, 16],
        ..ResNetConfig::resnet18()
    })
}

fn images(n: usize, side: usize, device: &Device) -> Tensor<4> {
    Tensor::random([n, 3, side, side], Distribution::Normal(0.0, 1.0), device)
}

#[test]
fn closed_form_alpha_equals_autodiff_for_every_head() {
    let device = Device::flex().autodiff();
    let small = BackboneConfig::SmallCnn(SmallCnnConfig {
        widths: [4, 8, 8, 16],
        ..SmallCnnConfig::default()
    });
    for pooling in [Pooling::Avg, Pooling::Max, Pooling::AvgMax] {
        for normalize in [true, false] {
            for kind in [TupleKind::Triplet, TupleKind::SiameseSame, TupleKind::Quadruplet] {
                let what = format!("{pooling:?} normalize={normalize} {kind:?}");
                // A randomly initialised 4-8-8-16 network sometimes yields a tuple whose α is
                // exactly zero (measured: in 4 runs of 60, always an average-pooled quadruplet,
                // whose weight vector is a product of three embedding gaps). A comparison of
                // zeros would check nothing, so such a draw is replaced by a fresh model and
                // fresh images.
                let draw = || {
                    let m = model(small.clone(), pooling, normalize, &device);
                    let x = images(kind.size(), 24, &device);
                    let auto = similarity_attention(&m, x.clone(), kind, "stage4", AlphaMethod::Autodiff).unwrap();
                    (m, x, auto)
                };
                let (m, x, auto) = (0..5)
                    .map(|_| draw())
                    .find(|(_, _, auto)| values(auto.alpha.clone()).iter().any(|a| a.abs() > 1e-6))
                    .unwrap_or_else(|| panic!("{what}: alpha is all zero for 5 random models in a row"));
                let closed = similarity_attention(&m, x, kind, "stage4", AlphaMethod::ClosedForm).unwrap();
                assert_close(&values(closed.alpha), &values(auto.alpha), &format!("{what} alpha"));
                assert_close(&values(closed.maps), &values(auto.maps), &format!("{what} maps"));
            }
        }
    }
}

#[test]
fn closed_form_alpha_equals_autodiff_at_every_resnet_stage() {
    let device = Device::flex().autodiff();
    for pooling in [Pooling::Avg, Pooling::Max] {
        let m = model(tiny_resnet(), pooling, true, &device);
        // A rectangular, odd-sized input exercises the transposed strided convolutions' output sizes.
        let x = Tensor::random([3, 3, 37, 45], Distribution::Normal(0.0, 1.0), &device);
        for stage in ["stem", "layer1", "layer2", "layer3", "layer4"] {
            let auto = similarity_attention(&m, x.clone(), TupleKind::Triplet, stage, AlphaMethod::Autodiff).unwrap();
            let closed =
                similarity_attention(&m, x.clone(), TupleKind::Triplet, stage, AlphaMethod::ClosedForm).unwrap();
            let what = format!("{pooling:?} {stage}");
            assert!(
                values(auto.alpha.clone()).iter().any(|a| a.abs() > 1e-7),
                "{what}: alpha is all zero"
            );
            assert_close(&values(closed.alpha), &values(auto.alpha), &format!("{what} alpha"));
        }
    }
}

#[test]
fn attention_maps_are_non_negative_and_normalise_to_the_unit_interval() {
    let device = Device::flex().autodiff();
    let m = model(tiny_resnet(), Pooling::Avg, true, &device);
    let att = similarity_attention(
        &m,
        images(2, 40, &device),
        TupleKind::SiameseDifferent,
        "layer3",
        AlphaMethod::Autodiff,
    )
    .unwrap();
    assert_eq!(att.maps.dims(), [2, 3, 3]);
    assert!(values(att.maps.clone()).iter().all(|&v| v >= 0.0));
    let normalized = values(min_max_normalize(att.maps));
    for image in normalized.chunks(9) {
        let (lo, hi) = image
            .iter()
            .fold((f32::MAX, f32::MIN), |(l, h), &v| (l.min(v), h.max(v)));
        assert!(
            lo.abs() < 1e-6 && ((hi - 1.0).abs() < 1e-6 || hi == 0.0),
            "range [{lo}, {hi}]"
        );
    }
}

#[test]
fn mining_loss_reaches_the_backbone_through_the_attention() {
    let device = Device::flex().autodiff();
    let m = model(tiny_resnet(), Pooling::Avg, true, &device);
    let x = images(6, 32, &device);
    let (embeddings, maps) = m.forward_with_features(x.clone());
    let tuples = MiningTuples {
        kind: TupleKind::Triplet,
        indices: vec![0, 1, 2, 3, 4, 5],
    };
    let mining = SimilarityMiningConfig {
        enabled: true,
        learnable: true,
        ..SimilarityMiningConfig::default()
    }
    .init(&device)
    .unwrap();
    let out = mining.forward(&m, x, embeddings, maps.last().clone(), &tuples).unwrap();
    let loss = values(out.loss.clone())[0];
    assert!(loss.is_finite() && loss >= 0.0, "L_sm = {loss}");
    assert_eq!(out.attention.dims(), [6, 32, 32]);
    let grads = out.loss.backward();
    let head = m.head.weight().grad(&grads).expect("head gradient");
    assert!(values(head).iter().any(|g| g.abs() > 0.0));
    // The learnable mask parameters receive a gradient too.
    let a = mining.a.val().grad(&grads).expect("gradient of a");
    let b = mining.b.val().grad(&grads).expect("gradient of b");
    assert!(values(a)[0].is_finite() && values(b)[0] != 0.0);
}

#[test]
fn bad_input_is_a_clear_error() {
    let device = Device::flex().autodiff();
    let m = model(tiny_resnet(), Pooling::Avg, true, &device);
    let e = similarity_attention(
        &m,
        images(2, 32, &device),
        TupleKind::Triplet,
        "layer4",
        AlphaMethod::Autodiff,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("[2, 3, 32, 32]") && e.contains("anchor, positive, negative"),
        "{e}"
    );
    let e = similarity_attention(
        &m,
        images(3, 32, &device),
        TupleKind::Triplet,
        "layer9",
        AlphaMethod::Autodiff,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("layer9") && e.contains("layer4"), "{e}");
    // Autodiff Grad-CAM on an inference device says what to do; the closed form works there.
    let inference = Device::flex();
    let m = model(tiny_resnet(), Pooling::Avg, true, &inference);
    let err = similarity_attention(
        &m,
        images(3, 32, &inference),
        TupleKind::Triplet,
        "layer3",
        AlphaMethod::Autodiff,
    )
    .unwrap_err();
    assert!(matches!(err, ExplainError::NotAutodiff(_)), "{err}");
    assert!(
        similarity_attention(
            &m,
            images(3, 32, &inference),
            TupleKind::Triplet,
            "layer3",
            AlphaMethod::ClosedForm
        )
        .is_ok()
    );
    // The small CNN has no differentiable inner-stage gradient.
    let small = model(
        BackboneConfig::from_name("small_cnn").unwrap(),
        Pooling::Avg,
        true,
        &inference,
    );
    let e = similarity_attention(
        &small,
        images(3, 32, &inference),
        TupleKind::Triplet,
        "stage2",
        AlphaMethod::ClosedForm,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("ResNet") && e.contains("stage2"), "{e}");
    assert!(
        TupleKind::from_name("pentuplet")
            .unwrap_err()
            .to_string()
            .contains("quadruplet")
    );
}
