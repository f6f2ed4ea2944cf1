//! Proxy-Anchor in distance form (Zhang et al., Appendix A.1, Eq. 14), the proxy-based loss AVSL
//! trains with, and the per-level proxies it compares the batch with.
//!
//! AVSL's similarity is a dissimilarity (`d̂` and `d^l` are sums of squared differences of
//! normalised embeddings, in `[0, 4]`), so Proxy-Anchor's cosine form (Eq. 13) is rewritten with
//! distances:
//!
//! `L = 1/|P+| Σ_{p∈P+} log(1 + Σ_{x∈X+_p} e^{α (d(x,p) − m+)})
//!    + 1/|P|  Σ_{p∈P}  log(1 + Σ_{x∈X−_p} e^{−α (d(x,p) − m−)})`,
//!
//! with the paper's `m+ = β − τ` (the positive margin, 1.8) and `m− = β + τ` (the negative
//! margin, 2.2) and `α = 16` (Sec. 4.2).

use burn::module::{Module, Param};
use burn::tensor::{Device, Distribution, Tensor, TensorData};

use crate::error::ExplainError;

/// The constants of Eq. 14.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ProxyAnchorDistance {
    /// The scale `α` (the paper: 16).
    pub alpha: f64,
    /// The positive margin `m+ = β − τ`: positives are pulled below it (the paper: 1.8).
    pub positive_margin: f64,
    /// The negative margin `m− = β + τ`: negatives are pushed above it (the paper: 2.2).
    pub negative_margin: f64,
}

impl Default for ProxyAnchorDistance {
    /// The paper's values (Sec. 4.2).
    fn default() -> Self {
        Self {
            alpha: 16.0,
            positive_margin: 1.8,
            negative_margin: 2.2,
        }
    }
}

/// `log(1 + Σ_x mask ⊙ e^z)` over the rows of each column of `z` `[B, C]`, computed stably by
/// shifting with the column's largest kept exponent (at least 0, for the `1`); a column with no
/// kept entry gives `log 1 = 0`.
fn log_one_plus_sum_exp(z: Tensor<2>, mask: Tensor<2>) -> Tensor<1> {
    let [_, c] = z.dims();
    // Entries outside the mask are moved far down before the maximum so that they cannot shift it.
    let kept = z.clone() * mask.clone() + mask.clone().neg().add_scalar(1.0).mul_scalar(-1e4);
    let shift = kept.max_dim(0).clamp_min(0.0).detach();
    let sum = ((z - shift.clone()).exp() * mask).sum_dim(0) + shift.clone().neg().exp();
    (sum.log() + shift).reshape([c])
}

impl ProxyAnchorDistance {
    /// Checks the constants, naming the key under `prefix` (e.g. `avsl`).
    pub fn validate(&self, prefix: &str) -> Result<(), ExplainError> {
        let bad = |key: &str, v: f64| ExplainError::Config(format!("{prefix}.{key}: {v} must be finite and positive"));
        if !(self.alpha.is_finite() && self.alpha > 0.0) {
            return Err(bad("pa_alpha", self.alpha));
        }
        if !(self.positive_margin.is_finite() && self.positive_margin >= 0.0) {
            return Err(bad("pa_positive_margin", self.positive_margin));
        }
        if !self.negative_margin.is_finite() || self.negative_margin < self.positive_margin {
            return Err(ExplainError::Config(format!(
                "{prefix}.pa_negative_margin: {} must be finite and at least the positive margin {}",
                self.negative_margin, self.positive_margin
            )));
        }
        Ok(())
    }

    /// Eq. 14 of the distances `d` `[B, C]` of a batch to every class's proxy; `labels` `[B]`
    /// index the columns. Returns the loss `[1]`.
    pub fn forward(&self, d: Tensor<2>, labels: &[u32]) -> Result<Tensor<1>, ExplainError> {
        let [b, c] = d.dims();
        if labels.len() != b || b == 0 {
            return Err(ExplainError::Shape {
                what: "Proxy-Anchor distances",
                message: format!("[{b}, {c}] distances for {} labels", labels.len()),
            });
        }
        if let Some(&l) = labels.iter().find(|&&l| l as usize >= c) {
            return Err(ExplainError::Shape {
                what: "labels",
                message: format!("label {l} has no proxy among the {c} classes"),
            });
        }
        let device = d.device();
        let mut onehot = vec![0.0f32; b * c];
        let mut present = vec![false; c];
        for (i, &l) in labels.iter().enumerate() {
            onehot[i * c + l as usize] = 1.0;
            present[l as usize] = true;
        }
        let positive = Tensor::<2>::from_data(TensorData::new(onehot, [b, c]), &device).cast(d.dtype());
        let negative = positive.clone().neg().add_scalar(1.0);
        let with_positive = present.iter().filter(|&&p| p).count();
        let pos = log_one_plus_sum_exp(
            d.clone().sub_scalar(self.positive_margin).mul_scalar(self.alpha),
            positive,
        )
        .sum()
        .div_scalar(with_positive as f64);
        let neg = log_one_plus_sum_exp(d.sub_scalar(self.negative_margin).mul_scalar(-self.alpha), negative)
            .sum()
            .div_scalar(c as f64);
        Ok(pos + neg)
    }
}

/// One proxy per class at every level: `[C, r_l]`, compared with the batch's level embeddings
/// by the same squared distance of normalised vectors as the nodes.
#[derive(Module, Debug)]
pub struct LevelProxies {
    /// `[C, r_l]` per level, low to high.
    pub proxies: Vec<Param<Tensor<2>>>,
}

impl LevelProxies {
    /// Proxies for `classes` classes at levels of `dims`, drawn as Proxy-Anchor's
    /// (`kaiming_normal_`, mode `fan_out`: standard deviation `sqrt(2 / C)`).
    pub fn new(classes: usize, dims: &[usize], device: &Device) -> Result<Self, ExplainError> {
        if classes == 0 || dims.contains(&0) {
            return Err(ExplainError::Config(format!(
                "AVSL proxies need classes and level sizes above 0 (classes {classes}, dims {dims:?})"
            )));
        }
        let std = (2.0 / classes as f64).sqrt();
        Ok(Self {
            proxies: dims
                .iter()
                .map(|&r| Param::from_tensor(Tensor::random([classes, r], Distribution::Normal(0.0, std), device)))
                .collect(),
        })
    }

    /// The proxies of every level (on the autodiff graph).
    pub fn values(&self) -> Vec<Tensor<2>> {
        self.proxies.iter().map(|p| p.val()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Eq. 14 written out in f64 for a small batch.
    fn direct(d: &[f64], b: usize, c: usize, labels: &[u32], pa: &ProxyAnchorDistance) -> f64 {
        let (mut pos, mut neg, mut with_positive) = (0.0, 0.0, 0);
        for p in 0..c {
            let (mut sp, mut sn, mut any) = (0.0, 0.0, false);
            for x in 0..b {
                let v = d[x * c + p];
                if labels[x] as usize == p {
                    sp += (pa.alpha * (v - pa.positive_margin)).exp();
                    any = true;
                } else {
                    sn += (-pa.alpha * (v - pa.negative_margin)).exp();
                }
            }
            if any {
                pos += (1.0 + sp).ln();
                with_positive += 1;
            }
            neg += (1.0 + sn).ln();
        }
        pos / f64::from(with_positive) + neg / c as f64
    }

    #[test]
    fn equation_14_written_out() {
        let device = Device::flex();
        let (b, c) = (5, 4);
        // Class 3 has no sample: it enters the negative term only.
        let labels = [0u32, 2, 1, 0, 2];
        let d: Vec<f64> = (0..b * c).map(|i| ((i * 7919) % 41) as f64 / 10.0).collect();
        for pa in [
            ProxyAnchorDistance::default(),
            ProxyAnchorDistance {
                alpha: 2.0,
                positive_margin: 0.5,
                negative_margin: 1.0,
            },
        ] {
            let t = Tensor::<2>::from_data(TensorData::new(d.clone(), [b, c]), &device);
            let got = f64::from(pa.forward(t, &labels).unwrap().into_scalar::<f32>());
            let want = direct(&d, b, c, &labels, &pa);
            assert!((got - want).abs() <= 1e-5 * want.abs().max(1.0), "{got} vs {want}");
        }
    }

    #[test]
    fn large_exponents_stay_finite_and_bad_labels_are_refused() {
        let device = Device::flex();
        let pa = ProxyAnchorDistance {
            alpha: 400.0,
            ..ProxyAnchorDistance::default()
        };
        let t = Tensor::<2>::from_data(TensorData::new(vec![4.0f32, 0.0, 0.0, 4.0], [2, 2]), &device);
        let v: f32 = pa.forward(t.clone(), &[0, 1]).unwrap().into_scalar();
        // Each positive sits at 4 and each negative at 0: log(1 + e^{400 · 2.2}) = 880 (to f32
        // precision) per proxy in both terms, so 880 + 880.
        assert!(v.is_finite() && (v - 1760.0).abs() < 1.0, "{v}");
        let err = pa.forward(t, &[0, 2]).unwrap_err().to_string();
        assert!(err.contains("label 2"), "{err}");
    }
}
