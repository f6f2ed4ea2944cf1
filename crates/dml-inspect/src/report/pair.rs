//! The pair view of the report: every explanation method of the workspace applied to one pair of
//! images with one trained model, as numbers ([`PairReport`]) and figures written beside them.
//!
//! The methods explain similarity differently: the global similarity is the cosine of the two
//! embeddings; DIML (Zhao et al., Eq. 4–9) matches the `G × G` local embeddings by optimal transport
//! and reports how much of the structural similarity each location pair carries; similarity
//! attention (Zheng et al.) weighs the last stage's feature maps by the gradient of the pair's score;
//! AVSL (Zhang et al., Eq. 9–11) attributes its overall distance to similarity nodes of several
//! levels; SmoothGrad (Kobs et al., Eq. 1–2) shows which pixels move each embedding away from a black
//! image's.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use burn::module::Module;
use burn::tensor::{Device, Tensor, TensorData};
use dml_data::Pipeline;
use dml_explain::saliency::smoothgrad::{MapOrder, black_image_tensor, smoothgrad};
use dml_explain::{AlphaMethod, TupleKind, similarity_attention};
use dml_losses::Distance;
use dml_models::EmbeddingModel;
use dml_ot::{Decomposition, GridPool, GridPoolConfig, Structural, StructuralConfig, to_locations};
use dml_train::{Progress, RunModel, TrainError, data};

use crate::attention::similarity_method;
use crate::avsl::avsl_pair;
use crate::error::InspectError;
use crate::io::{TupleImages, existing_images, load_images, values};

use super::figures;
use super::pair_report::{
    AttentionPair, Availability, AvslPairReport, DimlPair, GlobalSimilarity, PairReport, ReportOptions, SaliencyPair,
};

/// DIML's decomposition of a pair from its last feature maps `[2, C, h, w]`: reduced to the
/// `G × G` grid of `pool` and projected by the head at every location (Eq. 2), as `train eval
/// --diml-k` does, then matched by `structural`, listing the `top` strongest flows.
pub(crate) fn decompose_pair(
    model: &EmbeddingModel,
    pool: &GridPool,
    structural: &Structural,
    last: Tensor<4>,
    top: usize,
) -> Result<Decomposition, InspectError> {
    let locals = model.head.project_locations(to_locations(pool.forward(last)));
    let [_, n, dim] = locals.dims();
    let locals = values(locals);
    let g = pool.grid();
    structural
        .decompose(&locals[..n * dim], [g, g], &locals[n * dim..], [g, g], dim, top)
        .map_err(|e| InspectError::structural("DIML structural similarity", e))
}

/// The model and methods of one report, set up once for all the pairs it explains.
pub struct PairExplainer<'a> {
    run: &'a RunModel,
    progress: &'a dyn Progress,
    run_dir: PathBuf,
    options: ReportOptions,
    pipeline: Pipeline,
    pool: GridPool,
    structural: Structural,
    stage: String,
    method: AlphaMethod,
    /// The model on the device attention runs on (autodiff only where the closed form is not exact).
    attention_model: EmbeddingModel,
    attention_device: Device,
    /// The model on the autodiff device, for SmoothGrad.
    saliency_model: EmbeddingModel,
    saliency_device: Device,
    saliency_distance: Distance,
    /// SmoothGrad maps by image file: a map depends on the image alone (its distance is to the
    /// black image), so a query's map is computed once for all its hits.
    saliency_cache: HashMap<PathBuf, (Vec<f32>, f64)>,
}

impl<'a> PairExplainer<'a> {
    /// Prepares the methods for `run` (loaded from `run_dir`); notes go to `progress`.
    pub fn new(
        run: &'a RunModel,
        run_dir: &Path,
        options: ReportOptions,
        progress: &'a dyn Progress,
    ) -> Result<Self, InspectError> {
        if options.samples == 0 {
            return Err(InspectError::Argument("--samples: must be at least 1".into()));
        }
        if !(1..=2).contains(&options.avsl_top) {
            return Err(InspectError::Argument(format!(
                "--avsl-top {}: must be 1 or 2 (a figure shows two nodes on both images)",
                options.avsl_top
            )));
        }
        let pool = GridPoolConfig {
            grid: options.grid,
            ..GridPoolConfig::default()
        }
        .init()
        .map_err(|e| InspectError::structural(format!("--grid {}", options.grid), e))?;
        // The same solver and marginals as `train eval --diml-k`, so the report's numbers are the
        // ones re-ranking uses.
        let structural = StructuralConfig::default()
            .init()
            .map_err(|e| InspectError::structural("structural similarity", e))?;
        let stages = run.model.backbone.stage_names();
        let stage = stages[stages.len() - 1].to_string();
        let method = similarity_method(&run.model, &stage);
        let attention_device = match method {
            AlphaMethod::ClosedForm => run.device.clone(),
            AlphaMethod::Autodiff => run.device.clone().autodiff(),
        };
        let attention_model = run.model.clone().fork(&attention_device);
        let saliency_device = run.device.clone().autodiff();
        let saliency_model = run.model.clone().fork(&saliency_device);
        // The class count only sizes proxies, which the distance does not use.
        let loss = run
            .config
            .loss
            .init(2, run.config.model.embedding_dim, &saliency_device)
            .map_err(TrainError::from)?;
        Ok(Self {
            run,
            progress,
            run_dir: run_dir.to_path_buf(),
            pipeline: Pipeline::new(data::eval_transform(&run.config.data))?,
            options,
            pool,
            structural,
            stage,
            method,
            attention_model,
            attention_device,
            saliency_model,
            saliency_device,
            saliency_distance: loss.distance().clone(),
            saliency_cache: HashMap::new(),
        })
    }

    /// The run being explained.
    pub fn run(&self) -> &'a RunModel {
        self.run
    }

    /// Where notes go (a dataset prepared on first use).
    pub fn progress(&self) -> &'a dyn Progress {
        self.progress
    }

    /// The settings every pair is explained with.
    pub fn options(&self) -> &ReportOptions {
        &self.options
    }

    /// The evaluation transform of the run.
    pub fn pipeline(&self) -> &Pipeline {
        &self.pipeline
    }

    /// Explains the pair `images` and writes its figures into `dir` (which must exist); `captions`
    /// label the two images in the figures (font characters only).
    pub fn explain(&mut self, images: [&Path; 2], captions: [&str; 2], dir: &Path) -> Result<PairReport, InspectError> {
        existing_images(images)?;
        let paths = [images[0].to_path_buf(), images[1].to_path_buf()];
        let tuple = load_images(&paths, &self.pipeline)?;
        let (h, w) = (tuple.height, tuple.width);
        let x = Tensor::<4>::from_data(TensorData::new(tuple.values.clone(), [2, 3, h, w]), &self.run.device);
        let (embeddings, maps) = self.run.model.forward_with_features(x);
        let embeddings = values(embeddings);
        let global = self.global(&embeddings);
        let diml = self.diml(maps.last().clone(), global.cosine)?;
        let attention = self.attention(&tuple)?;
        let avsl = match &self.run.avsl {
            Some(module) => {
                let pair = avsl_pair(self.run, module, &tuple, self.options.avsl_top)?;
                Availability::Available(AvslPairReport {
                    d_hat: pair.d_hat,
                    recomposed: pair.recomposed,
                    levels: pair.levels,
                    decomposition: pair.decomposition,
                })
            }
            None => Availability::NotAvailable {
                reason: format!(
                    "run {} was not trained with [avsl] enabled = true, so it has no AVSL graph",
                    self.run_dir.display()
                ),
            },
        };
        let mut saliency_maps = Vec::with_capacity(2);
        for (i, path) in paths.iter().enumerate() {
            let plane = 3 * h * w;
            saliency_maps.push(self.saliency(path, &tuple.values[i * plane..(i + 1) * plane], h, w)?);
        }
        let saliency = SaliencyPair {
            samples: self.options.samples,
            spread: self.options.spread,
            seed: self.options.seed,
            order: MapOrder::Code,
            distance: format!("{:?}", self.saliency_distance),
            p99: [saliency_maps[0].1, saliency_maps[1].1],
        };
        let rgb = tuple.rgb(&self.run.config)?;
        let files = figures::write_pair(
            dir,
            &rgb,
            captions,
            &diml,
            &attention,
            &avsl,
            [&saliency_maps[0].0, &saliency_maps[1].0],
            [h, w],
        )?;
        Ok(PairReport {
            checkpoint: self.run.checkpoint.clone(),
            images: paths,
            input_size: [h, w],
            global,
            diml,
            attention,
            avsl,
            saliency,
            files,
        })
    }

    /// The cosine, Euclidean and retrieval distance of the pair's two embeddings `[2·D]`.
    fn global(&self, embeddings: &[f32]) -> GlobalSimilarity {
        let dim = embeddings.len() / 2;
        let (a, b) = embeddings.split_at(dim);
        let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
        let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
        let cosine = dot / (norm(a) * norm(b));
        let euclidean = a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum::<f32>().sqrt();
        let (retrieval_distance, distance) = if self.run.config.model.normalize {
            ("cosine", 1.0 - cosine)
        } else {
            ("euclidean", euclidean)
        };
        GlobalSimilarity {
            cosine,
            euclidean,
            retrieval_distance: retrieval_distance.into(),
            distance,
        }
    }

    /// DIML's decomposition of the pair from the last feature map `[2, C, h, w]`: reduced to the grid
    /// and projected by the head's linear layer at every location (Eq. 2), as `train eval
    /// --diml-k` does.
    fn diml(&self, last: Tensor<4>, cosine: f32) -> Result<DimlPair, InspectError> {
        let g = self.pool.grid();
        let d = decompose_pair(&self.run.model, &self.pool, &self.structural, last, self.options.flows)?;
        Ok(DimlPair {
            grid: g,
            structural_similarity: d.structural_similarity,
            structural_distance: d.structural_distance,
            rerank_similarity: f64::from(cosine) + d.structural_similarity,
            mean_local_cosine: d.global_cosine,
            marginals: [d.mu_source.clone(), d.mu_target.clone()],
            top_flows: d.top.clone(),
            convergence: d.convergence,
        })
    }

    /// Similarity attention of the pair as a same-class pair at the last stage.
    fn attention(&self, tuple: &TupleImages) -> Result<AttentionPair, InspectError> {
        let x = Tensor::<4>::from_data(
            TensorData::new(tuple.values.clone(), [2, 3, tuple.height, tuple.width]),
            &self.attention_device,
        );
        let att = similarity_attention(
            &self.attention_model,
            x,
            TupleKind::SiameseSame,
            &self.stage,
            self.method,
        )?;
        let [_, h, w] = att.maps.dims();
        let maps = values(att.maps);
        let scores = values(att.scores);
        Ok(AttentionPair {
            stage: self.stage.clone(),
            kind: TupleKind::SiameseSame,
            scores: [scores[0], scores[1]],
            map_shape: [h, w],
            maps: [maps[..h * w].to_vec(), maps[h * w..].to_vec()],
        })
    }

    /// The SmoothGrad map `[H, W]` of one image (`[3, H, W]` normalised values) divided by its 99th
    /// percentile, and that percentile; cached by file.
    fn saliency(&mut self, path: &Path, chw: &[f32], h: usize, w: usize) -> Result<(Vec<f32>, f64), InspectError> {
        if let Some(hit) = self.saliency_cache.get(path) {
            return Ok(hit.clone());
        }
        let device = &self.saliency_device;
        let image = Tensor::<3>::from_data(TensorData::new(chw.to_vec(), [3, h, w]), device);
        let data = &self.run.config.data;
        let base = black_image_tensor(h, w, data.mean, data.std, device);
        let sg = smoothgrad(
            &self.saliency_model,
            image,
            base,
            self.options.samples,
            self.options.spread,
            self.options.seed,
            &self.saliency_distance,
        )?;
        let map = sg.map(MapOrder::Code)?;
        self.saliency_cache.insert(path.to_path_buf(), map.clone());
        Ok(map)
    }
}
