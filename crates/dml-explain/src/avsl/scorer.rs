//! AVSL's overall distance `d̂` for retrieval, on the host (Zhang et al., Eq. 1, 6, 9): a bank of
//! per-image level embeddings and certainties, and a scorer that evaluates `d̂` of any (query,
//! reference) pair in bounded memory.
//!
//! [`super::graph::infer`] builds `[N, M, r]` tensors for every pair of two sets, which is what
//! training and the explanation of a pair need. Retrieval scores each query against thousands of
//! references (all of them for an exact evaluation, the top K for re-ranking), which would make
//! those tensors far too large; the scorer instead walks one pair at a time over the sparse top-k
//! edges `W̃` (each higher-level node keeps `k` lower-level ones), so its memory is the bank
//! itself and its cost per pair `Σ_l r_l (k + 1)`. It computes exactly what `infer` computes
//! (tested against it).

use burn::tensor::Tensor;

use super::certainty::{Certainty, certainty};
use super::graph::Reliability;
use crate::error::ExplainError;
use dml_models::AvslLevelOutput;
use dml_ot::l2_normalize;

/// One level of an [`AvslBank`]: row-major `[rows, dim]` values.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LevelBank {
    /// L2-normalised embeddings `ẽ` `[rows, dim]`.
    pub embeddings: Vec<f32>,
    /// CAM certainties `η` `[rows, dim]`.
    pub certainty: Vec<f32>,
    /// `r` of the level.
    pub dim: usize,
}

/// The per-image state `d̂` needs: every level's normalised embedding and certainty.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AvslBank {
    /// The levels, low to high.
    pub levels: Vec<LevelBank>,
    rows: usize,
}

/// Reads a tensor back as `f32` values, refusing non-finite ones (a bank must never score NaN).
fn finite(t: Tensor<2>, what: &str) -> Result<Vec<f32>, ExplainError> {
    let dims = t.dims();
    let values: Vec<f32> = t.into_data().iter::<f32>().collect();
    if let Some(i) = values.iter().position(|v| !v.is_finite()) {
        return Err(ExplainError::Shape {
            what: "AVSL bank",
            message: format!("non-finite {what} at row {} of {dims:?}", i / dims[1].max(1)),
        });
    }
    Ok(values)
}

impl AvslBank {
    /// An empty bank.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of images in the bank.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// `r` of every level, low to high.
    pub fn dims(&self) -> Vec<usize> {
        self.levels.iter().map(|l| l.dim).collect()
    }

    /// Appends a batch: the levels' outputs (embeddings `[B, r]`, CAMs `[B, r, h, w]`) of `B`
    /// images, normalised and reduced to certainties with `variant`.
    pub fn push(&mut self, outputs: &[AvslLevelOutput], variant: Certainty) -> Result<(), ExplainError> {
        if !self.levels.is_empty() && self.levels.len() != outputs.len() {
            return Err(ExplainError::Shape {
                what: "AVSL bank",
                message: format!("{} levels pushed into a bank of {}", outputs.len(), self.levels.len()),
            });
        }
        let batch = outputs.first().map_or(0, |o| o.embedding.dims()[0]);
        if self.levels.is_empty() {
            self.levels = outputs
                .iter()
                .map(|o| LevelBank {
                    dim: o.embedding.dims()[1],
                    ..LevelBank::default()
                })
                .collect();
        }
        for (i, (level, o)) in self.levels.iter_mut().zip(outputs).enumerate() {
            let [b, r] = o.embedding.dims();
            if b != batch || r != level.dim || o.cam.dims()[..2] != [b, r] {
                return Err(ExplainError::Shape {
                    what: "AVSL bank",
                    message: format!(
                        "level {i}: embedding {:?} and CAM {:?} pushed into a level of {} dims with batches of {batch}",
                        o.embedding.dims(),
                        o.cam.dims(),
                        level.dim
                    ),
                });
            }
            level
                .embeddings
                .extend(finite(l2_normalize(o.embedding.clone()), "embedding")?);
            level
                .certainty
                .extend(finite(certainty(o.cam.clone(), variant), "certainty")?);
        }
        self.rows += batch;
        Ok(())
    }

    /// The concatenated normalised level embeddings `[rows, Σ r]`, whose squared Euclidean
    /// distance is `Σ_l d^l` (the un-rectified sum of the levels): the first-stage ranking that
    /// AVSL re-ranking refines.
    pub fn concatenated(&self) -> Vec<f32> {
        let width: usize = self.levels.iter().map(|l| l.dim).sum();
        let mut out = Vec::with_capacity(self.rows * width);
        for row in 0..self.rows {
            for level in &self.levels {
                out.extend_from_slice(&level.embeddings[row * level.dim..(row + 1) * level.dim]);
            }
        }
        out
    }
}

/// One level's rectification: the sparse columns of `W̃` and the reliability regression.
#[derive(Debug, Clone, PartialEq)]
struct Step {
    /// For each higher-level node `j`, its lower-level nodes and weights `(i, W̃[i, j])`.
    columns: Vec<Vec<(u32, f32)>>,
    /// `α` `[r]`.
    coef: Vec<f32>,
    /// `β` `[r]`.
    bias: Vec<f32>,
}

/// `d̂` of any pair of two banks with fixed edges and reliability (a trained model's state).
#[derive(Debug, Clone, PartialEq)]
pub struct AvslScorer {
    dims: Vec<usize>,
    steps: Vec<Step>,
    gamma: f32,
}

/// The values of a small tensor.
fn host<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data().iter::<f32>().collect()
}

impl AvslScorer {
    /// A scorer from the top-k edges `W̃` (`[r_{l-1}, r_l]` per level above the lowest, the layout
    /// of [`super::link_star::link_star`]), the reliability regressions and the factor γ.
    pub fn new(links: &[Tensor<2>], reliability: &[Reliability], gamma: f64) -> Result<Self, ExplainError> {
        if links.is_empty() || links.len() != reliability.len() {
            return Err(ExplainError::Shape {
                what: "AVSL scorer",
                message: format!(
                    "{} links and {} reliability regressions (one each per level above the lowest)",
                    links.len(),
                    reliability.len()
                ),
            });
        }
        let mut dims = vec![links[0].dims()[0]];
        let mut steps = Vec::with_capacity(links.len());
        for (i, (link, rel)) in links.iter().zip(reliability).enumerate() {
            let [r_low, r_high] = link.dims();
            if r_low != dims[i] || rel.coef.dims() != [r_high] || rel.bias.dims() != [r_high] {
                return Err(ExplainError::Shape {
                    what: "AVSL scorer",
                    message: format!(
                        "level {}: link [{r_low}, {r_high}] after a level of {}, reliability {:?} / {:?}",
                        i + 1,
                        dims[i],
                        rel.coef.dims(),
                        rel.bias.dims()
                    ),
                });
            }
            let w = host(link.clone());
            let (coef, bias) = (host(rel.coef.clone()), host(rel.bias.clone()));
            if w.iter().chain(&coef).chain(&bias).any(|v| !v.is_finite()) {
                return Err(ExplainError::Config(format!(
                    "AVSL scorer: level {} has non-finite edges or reliability parameters",
                    i + 1
                )));
            }
            let columns = (0..r_high)
                .map(|j| {
                    (0..r_low)
                        .filter_map(|k| {
                            let v = w[k * r_high + j];
                            (v != 0.0).then_some((k as u32, v))
                        })
                        .collect()
                })
                .collect();
            steps.push(Step { columns, coef, bias });
            dims.push(r_high);
        }
        Ok(Self {
            dims,
            steps,
            gamma: gamma as f32,
        })
    }

    /// `r` of every level the scorer expects, low to high.
    pub fn dims(&self) -> &[usize] {
        &self.dims
    }

    /// Checks that a bank has the scorer's levels.
    pub fn check(&self, bank: &AvslBank, name: &str) -> Result<(), ExplainError> {
        if bank.dims() != self.dims {
            return Err(ExplainError::Shape {
                what: "AVSL bank",
                message: format!(
                    "the {name} bank has levels of {:?} dims, the model {:?}",
                    bank.dims(),
                    self.dims
                ),
            });
        }
        Ok(())
    }

    /// `d̂` of query row `q` of `query` and reference row `g` of `reference` (both checked with
    /// [`Self::check`]): `δ̂^0 = δ^0`, `δ̂^l = p ⊙ δ^l + (1 − p) ⊙ δ̂^{l−1} W̃^l`, `d̂ = Σ δ̂^L`.
    pub fn distance(&self, query: &AvslBank, q: usize, reference: &AvslBank, g: usize) -> f32 {
        let mut below = Vec::new();
        let mut hat = Vec::new();
        self.distance_with(query, q, reference, g, &mut below, &mut hat)
    }

    /// [`Self::distance`] with caller-owned scratch vectors, so that scoring many pairs allocates
    /// nothing.
    fn distance_with(
        &self,
        query: &AvslBank,
        q: usize,
        reference: &AvslBank,
        g: usize,
        below: &mut Vec<f32>,
        hat: &mut Vec<f32>,
    ) -> f32 {
        let node = |level: usize, j: usize| {
            let (a, b) = (&query.levels[level], &reference.levels[level]);
            let d = a.embeddings[q * a.dim + j] - b.embeddings[g * b.dim + j];
            d * d
        };
        below.clear();
        below.extend((0..self.dims[0]).map(|j| node(0, j)));
        for (l, step) in self.steps.iter().enumerate() {
            let level = l + 1;
            let (a, b) = (&query.levels[level], &reference.levels[level]);
            hat.clear();
            hat.extend(step.columns.iter().enumerate().map(|(j, column)| {
                let eta = a.certainty[q * a.dim + j] * b.certainty[g * b.dim + j];
                let p = 1.0 / (1.0 + (-(self.gamma * (eta * step.coef[j] + step.bias[j]))).exp());
                let from_below: f32 = column.iter().map(|&(i, w)| below[i as usize] * w).sum();
                p * node(level, j) + (1.0 - p) * from_below
            }));
            std::mem::swap(below, hat);
        }
        below.iter().sum()
    }

    /// `d̂` of query row `q` against each of `rows` of `reference`, written into `out`.
    pub fn distances(&self, query: &AvslBank, q: usize, reference: &AvslBank, rows: &[u32], out: &mut [f32]) {
        let (mut below, mut hat) = (Vec::new(), Vec::new());
        for (o, &g) in out.iter_mut().zip(rows) {
            *o = self.distance_with(query, q, reference, g as usize, &mut below, &mut hat);
        }
    }
}
