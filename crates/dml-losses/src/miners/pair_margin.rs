//! Pair-margin mining (PML `PairMarginMiner`).

use serde::{Deserialize, Serialize};

use super::MineInput;
use crate::distance::Distance;
use crate::tuples::{Pairs, Tuples};

/// Configuration of the pair-margin miner.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PairMarginMinerConfig {
    /// Positive pairs farther than this are kept (PML default 0.2).
    pub pos_margin: f64,
    /// Negative pairs closer than this are kept (PML default 0.8).
    pub neg_margin: f64,
    /// The distance (default Euclidean on normalised embeddings).
    pub distance: Option<Distance>,
}

impl Default for PairMarginMinerConfig {
    fn default() -> Self {
        Self {
            pos_margin: 0.2,
            neg_margin: 0.8,
            distance: None,
        }
    }
}

impl PairMarginMinerConfig {
    /// Positive pairs with `d > pos_margin` and negative pairs with `d < neg_margin`
    /// (for a similarity: `s < pos_margin` and `s > neg_margin`).
    pub(super) fn mine(&self, input: &MineInput<'_>) -> Tuples {
        let mat = input.matrix;
        let labels = input.labels;
        let mut out = Pairs::default();
        for (i, &li) in labels.iter().enumerate() {
            for (j, &lj) in labels.iter().enumerate() {
                let v = mat.at(i, j);
                if li == lj {
                    if i != j && mat.closer(self.pos_margin, v) {
                        out.a1.push(i);
                        out.p.push(j);
                    }
                } else if mat.closer(v, self.neg_margin) {
                    out.a2.push(i);
                    out.n.push(j);
                }
            }
        }
        Tuples::Pairs(out)
    }
}
