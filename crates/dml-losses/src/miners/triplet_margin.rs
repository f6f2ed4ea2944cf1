//! Triplet-margin mining (PML `TripletMarginMiner`).

use serde::{Deserialize, Serialize};

use super::MineInput;
use crate::distance::Distance;
use crate::error::LossError;
use crate::tuples::{Triplets, Tuples};

/// Which margin-violating triplets to keep.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TripletType {
    /// Every triplet with `d_an - d_ap <= margin`.
    #[default]
    All,
    /// Those of `all` whose negative is at least as close as the positive (`d_an <= d_ap`).
    Hard,
    /// Those of `all` whose negative is farther than the positive (`0 < d_an - d_ap`).
    Semihard,
    /// The complement of `all`: triplets already satisfying the margin.
    Easy,
}

dml_config::config! {
    /// Configuration of the triplet-margin miner.
    #[derive(Clone, Debug, PartialEq)]
    pub struct TripletMarginMinerConfig {
        /// The margin (PML's default).
        pub margin: f64 = 0.2,
        /// Which triplets to keep.
        pub type_of_triplets: TripletType = TripletType::All,
        /// The distance (else Euclidean on normalised embeddings).
        pub distance: Option<Distance> = None,
    }
}

impl TripletMarginMinerConfig {
    pub(super) fn validate(&self) -> Result<(), LossError> {
        if !self.margin.is_finite() {
            return Err(LossError::Config(format!(
                "triplet_margin miner: margin must be finite, got {}",
                self.margin
            )));
        }
        Ok(())
    }

    /// With `m = d_an - d_ap` for a distance (`s_ap - s_an` for a similarity), keeps the
    /// triplets with `m <= margin` (and `m <= 0` for hard, `m > 0` for semihard), or
    /// `m > margin` for easy.
    pub(super) fn mine(&self, input: &MineInput<'_>) -> Tuples {
        let mat = input.matrix;
        let labels = input.labels;
        let n = labels.len();
        let mut out = Triplets::default();
        for a in 0..n {
            for p in 0..n {
                if p == a || labels[p] != labels[a] {
                    continue;
                }
                let ap = mat.at(a, p);
                for (k, &lk) in labels.iter().enumerate() {
                    if lk == labels[a] {
                        continue;
                    }
                    let m = mat.margin(mat.at(a, k), ap);
                    let keep = match self.type_of_triplets {
                        TripletType::Easy => m > self.margin,
                        TripletType::All => m <= self.margin,
                        TripletType::Hard => m <= self.margin && m <= 0.0,
                        TripletType::Semihard => m <= self.margin && m > 0.0,
                    };
                    if keep {
                        out.a.push(a);
                        out.p.push(p);
                        out.n.push(k);
                    }
                }
            }
        }
        Tuples::Triplets(out)
    }
}
