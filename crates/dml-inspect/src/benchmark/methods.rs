//! The explanation methods the benchmark scores, each as a map of the query `[H, W]` at input
//! resolution explaining its similarity to a partner: similarity attention at the last two stages
//! (Zheng et al.), DIML's marginal and per-cell transport contribution (Zhao et al., Eq. 4–5),
//! AVSL's attribution-weighted CAMs (Zhang et al., Eq. 10–11; AVSL runs only) and SmoothGrad of the
//! pair distance (Kobs et al., Eq. 1–2, with the partner in place of the black image).

use burn::module::Module;
use burn::tensor::{Device, Tensor, TensorData};
use dml_explain::render::resize_bilinear;
use dml_explain::saliency::smoothgrad::{MapOrder, smoothgrad};
use dml_explain::{AlphaMethod, TupleKind, similarity_attention, upsample_bilinear};
use dml_losses::Distance;
use dml_models::EmbeddingModel;
use dml_ot::{GridPool, GridPoolConfig, Structural, StructuralConfig};
use dml_train::{RunModel, TrainError};

use crate::attention::similarity_method;
use crate::avsl::avsl_attribution_map;
use crate::error::InspectError;
use crate::io::{TupleImages, values};
use crate::report::pair::decompose_pair;

/// Settings of the methods that have any.
#[derive(Debug, Clone, PartialEq)]
pub struct MethodSettings {
    /// SmoothGrad samples per map (Kobs et al.: 50).
    pub samples: usize,
    /// SmoothGrad noise scale relative to the image's value range (Kobs et al.: 0.15).
    pub spread: f64,
    /// Side `G` of DIML's grid.
    pub grid: usize,
    /// Seed of the SmoothGrad noise.
    pub seed: u64,
}

impl Default for MethodSettings {
    /// Kobs et al.'s SmoothGrad (50 samples, spread 0.15), DIML's grid of 4, seed 0.
    fn default() -> Self {
        Self {
            samples: 50,
            spread: 0.15,
            grid: 4,
            seed: 0,
        }
    }
}

/// The methods of one model (trained, or a step of the randomisation cascade), set up once.
pub(super) struct Methods {
    run: RunModel,
    /// The last two stages and how their attention is computed.
    stages: Vec<(String, AlphaMethod)>,
    autodiff_model: EmbeddingModel,
    autodiff_device: Device,
    pool: GridPool,
    structural: Structural,
    distance: Distance,
    settings: MethodSettings,
    /// The methods to run, a subset of [`method_names`].
    selected: Vec<String>,
}

/// The names of the methods `run` supports, in table order.
pub(super) fn method_names(run: &RunModel) -> Vec<String> {
    let stages = run.model.backbone.stage_names();
    let mut names: Vec<String> = stages.iter().rev().take(2).map(|s| format!("attention_{s}")).collect();
    names.extend(["diml_marginal".to_string(), "diml_flow".to_string()]);
    if run.avsl.is_some() {
        names.push("avsl".into());
    }
    names.push("smoothgrad".into());
    names
}

impl Methods {
    /// Prepares the methods for `run`'s model.
    pub(super) fn new(run: RunModel, selected: &[String], settings: &MethodSettings) -> Result<Self, InspectError> {
        if settings.samples == 0 {
            return Err(InspectError::Argument("--samples: must be at least 1".into()));
        }
        let pool = GridPoolConfig {
            grid: settings.grid,
            ..GridPoolConfig::default()
        }
        .init()
        .map_err(|e| InspectError::structural(format!("--grid {}", settings.grid), e))?;
        let structural = StructuralConfig::default()
            .init()
            .map_err(|e| InspectError::structural("structural similarity", e))?;
        let names = run.model.backbone.stage_names();
        let stages = names
            .iter()
            .rev()
            .take(2)
            .map(|s| (s.to_string(), similarity_method(&run.model, s)))
            .collect();
        let autodiff_device = run.device.clone().autodiff();
        let autodiff_model = run.model.clone().fork(&autodiff_device);
        // The class count only sizes proxies, which the distance does not use.
        let loss = run
            .config
            .loss
            .init(2, run.config.model.embedding_dim, &autodiff_device)
            .map_err(TrainError::from)?;
        Ok(Self {
            distance: loss.distance().clone(),
            run,
            stages,
            autodiff_model,
            autodiff_device,
            pool,
            structural,
            settings: settings.clone(),
            selected: selected.to_vec(),
        })
    }

    /// The model explained.
    pub(super) fn run(&self) -> &RunModel {
        &self.run
    }

    /// Every selected method's map of the first image of `pair` (`[2, 3, H, W]`, the evaluation transform's
    /// output) explaining its similarity to the second, `[H, W]` each, in [`method_names`] order.
    pub(super) fn maps(&self, pair: &TupleImages) -> Result<Vec<(String, Vec<f32>)>, InspectError> {
        let (h, w) = (pair.height, pair.width);
        let wanted = |name: &str| self.selected.iter().any(|s| s == name);
        let mut out = Vec::new();
        for (stage, method) in &self.stages {
            let name = format!("attention_{stage}");
            if !wanted(&name) {
                continue;
            }
            let (model, device) = match method {
                AlphaMethod::ClosedForm => (&self.run.model, &self.run.device),
                AlphaMethod::Autodiff => (&self.autodiff_model, &self.autodiff_device),
            };
            let x = Tensor::<4>::from_data(TensorData::new(pair.values.clone(), [2, 3, h, w]), device);
            // Explaining the similarity of the pair whatever its classes, so that the maps of one
            // query against two partners differ by the partner only.
            let att = similarity_attention(model, x, TupleKind::SiameseSame, stage, *method)?;
            let maps = values(upsample_bilinear(att.maps, h, w));
            out.push((name, maps[..h * w].to_vec()));
        }
        if wanted("diml_marginal") || wanted("diml_flow") {
            let (marginal, flow) = self.diml(pair)?;
            if wanted("diml_marginal") {
                out.push(("diml_marginal".into(), marginal));
            }
            if wanted("diml_flow") {
                out.push(("diml_flow".into(), flow));
            }
        }
        if let (Some(module), true) = (&self.run.avsl, wanted("avsl")) {
            out.push(("avsl".into(), avsl_attribution_map(&self.run, module, pair)?));
        }
        if wanted("smoothgrad") {
            out.push(("smoothgrad".into(), self.smoothgrad(pair)?));
        }
        Ok(out)
    }

    /// DIML's marginal `μ^s` of the query and each query cell's contribution `Σ_j T*_ij S_ij` to
    /// the structural similarity (Eq. 5), on the `G × G` grid, upsampled bilinearly to `[H, W]`.
    fn diml(&self, pair: &TupleImages) -> Result<(Vec<f32>, Vec<f32>), InspectError> {
        let (h, w) = (pair.height, pair.width);
        let x = Tensor::<4>::from_data(TensorData::new(pair.values.clone(), [2, 3, h, w]), &self.run.device);
        let (_, maps) = self.run.model.forward_with_features(x);
        let d = decompose_pair(&self.run.model, &self.pool, &self.structural, maps.last().clone(), 1)?;
        let g = self.pool.grid();
        let marginal: Vec<f32> = d.mu_source.iter().map(|&v| v as f32).collect();
        let flow: Vec<f32> = d.source_contributions().iter().map(|&v| v as f32).collect();
        Ok((
            resize_bilinear(&marginal, g, g, h, w)?,
            resize_bilinear(&flow, g, g, h, w)?,
        ))
    }

    /// SmoothGrad of the pair distance `d(f(q + σε), f(r))`: the code's order (channel mean of each
    /// sample's gradient, its magnitude, summed), `[H, W]`.
    fn smoothgrad(&self, pair: &TupleImages) -> Result<Vec<f32>, InspectError> {
        let (h, w) = (pair.height, pair.width);
        let plane = 3 * h * w;
        let device = &self.autodiff_device;
        let query = Tensor::<3>::from_data(TensorData::new(pair.values[..plane].to_vec(), [3, h, w]), device);
        let partner = Tensor::<3>::from_data(
            TensorData::new(pair.values[plane..2 * plane].to_vec(), [3, h, w]),
            device,
        );
        let sg = smoothgrad(
            &self.autodiff_model,
            query,
            partner,
            self.settings.samples,
            self.settings.spread,
            self.settings.seed,
            &self.distance,
        )?;
        Ok(sg.raw(MapOrder::Code).to_vec())
    }
}
