//! Cascading model-parameter randomisation (Adebayo et al., *Sanity Checks for Saliency Maps*,
//! NeurIPS 2018, Sec. 3.1): the trained weights are replaced by fresh ones from the top of the
//! network down, the head first, then the backbone's stages from the last to the first. An
//! explanation whose maps stay the same while the weights it explains are destroyed is not
//! explaining the model.

use crate::model::{Backbone, EmbeddingModel};

impl Backbone {
    /// `self` with stage `stage` (see [`Backbone::stage_names`]) taken from `other`, a backbone of
    /// the same architecture and widths.
    ///
    /// # Panics
    /// When the two backbones are of different architectures, or `stage` is not a stage.
    pub fn with_stage_from(self, stage: usize, other: &Backbone) -> Backbone {
        match (self, other) {
            (Backbone::SmallCnn(m), Backbone::SmallCnn(o)) => Backbone::SmallCnn(m.with_stage_from(stage, o)),
            (Backbone::ResNet(m), Backbone::ResNet(o)) => Backbone::ResNet(m.with_stage_from(stage, o)),
            (Backbone::BnInception(m), Backbone::BnInception(o)) => Backbone::BnInception(m.with_stage_from(stage, o)),
            _ => panic!("with_stage_from: the two backbones are of different architectures"),
        }
    }
}

impl EmbeddingModel {
    /// The names of the cascade's steps after the trained model: `head`, then the backbone's
    /// stages from the last to the first (`head`, `stage4` … `stage1` for the small CNN).
    pub fn cascade_steps(&self) -> Vec<String> {
        std::iter::once("head".to_string())
            .chain(self.backbone.stage_names().iter().rev().map(|s| s.to_string()))
            .collect()
    }

    /// Step `step` of the cascade (`0..=cascade_steps().len()`): `self` (trained) with the head and
    /// the last `step − 1` backbone stages taken from `fresh` (the same configuration with fresh
    /// weights); step 0 is `self` unchanged, the last step has no trained weight left.
    ///
    /// # Panics
    /// When `fresh` has another architecture, or `step` exceeds the number of steps.
    pub fn cascade_randomised(&self, step: usize, fresh: &EmbeddingModel) -> EmbeddingModel {
        let stages = self.backbone.stage_names().len();
        assert!(step <= stages + 1, "the cascade has {} steps, not {step}", stages + 1);
        let mut model = self.clone();
        if step >= 1 {
            model.head = fresh.head.clone();
        }
        for k in 0..step.saturating_sub(1) {
            model.backbone = model.backbone.with_stage_from(stages - 1 - k, &fresh.backbone);
        }
        model
    }
}

#[cfg(test)]
mod tests {
    use burn::tensor::{Device, Distribution, Tensor};

    use crate::model::{BackboneConfig, EmbeddingModelConfig};
    use crate::{Pooling, SmallCnnConfig};

    fn model(seed: u64) -> crate::EmbeddingModel {
        let device = Device::flex();
        device.seed(seed);
        EmbeddingModelConfig {
            backbone: BackboneConfig::SmallCnn(SmallCnnConfig {
                widths: [4, 4, 8, 8],
                ..SmallCnnConfig::default()
            }),
            dim: 6,
            pooling: Pooling::Avg,
            normalize: true,
            freeze_batchnorm: false,
        }
        .init(&device)
        .unwrap()
    }

    fn stage_outputs(m: &crate::EmbeddingModel, x: Tensor<4>) -> Vec<Vec<f32>> {
        let (e, maps) = m.forward_with_features(x);
        maps.stages
            .into_iter()
            .map(|t| t.into_data().try_to_vec::<f32>().unwrap())
            .chain(std::iter::once(e.into_data().try_to_vec::<f32>().unwrap()))
            .collect()
    }

    /// Step `k` changes exactly the head and the last `k − 1` stages: every earlier stage's output is
    /// the trained model's, every later one (and the embedding) differs.
    #[test]
    fn each_step_replaces_the_head_then_one_more_stage_from_the_top() {
        let (trained, fresh) = (model(1), model(2));
        assert_eq!(
            trained.cascade_steps(),
            ["head", "stage4", "stage3", "stage2", "stage1"]
        );
        let device = Device::flex();
        device.seed(3);
        let x = Tensor::<4>::random([2, 3, 16, 16], Distribution::Normal(0.0, 1.0), &device);
        let reference = stage_outputs(&trained, x.clone());
        for step in 0..=5 {
            let out = stage_outputs(&trained.cascade_randomised(step, &fresh), x.clone());
            let randomised_stages = step.saturating_sub(1);
            for (s, (a, b)) in reference.iter().zip(&out).enumerate() {
                let same = a == b;
                let expected_same = if s == 4 { step == 0 } else { s < 4 - randomised_stages };
                assert_eq!(same, expected_same, "step {step}, output {s}");
            }
        }
    }
}
