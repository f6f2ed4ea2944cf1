//! Retrieval metrics with the semantics of pytorch-metric-learning 2.x `AccuracyCalculator`, plus
//! Recall@K as used in deep-metric-learning papers and the clustering scores NMI and AMI.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::cluster::{KMeansConfig, kmeans};
use crate::distance::Distance;
use crate::embeddings::Embeddings;
use crate::error::EvalError;
use crate::knn::{available_refs, check_k, check_pair};
use crate::mutual_info::{adjusted_mutual_info, normalized_mutual_info};
use crate::rerank::Reranker;
use crate::search::{self, SearchOptions, SearchSpec, SearchStats};

/// One metric to compute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Metric {
    /// Fraction of queries whose nearest neighbour has the query's label.
    PrecisionAt1,
    /// `(# same-label among the first R neighbours) / R`, averaged, where `R` is the number of other
    /// references sharing the query's label. With a fixed `k < R` the window (and divisor) is `min(R, k)`,
    /// as in PML.
    RPrecision,
    /// `Σ_{i ≤ R} P(i)·rel(i) / R`, averaged (`P(i)` = precision of the first `i`). With a fixed `k < R`
    /// the sum stops at `k` but still divides by `R`, as in PML.
    MeanAveragePrecisionAtR,
    /// `Σ_{i ≤ k} P(i)·rel(i) / R` over all `k` retrieved neighbours (`k` from [`KPolicy`]), averaged.
    MeanAveragePrecision,
    /// `1 / rank` of the first same-label neighbour among the `k` retrieved, `0` when there is none,
    /// averaged.
    MeanReciprocalRank,
    /// Recall@K of the DML literature: fraction of queries with at least one same-label reference among
    /// their first `K` neighbours.
    RecallAt(usize),
    /// Normalised mutual information (scikit-learn, arithmetic mean) between the query labels and a seeded
    /// k-means++ clustering of the query embeddings into as many clusters as there are query labels.
    Nmi,
    /// Adjusted mutual information (scikit-learn, arithmetic mean) on the same clustering as [`Metric::Nmi`].
    Ami,
}

impl Metric {
    /// The five k-NN metrics that PML's `AccuracyCalculator` computes by default.
    pub const PML_KNN: [Metric; 5] = [
        Metric::PrecisionAt1,
        Metric::RPrecision,
        Metric::MeanAveragePrecisionAtR,
        Metric::MeanAveragePrecision,
        Metric::MeanReciprocalRank,
    ];
}

/// How many neighbours each query retrieves for the metrics that depend on `k` (R-precision, MAP@R, MAP
/// and MRR). Precision@1 and Recall@K only ever look at their own prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KPolicy {
    /// PML's default: the largest number of references sharing a query label, minus one when the query set
    /// is the reference set. Every query then sees all of its `R` relevant references.
    #[default]
    MaxBinCount,
    /// A fixed `k` (an error when it exceeds the references available per query).
    Fixed(usize),
    /// Every available reference (PML's `k=None`).
    All,
}

/// The query and reference sets of an evaluation.
#[derive(Debug, Clone, Copy)]
pub enum EvalSets<'a> {
    /// Every embedding is a query and a reference; a query never retrieves itself (by index), so a query's
    /// `R` is the number of *other* embeddings with its label.
    QueryIsReference {
        /// All embeddings.
        embeddings: Embeddings<'a>,
        /// One label per embedding row.
        labels: &'a [u32],
    },
    /// Separate query and gallery (reference) sets, as in In-Shop retrieval; `R` is the number of gallery
    /// items with the query's label.
    QueryGallery {
        /// Query embeddings.
        query: Embeddings<'a>,
        /// One label per query row.
        query_labels: &'a [u32],
        /// Gallery embeddings.
        gallery: Embeddings<'a>,
        /// One label per gallery row.
        gallery_labels: &'a [u32],
    },
}

/// What to compute and how.
#[derive(Debug, Clone, PartialEq)]
pub struct AccuracyConfig {
    /// Distance used for retrieval (and the geometry of the k-means for NMI/AMI).
    pub distance: Distance,
    /// Neighbours per query for R-precision, MAP@R, MAP and MRR.
    pub k: KPolicy,
    /// Metrics to compute; duplicates are ignored. When only Precision@1 and Recall@K are requested, each
    /// query retrieves only `max(1, K...)` neighbours, whatever the policy.
    pub metrics: Vec<Metric>,
    /// Block size, threads and kernel of the search.
    pub search: SearchOptions,
    /// Seed, iteration limit and seeding trials of the k-means behind NMI and AMI (its `search` field is
    /// replaced by [`AccuracyConfig::search`]).
    pub kmeans: KMeansConfig,
}

impl AccuracyConfig {
    /// PML's defaults for `distance`: the five k-NN metrics of [`Metric::PML_KNN`] with
    /// [`KPolicy::MaxBinCount`].
    pub fn new(distance: Distance) -> Self {
        Self {
            distance,
            k: KPolicy::MaxBinCount,
            metrics: Metric::PML_KNN.to_vec(),
            search: SearchOptions::default(),
            kmeans: KMeansConfig::default(),
        }
    }

    /// Replaces the metric list.
    pub fn with_metrics(mut self, metrics: impl IntoIterator<Item = Metric>) -> Self {
        self.metrics = metrics.into_iter().collect();
        self
    }

    /// Replaces the k policy.
    pub fn with_k(mut self, k: KPolicy) -> Self {
        self.k = k;
        self
    }

    /// Replaces the search options.
    pub fn with_search(mut self, search: SearchOptions) -> Self {
        self.search = search;
        self
    }
}

/// Metric values of one evaluation. Requested metrics are `Some`; a mean over zero evaluated queries is NaN
/// (serialised as `null` by `serde_json`), as PML returns NaN when every query is lone.
///
/// Equality compares every metric, `k` and the query counts, but not the timing in [`AccuracyReport::search`].
#[derive(Debug, Clone, Serialize)]
pub struct AccuracyReport {
    /// See [`Metric::PrecisionAt1`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub precision_at_1: Option<f64>,
    /// See [`Metric::RPrecision`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub r_precision: Option<f64>,
    /// See [`Metric::MeanAveragePrecisionAtR`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_average_precision_at_r: Option<f64>,
    /// See [`Metric::MeanAveragePrecision`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_average_precision: Option<f64>,
    /// See [`Metric::MeanReciprocalRank`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_reciprocal_rank: Option<f64>,
    /// Recall@K by `K` (serialised as `{"1": .., "2": ..}`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub recall_at_k: BTreeMap<usize, f64>,
    /// See [`Metric::Nmi`]; computed over all queries, lone ones included.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nmi: Option<f64>,
    /// See [`Metric::Ami`]; computed over all queries, lone ones included.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ami: Option<f64>,
    /// The `k` of the [`KPolicy`] used by R-precision, MAP@R, MAP and MRR (0 when none was requested or
    /// every query is lone).
    pub k: usize,
    /// Queries averaged over by the k-NN metrics.
    pub evaluated_queries: usize,
    /// "Lone" queries excluded from every k-NN metric because no other reference shares their label.
    pub excluded_queries: usize,
    /// Where the search spent its time (not serialised).
    #[serde(skip)]
    pub search: SearchStats,
}

impl PartialEq for AccuracyReport {
    fn eq(&self, other: &Self) -> bool {
        // Bit equality, so that two NaN means (nothing evaluated) compare equal.
        let same = |a: Option<f64>, b: Option<f64>| a.map(f64::to_bits) == b.map(f64::to_bits);
        same(self.precision_at_1, other.precision_at_1)
            && same(self.r_precision, other.r_precision)
            && same(self.mean_average_precision_at_r, other.mean_average_precision_at_r)
            && same(self.mean_average_precision, other.mean_average_precision)
            && same(self.mean_reciprocal_rank, other.mean_reciprocal_rank)
            && self.recall_at_k.len() == other.recall_at_k.len()
            && self
                .recall_at_k
                .iter()
                .zip(&other.recall_at_k)
                .all(|(a, b)| a.0 == b.0 && a.1.to_bits() == b.1.to_bits())
            && same(self.nmi, other.nmi)
            && same(self.ami, other.ami)
            && self.k == other.k
            && self.evaluated_queries == other.evaluated_queries
            && self.excluded_queries == other.excluded_queries
    }
}

/// Computes the requested metrics of `sets` with PML `AccuracyCalculator` semantics.
///
/// Labels are compared for equality. A query whose label has no other reference ("lone", `R = 0`) is
/// excluded from every k-NN metric and counted in [`AccuracyReport::excluded_queries`].
///
/// # Errors
/// Shape errors ([`EvalError::LabelCount`], [`EvalError::DimMismatch`]), the preparation errors of
/// [`Distance`], [`EvalError::ZeroK`]/[`EvalError::KTooLarge`] for a fixed `k` or a Recall@K that is zero
/// or larger than the references available per query, and [`EvalError::Options`].
pub fn evaluate(sets: &EvalSets<'_>, config: &AccuracyConfig) -> Result<AccuracyReport, EvalError> {
    evaluate_impl(sets, config, None)
}

/// [`evaluate`] with a [`Reranker`] applied to the first `reranker.depth()` neighbours of every query
/// before any metric is computed.
///
/// # Errors
/// Those of [`evaluate`] and [`EvalError::RerankerNan`], [`EvalError::RerankerChangedCandidates`].
pub fn evaluate_with_reranker(
    sets: &EvalSets<'_>,
    config: &AccuracyConfig,
    reranker: &dyn Reranker,
) -> Result<AccuracyReport, EvalError> {
    evaluate_impl(sets, config, Some(reranker))
}

/// Which k-NN metrics are requested and the prefix length each reads.
struct Plan {
    p1: bool,
    rp: bool,
    mapr: bool,
    map: bool,
    mrr: bool,
    recall: Vec<usize>,
    /// The policy k.
    k: usize,
}

/// Per-query metric values, in the order of [`Plan`]'s flags followed by one value per recall K.
struct Values {
    width: usize,
    data: Vec<f64>,
}

fn evaluate_impl(
    sets: &EvalSets<'_>,
    config: &AccuracyConfig,
    reranker: Option<&dyn Reranker>,
) -> Result<AccuracyReport, EvalError> {
    let (query, qlabels, reference, rlabels, same) = match *sets {
        EvalSets::QueryIsReference { embeddings, labels } => (embeddings, labels, embeddings, labels, true),
        EvalSets::QueryGallery {
            query,
            query_labels,
            gallery,
            gallery_labels,
        } => (query, query_labels, gallery, gallery_labels, false),
    };
    let (qname, rname) = if same {
        ("labels", "labels")
    } else {
        ("query_labels", "gallery_labels")
    };
    if qlabels.len() != query.rows() {
        return Err(EvalError::LabelCount {
            input: qname,
            labels: qlabels.len(),
            rows: query.rows(),
        });
    }
    if rlabels.len() != reference.rows() {
        return Err(EvalError::LabelCount {
            input: rname,
            labels: rlabels.len(),
            rows: reference.rows(),
        });
    }
    check_pair(&query, &reference, same)?;
    search::resolve_kernel(&config.search)?;

    // Dense label ids and, per id, the number of references carrying it.
    let mut ids: HashMap<u32, u32> = HashMap::new();
    let mut dense = |l: u32| -> u32 {
        let next = ids.len() as u32;
        *ids.entry(l).or_insert(next)
    };
    let rdense: Vec<u32> = rlabels.iter().map(|&l| dense(l)).collect();
    let qdense: Vec<u32> = qlabels.iter().map(|&l| dense(l)).collect();
    let mut ref_count = vec![0usize; ids.len()];
    for &l in &rdense {
        ref_count[l as usize] += 1;
    }
    let self_count = usize::from(same);
    // R per query, as PML's get_relevance_mask: the label's reference count minus the query itself.
    let r_of = |q: usize| ref_count[qdense[q] as usize].saturating_sub(self_count);
    let active: Vec<u32> = (0..query.rows()).filter(|&q| r_of(q) > 0).map(|q| q as u32).collect();
    let excluded = query.rows() - active.len();

    let mut metrics = config.metrics.clone();
    metrics.sort();
    metrics.dedup();
    let has = |m: Metric| metrics.contains(&m);
    let available = available_refs(reference.rows(), same);
    let mut recall: Vec<usize> = metrics
        .iter()
        .filter_map(|m| if let Metric::RecallAt(k) = m { Some(*k) } else { None })
        .collect();
    recall.sort_unstable();
    for &k in &recall {
        check_k("recall_at_k", k, available, reference.rows(), same)?;
    }
    let uses_k = [
        Metric::RPrecision,
        Metric::MeanAveragePrecisionAtR,
        Metric::MeanAveragePrecision,
        Metric::MeanReciprocalRank,
    ]
    .iter()
    .any(|&m| has(m));
    let k = if uses_k {
        match config.k {
            // PML takes the maximum over the unique *query* labels of their reference counts.
            KPolicy::MaxBinCount => qdense
                .iter()
                .map(|&l| ref_count[l as usize])
                .max()
                .unwrap_or(0)
                .saturating_sub(self_count),
            KPolicy::Fixed(k) => {
                check_k("k", k, available, reference.rows(), same)?;
                k
            }
            KPolicy::All => available,
        }
    } else {
        0
    };
    let plan = Plan {
        p1: has(Metric::PrecisionAt1),
        rp: has(Metric::RPrecision),
        mapr: has(Metric::MeanAveragePrecisionAtR),
        map: has(Metric::MeanAveragePrecision),
        mrr: has(Metric::MeanReciprocalRank),
        recall,
        k,
    };
    let needed = [usize::from(plan.p1), plan.k, plan.recall.last().copied().unwrap_or(0)]
        .into_iter()
        .max()
        .unwrap_or(0);
    let depth = reranker.map_or(0, |r| r.depth());
    let kk = needed.max(depth).min(available);
    let knn_requested = plan.p1 || uses_k || !plan.recall.is_empty();

    let mut report = AccuracyReport {
        precision_at_1: None,
        r_precision: None,
        mean_average_precision_at_r: None,
        mean_average_precision: None,
        mean_reciprocal_rank: None,
        recall_at_k: BTreeMap::new(),
        nmi: None,
        ami: None,
        k: plan.k,
        evaluated_queries: active.len(),
        excluded_queries: excluded,
        search: SearchStats::default(),
    };

    let needs_clusters = has(Metric::Nmi) || has(Metric::Ami);
    let prepared_query = if knn_requested || needs_clusters {
        Some(config.distance.prepare(&query, "query")?)
    } else {
        None
    };

    if knn_requested {
        let q = prepared_query
            .as_ref()
            .expect("query rows are prepared when k-NN metrics are requested");
        let r_owned;
        let r = if same {
            q
        } else {
            r_owned = config.distance.prepare(&reference, "reference")?;
            &r_owned
        };
        let spec = SearchSpec {
            query: q,
            reference: r,
            distance: config.distance,
            exclude_self: same,
            kk,
            want_distances: false,
            reranker,
        };
        let width = 5 + plan.recall.len();
        // Reciprocals of ranks, so the inner loop multiplies instead of divides.
        let inv: Vec<f64> = (1..=kk.max(1)).map(|i| 1.0 / i as f64).collect();
        let init = || Values {
            width,
            data: Vec::new(),
        };
        let visit = |vals: &mut Values, qi: usize, idx: &[u32], _d: &[f32]| {
            per_query(&plan, qdense[qi], r_of(qi), idx, &rdense, &inv, vals);
        };
        let (blocks, stats) = search::search(&spec, &active, &config.search, init, visit)?;
        report.search = stats;
        // Sum per-query values in query order, whatever the block size and thread count.
        let mut sums = vec![0.0f64; width];
        for b in &blocks {
            for row in b.data.chunks_exact(b.width) {
                for (s, v) in sums.iter_mut().zip(row) {
                    *s += v;
                }
            }
        }
        let n = active.len() as f64;
        let mean = |s: f64| if active.is_empty() { f64::NAN } else { s / n };
        report.precision_at_1 = plan.p1.then(|| mean(sums[0]));
        report.r_precision = plan.rp.then(|| mean(sums[1]));
        report.mean_average_precision_at_r = plan.mapr.then(|| mean(sums[2]));
        report.mean_average_precision = plan.map.then(|| mean(sums[3]));
        report.mean_reciprocal_rank = plan.mrr.then(|| mean(sums[4]));
        for (i, &k) in plan.recall.iter().enumerate() {
            report.recall_at_k.insert(k, mean(sums[5 + i]));
        }
    }

    if needs_clusters {
        let q = prepared_query
            .as_ref()
            .expect("query rows are prepared when clustering is requested");
        let n_clusters = {
            let mut l = qdense.clone();
            l.sort_unstable();
            l.dedup();
            l.len()
        };
        let assignment = if q.rows == 0 {
            Vec::new()
        } else {
            let emb = Embeddings::new(&q.data, q.rows, q.dim)?;
            // The clustering's nearest-centroid searches follow the evaluation's search options.
            let km = KMeansConfig {
                search: config.search.clone(),
                ..config.kmeans.clone()
            };
            kmeans(&emb, n_clusters, &km)?.assignments
        };
        if has(Metric::Nmi) {
            report.nmi = Some(normalized_mutual_info(qlabels, &assignment)?);
        }
        if has(Metric::Ami) {
            report.ami = Some(adjusted_mutual_info(qlabels, &assignment)?);
        }
    }
    Ok(report)
}

/// Appends one query's metric values to `vals`.
///
/// `idx` is the query's final neighbour list (at least as long as every prefix the plan reads), `label`
/// its dense label, `r` its number of relevant references (> 0), `inv[i] = 1 / (i + 1)`.
fn per_query(plan: &Plan, label: u32, r: usize, idx: &[u32], rlabels: &[u32], inv: &[f64], vals: &mut Values) {
    #[cfg(target_arch = "x86_64")]
    if crate::select::wide_simd() {
        // SAFETY: the features `per_query_wide` is compiled for were detected at run time.
        return unsafe { per_query_wide(plan, label, r, idx, rlabels, inv, vals) };
    }
    per_query_body(plan, label, r, idx, rlabels, inv, vals)
}

/// [`per_query`] compiled for AVX-512 (the crate itself targets baseline x86-64).
///
/// # Safety
/// The CPU must support the enabled features ([`crate::select::wide_simd`]).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,bmi1,bmi2,avx512f,avx512bw,avx512vl,avx512dq")]
unsafe fn per_query_wide(
    plan: &Plan,
    label: u32,
    r: usize,
    idx: &[u32],
    rlabels: &[u32],
    inv: &[f64],
    vals: &mut Values,
) {
    per_query_body(plan, label, r, idx, rlabels, inv, vals)
}

/// The body of [`per_query`], inlined into each instruction-set build.
#[inline(always)]
fn per_query_body(plan: &Plan, label: u32, r: usize, idx: &[u32], rlabels: &[u32], inv: &[f64], vals: &mut Values) {
    let k = plan.k.min(idx.len());
    let r_win = r.min(k);
    let recall_max = plan.recall.last().copied().unwrap_or(0);
    // The first relevant rank serves Precision@1, MRR and Recall@K.
    let first_len = k.max(recall_max).max(usize::from(plan.p1)).min(idx.len());
    let first = idx[..first_len]
        .iter()
        .position(|&j| rlabels[j as usize] == label)
        .unwrap_or(usize::MAX);
    let (mut hits_r, mut ap_r, mut ap) = (0usize, 0.0f64, 0.0f64);
    if plan.rp || plan.mapr || plan.map {
        let mut cum = 0usize;
        ap_r = precision_sum(&idx[..r_win], 0, label, rlabels, inv, &mut cum);
        hits_r = cum;
        if plan.map {
            ap = ap_r + precision_sum(&idx[r_win..k], r_win, label, rlabels, inv, &mut cum);
        }
    }
    let rf = r as f64;
    vals.data.push(if first == 0 { 1.0 } else { 0.0 });
    vals.data
        .push(if r_win > 0 { hits_r as f64 / r_win as f64 } else { 0.0 });
    vals.data.push(ap_r / rf);
    vals.data.push(ap / rf);
    vals.data.push(if first < k { inv[first] } else { 0.0 });
    for &kr in &plan.recall {
        vals.data.push(if first < kr { 1.0 } else { 0.0 });
    }
}

/// `Σ P(i)·rel(i)` over the neighbours `seg`, which start at rank `offset` (0-based) and follow `*cum`
/// earlier hits; advances `*cum` by the hits in `seg`. Branch-free with four partial sums, because
/// relevance is unpredictable and this loop runs over thousands of neighbours per query.
#[inline(always)]
fn precision_sum(seg: &[u32], offset: usize, label: u32, rlabels: &[u32], inv: &[f64], cum: &mut usize) -> f64 {
    let inv = &inv[offset..offset + seg.len()];
    let mut acc = [0.0f64; 4];
    let mut c = *cum;
    let chunks = seg.chunks_exact(4);
    let tail = chunks.remainder();
    for (js, ws) in chunks.zip(inv.chunks_exact(4)) {
        for l in 0..4 {
            let rel = usize::from(rlabels[js[l] as usize] == label);
            c += rel;
            acc[l] += (c * rel) as f64 * ws[l];
        }
    }
    let done = seg.len() - tail.len();
    for (t, &j) in tail.iter().enumerate() {
        let rel = usize::from(rlabels[j as usize] == label);
        c += rel;
        acc[0] += (c * rel) as f64 * inv[done + t];
    }
    *cum = c;
    (acc[0] + acc[1]) + (acc[2] + acc[3])
}
