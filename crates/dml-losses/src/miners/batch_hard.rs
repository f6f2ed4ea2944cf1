//! Batch-hard mining (Hermans et al. 2017, PML `BatchHardMiner`).

use super::MineInput;
use crate::distance::Distance;
use crate::tuples::{Triplets, Tuples};

dml_config::config! {
    /// Configuration of the batch-hard miner.
    #[derive(Clone, Debug, PartialEq)]
    pub struct BatchHardMinerConfig {
        /// The distance (else Euclidean on normalised embeddings).
        pub distance: Option<Distance> = None,
    }
}

impl BatchHardMinerConfig {
    /// One triplet per anchor that has a positive and a negative: its farthest positive and
    /// its closest negative (ties go to the lowest index, like `torch.max`/`torch.min`).
    pub(super) fn mine(&self, input: &MineInput<'_>) -> Tuples {
        let mat = input.matrix;
        let labels = input.labels;
        let n = labels.len();
        let mut out = Triplets::default();
        for a in 0..n {
            let mut hardest_pos: Option<(usize, f64)> = None;
            let mut hardest_neg: Option<(usize, f64)> = None;
            for (j, &lj) in labels.iter().enumerate() {
                let v = mat.at(a, j);
                if lj == labels[a] {
                    if j != a && hardest_pos.is_none_or(|(_, b)| mat.closer(b, v)) {
                        hardest_pos = Some((j, v));
                    }
                } else if hardest_neg.is_none_or(|(_, b)| mat.closer(v, b)) {
                    hardest_neg = Some((j, v));
                }
            }
            if let (Some((p, _)), Some((k, _))) = (hardest_pos, hardest_neg) {
                out.a.push(a);
                out.p.push(p);
                out.n.push(k);
            }
        }
        Tuples::Triplets(out)
    }
}
