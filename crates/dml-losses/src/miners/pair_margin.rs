//! Pair-margin mining (PML `PairMarginMiner`).

use super::MineInput;
use crate::distance::Distance;
use crate::tuples::{Pairs, Tuples};

dml_config::config! {
    /// Configuration of the pair-margin miner.
    #[derive(Clone, Debug, PartialEq)]
    pub struct PairMarginMinerConfig {
        /// Positive pairs farther than this are kept (PML's default).
        pub pos_margin: f64 = 0.2,
        /// Negative pairs closer than this are kept (PML's default).
        pub neg_margin: f64 = 0.8,
        /// The distance (else Euclidean on normalised embeddings).
        pub distance: Option<Distance> = None,
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
