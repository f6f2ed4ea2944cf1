//! Multi-similarity pair mining (Wang et al. 2019, Eq. 5-6; PML `MultiSimilarityMiner`).

use super::MineInput;
use crate::distance::Distance;
use crate::error::LossError;
use crate::tuples::{Pairs, Tuples};

dml_config::config! {
    /// Configuration of the multi-similarity miner.
    #[derive(Clone, Debug, PartialEq)]
    pub struct MultiSimilarityMinerConfig {
        /// The slack ε of Eq. 5-6 (PML's default).
        pub epsilon: f64 = 0.1,
        /// The distance (else cosine similarity).
        pub distance: Option<Distance> = None,
    }
}

impl MultiSimilarityMinerConfig {
    pub(super) fn validate(&self) -> Result<(), LossError> {
        if !self.epsilon.is_finite() {
            return Err(LossError::Config(format!(
                "multi_similarity miner: epsilon must be finite, got {}",
                self.epsilon
            )));
        }
        Ok(())
    }

    /// For a similarity: keeps a negative `n` of anchor `a` when
    /// `S_an + ε > min_p S_ap` and a positive when `S_ap - ε < max_n S_an` (mirrored for a
    /// distance). An anchor without negatives keeps no positive and vice versa.
    pub(super) fn mine(&self, input: &MineInput<'_>) -> Tuples {
        let mat = input.matrix;
        let labels = input.labels;
        let n = labels.len();
        let eps = self.epsilon;
        let mut out = Pairs::default();
        for a in 0..n {
            // The hardest positive (least similar) and hardest negative (most similar).
            let mut hardest_pos: Option<f64> = None;
            let mut hardest_neg: Option<f64> = None;
            for (j, &lj) in labels.iter().enumerate() {
                let v = mat.at(a, j);
                if lj == labels[a] {
                    if j != a && hardest_pos.is_none_or(|b| mat.closer(b, v)) {
                        hardest_pos = Some(v);
                    }
                } else if hardest_neg.is_none_or(|b| mat.closer(v, b)) {
                    hardest_neg = Some(v);
                }
            }
            for (j, &lj) in labels.iter().enumerate() {
                let v = mat.at(a, j);
                if lj == labels[a] {
                    if j == a {
                        continue;
                    }
                    if let Some(neg) = hardest_neg {
                        let hard = if mat.is_similarity {
                            v - eps < neg
                        } else {
                            v + eps > neg
                        };
                        if hard {
                            out.a1.push(a);
                            out.p.push(j);
                        }
                    }
                } else if let Some(pos) = hardest_pos {
                    let hard = if mat.is_similarity {
                        v + eps > pos
                    } else {
                        v - eps < pos
                    };
                    if hard {
                        out.a2.push(a);
                        out.n.push(j);
                    }
                }
            }
        }
        Tuples::Pairs(out)
    }
}
