//! What a benchmark's set knows about its images: object masks (the rendered sets), and for the
//! parts set each part slot's mask, the class's parts and counterfactual renders with a slot
//! removed (FunnyBirds' single-deletion ground truth, Hesse et al., ICCV 2023).

use std::path::Path;

use dml_data::{Manifest, Pipeline, Record, TransformConfig};
use dml_datasets::synth::parts::labels::{read_part_mask, slot_view};
use dml_datasets::synth::parts::{Combination, Edit, PartType, PartsConfig, Slot, render_counterfactual};
use dml_datasets::synth::{MASKS_DIR, mask_path, read_mask};
use dml_train::TrainConfig;
use rand::SeedableRng;

use crate::error::InspectError;
use crate::faithfulness::mask_through;

/// The ground truth of one set.
pub(super) enum Truth {
    /// No masks: only the model-side metrics apply; the reason names the set.
    None(String),
    /// Object masks (`masks/<image>.png`), but no parts.
    Object,
    /// The parts set of this configuration: object and slot masks, counterfactual renders.
    Parts(PartsConfig),
}

/// One query's parts: each slot's mask through the evaluation geometry and its part type.
pub(super) struct QueryParts {
    /// `[H, W]` per slot, in [`Slot::ALL`] order.
    pub masks: Vec<Vec<bool>>,
    /// The part in every slot (the image's class's combination).
    pub parts: Combination,
}

/// Reads a set's masks and renders its counterfactuals as the run's evaluation transform sees them.
pub(super) struct GroundTruth {
    pub truth: Truth,
    root: std::path::PathBuf,
    pipeline: Pipeline,
    geometry: Pipeline,
}

impl GroundTruth {
    /// The ground truth of the set `config` names, whose manifest is `manifest`.
    pub(super) fn new(config: &TrainConfig, manifest: &Manifest, pipeline: &Pipeline) -> Result<Self, InspectError> {
        let data = &config.data;
        let truth = if data.dataset == "synth-parts" {
            Truth::Parts(PartsConfig {
                n: data.synth_images,
                seed: 0,
                size: data.synth_size,
            })
        } else if manifest.root.join(MASKS_DIR).is_dir() {
            Truth::Object
        } else {
            Truth::None(format!(
                "the set {} has no object masks ({} is missing)",
                data.dataset,
                manifest.root.join(MASKS_DIR).display()
            ))
        };
        let transform = dml_train::data::eval_transform(data);
        let geometry = Pipeline::new(TransformConfig {
            mean: [0.0; 3],
            std: [1.0; 3],
            ..transform
        })?;
        Ok(Self {
            truth,
            root: manifest.root.clone(),
            pipeline: pipeline.clone(),
            geometry,
        })
    }

    /// Why the object-mask metrics are not available, if they are not.
    pub(super) fn no_objects(&self) -> Option<&str> {
        match &self.truth {
            Truth::None(reason) => Some(reason),
            _ => None,
        }
    }

    /// Why the part-level metrics are not available, if they are not.
    pub(super) fn no_parts(&self) -> Option<String> {
        match &self.truth {
            Truth::Parts(_) => None,
            Truth::None(reason) => Some(format!("{reason}; part-level metrics need the parts set (synth-parts)")),
            Truth::Object => Some(
                "the set has object masks but no parts; part-level metrics need the parts set (synth-parts)".into(),
            ),
        }
    }

    /// The object mask of `record` `[H, W]`.
    pub(super) fn object(&self, record: &Record) -> Result<Vec<bool>, InspectError> {
        let mask = read_mask(mask_path(&self.root, &record.path))?;
        Ok(mask_through(mask, &self.geometry))
    }

    /// The slot masks and parts of `record` (parts set only).
    pub(super) fn parts(&self, config: &PartsConfig, record: &Record) -> Result<QueryParts, InspectError> {
        let labels = read_part_mask(mask_path(&self.root, &record.path))?;
        let masks = Slot::ALL
            .iter()
            .map(|&slot| mask_through(slot_view(&labels, slot), &self.geometry))
            .collect();
        Ok(QueryParts {
            masks,
            parts: self.combination(config, record)?,
        })
    }

    /// The part in every slot of `record` (parts set only).
    pub(super) fn combination(&self, config: &PartsConfig, record: &Record) -> Result<Combination, InspectError> {
        Ok(config.image(image_index(&record.path)?)?.parts)
    }

    /// `record` rendered with `slot` emptied, through the evaluation transform `[3, H, W]`.
    pub(super) fn without(&self, config: &PartsConfig, record: &Record, slot: Slot) -> Result<Vec<f32>, InspectError> {
        let (rgb, _) = render_counterfactual(config, image_index(&record.path)?, Edit::Remove(slot))?;
        // The evaluation transform has no random choice; the generator is only its argument.
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
        Ok(self.pipeline.apply(&rgb, &mut rng))
    }
}

/// Whether `part` is a part (not an empty slot).
pub(super) fn present(part: PartType) -> bool {
    part != PartType::None
}

/// The image index of a parts-set image path (`images/000123.png` → 123).
fn image_index(path: &str) -> Result<usize, InspectError> {
    Path::new(path)
        .file_stem()
        .and_then(|s| s.to_str())
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| {
            InspectError::Argument(format!(
                "{path}: not an image of the parts set (images/<index>.png), so it has no counterfactual"
            ))
        })
}
