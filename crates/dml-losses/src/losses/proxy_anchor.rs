//! Proxy-Anchor loss (Kim et al. 2020, Eq. 4; PML `ProxyAnchorLoss`):
//! `1/|P+| Σ_{p∈P+} log(1 + Σ_{x∈X_p+} e^{-α(s(x,p) - δ)})
//!  + 1/|P| Σ_{p∈P} log(1 + Σ_{x∈X_p-} e^{α(s(x,p) + δ)})`.

use burn::tensor::{DType, Device, Tensor, TensorData};
use dml_backend::{float_tensor, is_cpu_device, read_f64s};

use super::kinds::{Batch, Context, check_host_values, embeddings_of};
use super::state::{LossState, Slot, normal, require_classes};
use super::{LossModule, LossOutput, RegisteredLoss};
use crate::attach::attach_gradients;
use crate::distance::Distance;
use crate::error::LossError;
use crate::gemm::{self, HostFloat};
use crate::host_grad::{
    GramMap, HostLoss, Norm, attach, normalize_product, normalize_product_backward, reducer_weights,
};
use crate::reducer::Reducer;
use crate::tuples::{Tuples, miner_weights};

dml_config::config! {
    /// Configuration of the Proxy-Anchor loss.
    #[derive(Clone, Debug, PartialEq)]
    pub struct ProxyAnchorLossConfig {
        /// The margin δ (PML's default).
        pub margin: f64 = 0.1,
        /// The scale α.
        pub alpha: f64 = 32.0,
        /// Distance override (else cosine similarity).
        pub distance: Option<Distance> = None,
        /// Reducer override (else: the positive term over the proxies present, the negative
        /// term over all proxies).
        pub reducer: Option<Reducer> = None,
    }
}

/// Proxy-Anchor on its own; its proxies `[C, D]` are its parameter.
pub type ProxyAnchorLoss = LossModule<ProxyAnchorLossConfig>;

impl RegisteredLoss for ProxyAnchorLossConfig {
    const NAME: &'static str = "proxy_anchor";
    const DEFAULT_DISTANCE: Distance = Distance::cosine();
    const DEFAULT_REDUCER: Reducer = Reducer::Divisor;
    const PAIR_BASED: bool = false;
    const HOST_EVALUATED: bool = true;
    const PARAMETERS: &'static [(Slot, &'static str)] = &[(Slot::Proxies, "proxies")];

    fn distance(&self) -> Option<&Distance> {
        self.distance.as_ref()
    }

    fn reducer(&self) -> Option<&Reducer> {
        self.reducer.as_ref()
    }

    /// `kaiming_normal_(mode = "fan_out")` on `[C, D]`: std `sqrt(2 / C)`.
    fn init_state(&self, num_classes: usize, dim: usize, device: &Device) -> Result<LossState, LossError> {
        require_classes(Self::NAME, "proxies", num_classes, dim)?;
        let std = (2.0 / num_classes as f64).sqrt();
        Ok(LossState {
            proxies: Some(normal([num_classes, dim], std, device)),
            ..LossState::default()
        })
    }

    /// Evaluated on the host (see `host_grad`): with the cosine similarity (or the dot product)
    /// through `ProxyAnchorGram`, so that no matrix product enters the graph; with any other
    /// distance from the graph's `[N, C]` matrix.
    fn evaluate(&self, ctx: &Context<'_>, batch: Batch<'_>) -> Result<LossOutput, LossError> {
        self.evaluate_scaled(ctx, batch, 0.0)
    }
}

impl ProxyAnchorLossConfig {
    /// [`RegisteredLoss::evaluate`] with every sum of exponentials scaled by `e^{log_phi}`:
    /// `log(1 + ϕ Σ e^x) = log(1 + Σ e^{x + log ϕ})`, which is GML-PA (PPGML Eq. 10) with
    /// `ϕ_s = e^{log_phi}`; `log_phi = 0` is Proxy-Anchor itself.
    pub(crate) fn evaluate_scaled(
        &self,
        ctx: &Context<'_>,
        batch: Batch<'_>,
        log_phi: f64,
    ) -> Result<LossOutput, LossError> {
        let Batch {
            data,
            labels,
            miner,
            seed,
        } = batch;
        let embeddings = embeddings_of::<Self>(data)?;
        let tuples = match miner {
            None => None,
            Some(m) => Some(m.mine(embeddings.clone(), labels, seed)?),
        };
        let dtype = embeddings.dtype();
        let proxies = ctx.proxies(dtype)?;
        let distance = ctx.distance();
        let sim = distance.is_similarity();
        let gram = matches!(GramMap::for_distance(distance), Some(GramMap::Similarity { power }) if power == 1.0);
        if gram {
            let on = ProxyAnchorGram {
                config: self,
                reducer: ctx.reducer(),
                labels,
                tuples: tuples.as_ref(),
                normalize: distance.normalizes(),
                sim,
                log_phi,
            };
            return match (is_cpu_device(&embeddings.device()), dtype) {
                (true, DType::F64) => Ok(on.host::<f64>(embeddings, proxies)),
                (true, _) => Ok(on.host::<f32>(embeddings, proxies)),
                (false, _) => on.device(embeddings, proxies),
            };
        }
        let mat = distance.matrix(embeddings, proxies);
        let [_, classes] = mat.dims();
        let values = read_f64s(mat.clone());
        check_host_values(&values, classes, "distance matrix")?;
        let hl = self.host(&values, classes, sim, labels, tuples.as_ref(), ctx.reducer(), log_phi);
        Ok(LossOutput {
            loss: attach(mat, hl.grad, hl.value),
            tuples: hl.tuples,
        })
    }

    /// `mat` is the `[N, C]` matrix between embeddings and proxies; returns the loss and its
    /// gradient with respect to `mat`. Every logit is shifted by `log_phi` (see
    /// [`Self::evaluate_scaled`]).
    ///
    /// Every sample is a positive of its own proxy and a negative of all others, so the two
    /// log-sum-exps of every proxy (over its column) are evaluated in three row-major passes
    /// over `[N, C]`: the logits and column maxima, the shifted exponentials and column sums,
    /// then the softmax weights as the gradient. Each pass runs along contiguous rows.
    // The logit shift is one more scalar of the same evaluation; a struct for it alone would
    // only rename the arguments.
    #[allow(clippy::too_many_arguments)]
    fn host(
        &self,
        mat: &[f64],
        c: usize,
        sim: bool,
        labels: &[u32],
        tuples: Option<&Tuples>,
        reducer: &Reducer,
        log_phi: f64,
    ) -> HostLoss {
        let n = labels.len();
        // Mined samples enter with log-weight (w - 1): unmined ones are damped.
        let offset: Vec<f64> = miner_weights(tuples, n, false).into_iter().map(|w| w - 1.0).collect();
        // sign = +1 for a similarity: positives enter as δ - s, negatives as s + δ.
        let sign = if sim { 1.0 } else { -1.0 };
        let (alpha, margin) = (self.alpha, self.margin);
        let own = |i: usize| labels[i] as usize;
        // Pass 1: logits; the maxima start at 0 because of the log-sum-exp's extra `e^0` term.
        let mut logits = vec![0.0; n * c];
        let (mut max_pos, mut max_neg) = (vec![0.0f64; c], vec![0.0f64; c]);
        let mut members = vec![0usize; c];
        for (i, (row, m_row)) in logits.chunks_exact_mut(c).zip(mat.chunks_exact(c)).enumerate() {
            let base = alpha * margin + offset[i] + log_phi;
            for (l, &m) in row.iter_mut().zip(m_row) {
                *l = base + alpha * sign * m;
            }
            // The own proxy's entry is a positive, not a negative: it is kept out of the
            // negative maximum (as -∞), then written as a positive logit.
            let j = own(i);
            row[j] = f64::NEG_INFINITY;
            for (&l, mx) in row.iter().zip(&mut max_neg) {
                *mx = mx.max(l);
            }
            row[j] = base - alpha * sign * m_row[j];
            max_pos[j] = max_pos[j].max(row[j]);
            members[j] += 1;
        }
        // Pass 2: shifted exponentials and column sums (starting from the extra term e^{-max}).
        let mut sum_pos: Vec<f64> = max_pos.iter().map(|m| (-m).exp()).collect();
        let mut sum_neg: Vec<f64> = max_neg.iter().map(|m| (-m).exp()).collect();
        for (i, row) in logits.chunks_exact_mut(c).enumerate() {
            let j = own(i);
            // Again the own entry sits out of the negative sums (e^{-∞} = 0).
            let pos_logit = std::mem::replace(&mut row[j], f64::NEG_INFINITY);
            for ((l, &mx), s) in row.iter_mut().zip(&max_neg).zip(&mut sum_neg) {
                *l = (*l - mx).exp();
                *s += *l;
            }
            row[j] = (pos_logit - max_pos[j]).exp();
            sum_pos[j] += row[j];
        }
        let term = |count: usize, mx: f64, sum: f64| if count == 0 { 0.0 } else { mx + sum.ln() };
        let pos_terms: Vec<f64> = (0..c).map(|j| term(members[j], max_pos[j], sum_pos[j])).collect();
        let neg_terms: Vec<f64> = (0..c).map(|j| term(n - members[j], max_neg[j], sum_neg[j])).collect();
        let with_pos = members.iter().filter(|&&m| m > 0).count();
        let wp = reducer_weights(reducer, &pos_terms, Some(with_pos as f64));
        let wn = reducer_weights(reducer, &neg_terms, Some(c as f64));
        let value: f64 = (0..c).map(|j| wp[j] * pos_terms[j] + wn[j] * neg_terms[j]).sum();
        // Pass 3: ∂L/∂mat = ±α · reducer weight · softmax weight.
        let neg_factor: Vec<f64> = (0..c).map(|j| sign * alpha * wn[j] / sum_neg[j]).collect();
        for (i, row) in logits.chunks_exact_mut(c).enumerate() {
            let j_own = own(i);
            let pos = -sign * alpha * wp[j_own] / sum_pos[j_own] * row[j_own];
            for (g, f) in row.iter_mut().zip(&neg_factor) {
                *g *= f;
            }
            row[j_own] = pos;
        }
        HostLoss {
            value,
            grad: logits,
            tuples: n,
        }
    }
}

/// Proxy-Anchor with the cosine similarity (or the dot product, without `normalize`), the
/// configuration every paper uses, evaluated outside the autodiff graph:
///
/// `R = X Pᵀ` (`[N, D] × [D, C]`), `S_ij = R_ij / (|x_i| |p_j|)`, the loss and `G = ∂L/∂S` from
/// [`ProxyAnchorLossConfig::host`], then `∂L/∂X = ∂R P + diag(u) X` and
/// `∂L/∂P = ∂Rᵀ X + diag(v) P` (see `normalize_product_backward`). Both gradients re-enter the
/// graph as one node (see `attach`), so the autodiff graph holds no matrix product at all.
pub(crate) struct ProxyAnchorGram<'a> {
    pub config: &'a ProxyAnchorLossConfig,
    pub reducer: &'a Reducer,
    pub labels: &'a [u32],
    pub tuples: Option<&'a Tuples>,
    /// Whether the distance normalises (cosine) or not (dot product).
    pub normalize: bool,
    /// Whether the distance is a similarity.
    pub sim: bool,
    /// The shift of every logit, `log ϕ_s` for GML-PA (0 for Proxy-Anchor).
    pub log_phi: f64,
}

impl ProxyAnchorGram<'_> {
    /// On a CPU device the whole step runs on the host in the embeddings' precision `T`, with
    /// the three products through `gemm`: the loss of `embeddings` `[N, D]` against `proxies`
    /// `[C, D]`, attached to both.
    pub(crate) fn host<T: HostFloat>(&self, embeddings: Tensor<2>, proxies: Tensor<2>) -> LossOutput {
        let [n, d] = embeddings.dims();
        let classes = proxies.dims()[0];
        let (device, dtype) = (embeddings.device(), embeddings.dtype());
        let x: Vec<T> = gemm::read(embeddings.clone());
        let p: Vec<T> = gemm::read(proxies.clone());
        let squares = |v: &[T]| -> Vec<f64> { v.chunks_exact(d.max(1)).map(|row| gemm::dot(row, row)).collect() };
        let (xsq, psq) = (squares(&x), squares(&p));
        let norms = |sq: &[f64]| -> Vec<Norm> { sq.iter().map(|&q| Norm::new(q, self.normalize)).collect() };
        let (xn, pn) = (norms(&xsq), norms(&psq));
        let mut raw = vec![T::default(); n * classes];
        gemm::matmul(&mut raw, [n, classes, d], &x, false, &p, true, false);
        let raw: Vec<f64> = raw.into_iter().map(T::wide).collect();
        let cos = normalize_product(&raw, &xn, &pn);
        let hl = self
            .config
            .host(&cos, classes, self.sim, self.labels, self.tuples, self.reducer, self.log_phi);
        let (dr, u, v) = normalize_product_backward(&hl.grad, &cos, &xn, &pn);
        let dr: Vec<T> = dr.into_iter().map(T::narrow).collect();
        // The diagonal terms first; the two products are then accumulated onto them, side by
        // side on two threads (each is too small to be worth splitting itself).
        let scaled = |m: &[T], s: &[f64]| -> Vec<T> {
            let mut out = Vec::with_capacity(m.len());
            for (row, &si) in m.chunks_exact(d.max(1)).zip(s) {
                let si = T::narrow(si);
                out.extend(row.iter().map(|&e| e * si));
            }
            out
        };
        let (mut gx, mut gp) = (scaled(&x, &u), scaled(&p, &v));
        rayon::join(
            || gemm::matmul(&mut gx, [n, d, classes], &dr, false, &p, false, true),
            || gemm::matmul(&mut gp, [classes, d, n], &dr, true, &x, false, true),
        );
        let value = Tensor::from_data(TensorData::new(vec![hl.value], [1]), (&device, dtype));
        let grad_x = gemm::tensor(gx, [n, d], &device, dtype);
        let grad_p = gemm::tensor(gp, [classes, d], &device, dtype);
        let loss = attach_gradients(value, (embeddings, grad_x), (proxies, grad_p));
        LossOutput {
            loss,
            tuples: hl.tuples,
        }
    }

    /// On a GPU the three products stay on the device (detached, outside the graph); only the
    /// `[N, C]` matrix and the norms travel to the host for the loss itself. The norms are
    /// checked there: a non-finite embedding or proxy has a non-finite norm.
    pub(crate) fn device(&self, embeddings: Tensor<2>, proxies: Tensor<2>) -> Result<LossOutput, LossError> {
        let [n, _] = embeddings.dims();
        let classes = proxies.dims()[0];
        let (device, dtype) = (embeddings.device(), embeddings.dtype());
        let (xd, pd) = (embeddings.clone().detach(), proxies.clone().detach());
        let norms = |m: &Tensor<2>, what: &str| -> Result<Vec<Norm>, LossError> {
            let squares = read_f64s(m.clone().square().sum_dim(1));
            check_host_values(&squares, 1, what)?;
            Ok(squares.into_iter().map(|q| Norm::new(q, self.normalize)).collect())
        };
        let (xn, pn) = (
            norms(&xd, "embeddings (squared norm)")?,
            norms(&pd, "proxies (squared norm)")?,
        );
        let raw = read_f64s(xd.clone().matmul(pd.clone().transpose()));
        let cos = normalize_product(&raw, &xn, &pn);
        let hl = self
            .config
            .host(&cos, classes, self.sim, self.labels, self.tuples, self.reducer, self.log_phi);
        let (dr, u, v) = normalize_product_backward(&hl.grad, &cos, &xn, &pn);
        let dr = float_tensor(dr, [n, classes], &device, dtype);
        let grad_x = dr.clone().matmul(pd.clone()) + xd.clone() * float_tensor(u, [n, 1], &device, dtype);
        let grad_p = dr.transpose().matmul(xd) + pd * float_tensor(v, [classes, 1], &device, dtype);
        let value = Tensor::from_data(TensorData::new(vec![hl.value], [1]), (&device, dtype));
        Ok(LossOutput {
            loss: attach_gradients(value, (embeddings, grad_x), (proxies, grad_p)),
            tuples: hl.tuples,
        })
    }
}
