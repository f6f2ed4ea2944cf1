//! Similarity mining in training (Zheng et al., Sec. 3.2, Eq. 3): `L = L_ml + γ L_sm`, with the
//! mining loss of `dml_explain::SimilarityMining` on tuples drawn from the batch.
//!
//! The tuples come from the run's miner when it has one (triplets, or pairs turned into
//! triplets), otherwise from every valid tuple of the batch; at most `max_tuples` of them are
//! kept, chosen at random from the step's seed, because every tuple costs a forward and backward
//! pass of its masked images.

use burn::module::Module;
use burn::optim::{GradientsParams, ModuleOptimizer};
use burn::tensor::Tensor;
use dml_explain::{MiningTuples, SimilarityMining, SimilarityMiningConfig, TupleKind};
use dml_losses::{LossConfig, Miner, Pairs, Triplets, Tuples};
use dml_models::{EmbeddingModel, FeatureMaps};
use rand::SeedableRng;
use rand::seq::SliceRandom;

use crate::config::tuple_kind;
use crate::error::TrainError;

/// Similarity mining's part of a [`crate::Learner`]: the mask parameters, the tuple kind and, when
/// `a`, `b` are learnable, their optimiser (trained with the loss group's learning rate).
pub struct Mining {
    /// The soft mask's `a`, `b` and the weight γ.
    pub module: SimilarityMining,
    kind: TupleKind,
    max_tuples: usize,
    learnable: bool,
    /// The optimiser of `a` and `b` (unused when they are fixed).
    pub optim: ModuleOptimizer,
}

impl Mining {
    /// Builds the mining part of a run (after [`validate`]).
    pub fn new(
        config: &SimilarityMiningConfig,
        loss: &LossConfig,
        optim: ModuleOptimizer,
        device: &burn::tensor::Device,
    ) -> Result<Self, TrainError> {
        let module = config.init(device)?;
        Ok(Self {
            module,
            kind: tuple_kind(config, loss)?,
            max_tuples: config.max_tuples,
            learnable: config.learnable,
            optim,
        })
    }

    /// Whether `a` and `b` are trained (and checkpointed with an optimiser state).
    pub fn learnable(&self) -> bool {
        self.learnable
    }

    /// The tuples of a batch (see the module documentation).
    pub fn tuples(
        &self,
        embeddings: Tensor<2>,
        labels: &[u32],
        miner: Option<&Miner>,
        seed: u64,
    ) -> Result<MiningTuples, TrainError> {
        let mined = miner.map(|m| m.mine(embeddings.detach(), labels, seed)).transpose()?;
        let triplets = || match &mined {
            Some(Tuples::Triplets(t)) => t.clone(),
            Some(Tuples::Pairs(p)) => Triplets::from_pairs(p),
            None => Triplets::all(labels),
        };
        let mut tuples: Vec<Vec<usize>> = match self.kind {
            TupleKind::Triplet => {
                let t = triplets();
                (0..t.a.len()).map(|i| vec![t.a[i], t.p[i], t.n[i]]).collect()
            }
            TupleKind::SiameseSame | TupleKind::SiameseDifferent => {
                let mut pairs: Vec<Vec<usize>> = match &mined {
                    Some(Tuples::Pairs(p)) => p.a1.iter().zip(&p.p).map(|(&a, &p)| vec![a, p]).collect(),
                    Some(Tuples::Triplets(t)) => t.a.iter().zip(&t.p).map(|(&a, &p)| vec![a, p]).collect(),
                    None => {
                        let p = Pairs::all(labels);
                        p.a1.iter().zip(&p.p).map(|(&a, &p)| vec![a, p]).collect()
                    }
                };
                pairs.sort_unstable();
                pairs.dedup();
                pairs
            }
            TupleKind::Quadruplet => {
                // Two triplets with the same anchor and positive and different negatives make a
                // quadruplet (a, p, n1, n2).
                let t = triplets();
                let mut by_pair: std::collections::BTreeMap<(usize, usize), Vec<usize>> = Default::default();
                for i in 0..t.a.len() {
                    by_pair.entry((t.a[i], t.p[i])).or_default().push(t.n[i]);
                }
                let mut out = Vec::new();
                for ((a, p), mut negatives) in by_pair {
                    negatives.sort_unstable();
                    negatives.dedup();
                    out.extend(negatives.chunks_exact(2).map(|n| vec![a, p, n[0], n[1]]));
                }
                out
            }
        };
        if tuples.len() > self.max_tuples {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x5349_4d5f_4d49_4e45);
            tuples.shuffle(&mut rng);
            tuples.truncate(self.max_tuples);
            tuples.sort_unstable();
        }
        Ok(MiningTuples {
            kind: self.kind,
            indices: tuples.into_iter().flatten().collect(),
        })
    }

    /// `γ L_sm` of a batch, or `None` when the batch has no tuple of the kind (e.g. no positive
    /// pair). `features` are the batch's stage maps from the training forward pass.
    #[allow(clippy::too_many_arguments)]
    pub fn loss(
        &self,
        model: &EmbeddingModel,
        images: Tensor<4>,
        embeddings: Tensor<2>,
        features: &FeatureMaps,
        labels: &[u32],
        miner: Option<&Miner>,
        seed: u64,
    ) -> Result<Option<Tensor<1>>, TrainError> {
        let tuples = self.tuples(embeddings.clone(), labels, miner, seed)?;
        if tuples.is_empty() {
            return Ok(None);
        }
        let out = self
            .module
            .forward(model, images, embeddings, features.last().clone(), &tuples)
            .map_err(|e| TrainError::method("similarity mining", e))?;
        Ok(Some(out.loss.mul_scalar(self.module.gamma())))
    }

    /// Applies the gradients of `a` and `b` when they are learnable.
    pub fn step(&mut self, lr: f64, grads: &mut burn::tensor::Gradients) {
        if self.learnable {
            let g = GradientsParams::from_module(grads, &self.module);
            self.module = self.optim.step(lr, self.module.clone(), g);
        }
    }

    /// The mask parameters for checkpoints.
    pub fn valid(&self) -> SimilarityMining {
        self.module.valid()
    }
}
