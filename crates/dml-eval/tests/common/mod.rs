//! Brute-force references for the integration tests: full sorts in `f64` and a line-by-line transcription
//! of pytorch-metric-learning's `AccuracyCalculator` formulas (relevance masks, cumulative sums).
#![allow(dead_code)]

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Row-major `f32` data plus its shape.
#[derive(Clone, Debug)]
pub struct Data {
    pub values: Vec<f32>,
    pub rows: usize,
    pub dim: usize,
}

impl Data {
    pub fn row(&self, i: usize) -> &[f32] {
        &self.values[i * self.dim..(i + 1) * self.dim]
    }

    pub fn emb(&self) -> dml_eval::Embeddings<'_> {
        dml_eval::Embeddings::new(&self.values, self.rows, self.dim).expect("test data is valid")
    }
}

/// Small-integer embeddings: every distance and dot product is exact in `f32` whatever the summation
/// order, so exact ties are frequent and the expected order (distance, then index) is unambiguous.
pub fn int_data(rows: usize, dim: usize, range: i32, seed: u64) -> Data {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let values = (0..rows * dim)
        .map(|_| rng.random_range(-range..=range) as f32)
        .collect();
    Data { values, rows, dim }
}

/// Gaussian-ish float embeddings around `classes` centres (label = row's class).
pub fn blob_data(labels: &[u32], dim: usize, spread: f32, seed: u64) -> Data {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let classes = labels.iter().copied().max().map_or(0, |m| m as usize + 1);
    let centres: Vec<f32> = (0..classes * dim).map(|_| rng.random_range(-1.0..1.0f32)).collect();
    let mut values = Vec::with_capacity(labels.len() * dim);
    for &l in labels {
        for d in 0..dim {
            let noise: f32 = (0..4).map(|_| rng.random_range(-1.0..1.0f32)).sum::<f32>() * 0.5;
            values.push(centres[l as usize * dim + d] + spread * noise);
        }
    }
    Data {
        values,
        rows: labels.len(),
        dim,
    }
}

/// Random labels in `0..classes`.
pub fn random_labels(n: usize, classes: u32, seed: u64) -> Vec<u32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n).map(|_| rng.random_range(0..classes)).collect()
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Dist {
    Euclidean,
    Cosine,
}

/// Exact-as-possible distance in `f64`: squared L2, or `1 - cos`.
pub fn dist64(kind: Dist, a: &[f32], b: &[f32]) -> f64 {
    match kind {
        Dist::Euclidean => a
            .iter()
            .zip(b)
            .map(|(&x, &y)| (f64::from(x) - f64::from(y)).powi(2))
            .sum(),
        Dist::Cosine => {
            let dot: f64 = a.iter().zip(b).map(|(&x, &y)| f64::from(x) * f64::from(y)).sum();
            let na: f64 = a.iter().map(|&x| f64::from(x).powi(2)).sum::<f64>().sqrt();
            let nb: f64 = b.iter().map(|&x| f64::from(x).powi(2)).sum::<f64>().sqrt();
            1.0 - dot / (na * nb)
        }
    }
}

/// Every reference of every query sorted by `(f64 distance, index)` with a full sort; under `same` the
/// query's own index is removed.
pub fn full_rankings(kind: Dist, query: &Data, reference: &Data, same: bool) -> Vec<Vec<(f64, usize)>> {
    (0..query.rows)
        .map(|q| {
            let mut v: Vec<(f64, usize)> = (0..reference.rows)
                .filter(|&j| !(same && j == q))
                .map(|j| (dist64(kind, query.row(q), reference.row(j)), j))
                .collect();
            v.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            v
        })
        .collect()
}

/// The smallest gap between consecutive distinct distances within the first `upto` entries of any
/// ranking, relative to the distance scale; tests on float data assert it is well above `f32` rounding so
/// that the expected order is unambiguous.
pub fn min_relative_gap(rankings: &[Vec<(f64, usize)>], upto: usize) -> f64 {
    let mut gap = f64::INFINITY;
    for r in rankings {
        let n = r.len().min(upto + 1);
        let scale = r.iter().map(|x| x.0.abs()).fold(0.0f64, f64::max).max(1e-30);
        for w in r[..n].windows(2) {
            if w[1].0 != w[0].0 {
                gap = gap.min((w[1].0 - w[0].0) / scale);
            }
        }
    }
    gap
}

/// `k` as PML accepts it.
#[derive(Clone, Copy, Debug)]
pub enum PmlK {
    MaxBinCount,
    Fixed(usize),
    All,
}

/// Metric values of [`pml_metrics`]; NaN when nothing was evaluated.
#[derive(Clone, Debug, Default)]
pub struct Expected {
    pub precision_at_1: f64,
    pub r_precision: f64,
    pub mean_average_precision_at_r: f64,
    pub mean_average_precision: f64,
    pub mean_reciprocal_rank: f64,
    pub recall: Vec<(usize, f64)>,
    pub k: usize,
    pub evaluated: usize,
    pub excluded: usize,
}

/// PML 2.x `AccuracyCalculator` on full rankings (reference indices, nearest first), transcribed with
/// its masks: label_counts over unique query labels, lone queries removed, relevance mask of `R` (minus
/// self) columns truncated to `k`, MAP@R divided by `R`, MAP summed over all `k` columns and divided by
/// `R`, MRR over `k` columns. Recall@K is the DML definition (a hit within the first K).
pub fn pml_metrics(
    rankings: &[Vec<usize>],
    qlabels: &[u32],
    rlabels: &[u32],
    same: bool,
    k: PmlK,
    recall_ks: &[usize],
) -> Expected {
    let self_count = usize::from(same);
    let mut uniq: Vec<u32> = qlabels.to_vec();
    uniq.sort_unstable();
    uniq.dedup();
    let counts: Vec<usize> = uniq
        .iter()
        .map(|&l| rlabels.iter().filter(|&&x| x == l).count())
        .collect();
    let count_of = |l: u32| counts[uniq.binary_search(&l).expect("query label is unique-listed")];
    let lone = |l: u32| {
        if same {
            count_of(l) as i64 - 1 <= 0
        } else {
            count_of(l) == 0
        }
    };
    let num_k = match k {
        PmlK::MaxBinCount => counts.iter().copied().max().unwrap_or(0) - self_count,
        PmlK::Fixed(k) => k,
        PmlK::All => rlabels.len() - self_count,
    };
    let mut e = Expected {
        k: num_k,
        ..Expected::default()
    };
    let mut sums = [0.0f64; 5];
    let mut recall = vec![0.0f64; recall_ks.len()];
    for (q, ranking) in rankings.iter().enumerate() {
        let label = qlabels[q];
        if lone(label) {
            e.excluded += 1;
            continue;
        }
        e.evaluated += 1;
        let knn_labels: Vec<u32> = ranking[..num_k].iter().map(|&j| rlabels[j]).collect();
        let same_label: Vec<bool> = knn_labels.iter().map(|&l| l == label).collect();
        let max_column = count_of(label) - self_count;
        let relevance_mask: Vec<bool> = (0..num_k).map(|c| c < max_column).collect();
        let count_per_query = max_column as f64;
        // precision_at_1
        sums[0] += if same_label[0] { 1.0 } else { 0.0 };
        // r_precision
        let matches = (0..num_k).filter(|&c| same_label[c] && relevance_mask[c]).count() as f64;
        let max_possible = relevance_mask.iter().filter(|&&m| m).count() as f64;
        sums[1] += matches / max_possible;
        // mean_average_precision(_at_r)
        for (slot, at_r) in [(2usize, true), (3usize, false)] {
            let knn_mask: Vec<bool> = if at_r {
                relevance_mask.clone()
            } else {
                vec![true; num_k]
            };
            let equality: Vec<bool> = (0..num_k).map(|c| same_label[c] && knn_mask[c]).collect();
            let mut cumulative = 0usize;
            let mut summed = 0.0f64;
            for c in 0..num_k {
                cumulative += usize::from(equality[c]);
                let precision = if equality[c] {
                    cumulative as f64 / (c + 1) as f64
                } else {
                    0.0
                };
                if knn_mask[c] {
                    summed += precision;
                }
            }
            sums[slot] += summed / count_per_query;
        }
        // mean_reciprocal_rank
        sums[4] += same_label.iter().position(|&s| s).map_or(0.0, |p| 1.0 / (p + 1) as f64);
        for (i, &kr) in recall_ks.iter().enumerate() {
            recall[i] += if ranking[..kr].iter().any(|&j| rlabels[j] == label) {
                1.0
            } else {
                0.0
            };
        }
    }
    let n = e.evaluated as f64;
    let mean = |s: f64| if e.evaluated == 0 { f64::NAN } else { s / n };
    e.precision_at_1 = mean(sums[0]);
    e.r_precision = mean(sums[1]);
    e.mean_average_precision_at_r = mean(sums[2]);
    e.mean_average_precision = mean(sums[3]);
    e.mean_reciprocal_rank = mean(sums[4]);
    e.recall = recall_ks.iter().zip(&recall).map(|(&k, &s)| (k, mean(s))).collect();
    e
}

/// Asserts `|got - want| <= 1e-12` (or both NaN), naming the metric.
pub fn assert_close(name: &str, got: Option<f64>, want: f64) {
    let got = got.unwrap_or_else(|| panic!("{name} was not computed"));
    assert!(
        (got.is_nan() && want.is_nan()) || (got - want).abs() <= 1e-12,
        "{name}: got {got}, want {want} (diff {:e})",
        (got - want).abs()
    );
}

/// Compares every PML metric of a report with the brute-force expectation.
pub fn assert_report(report: &dml_eval::AccuracyReport, want: &Expected) {
    assert_close("precision_at_1", report.precision_at_1, want.precision_at_1);
    assert_close("r_precision", report.r_precision, want.r_precision);
    assert_close(
        "mean_average_precision_at_r",
        report.mean_average_precision_at_r,
        want.mean_average_precision_at_r,
    );
    assert_close(
        "mean_average_precision",
        report.mean_average_precision,
        want.mean_average_precision,
    );
    assert_close(
        "mean_reciprocal_rank",
        report.mean_reciprocal_rank,
        want.mean_reciprocal_rank,
    );
    for &(k, v) in &want.recall {
        assert_close(&format!("recall_at_{k}"), report.recall_at_k.get(&k).copied(), v);
    }
    assert_eq!(report.k, want.k, "k");
    assert_eq!(report.evaluated_queries, want.evaluated, "evaluated queries");
    assert_eq!(report.excluded_queries, want.excluded, "excluded queries");
}

/// Indices only.
pub fn indices(rankings: &[Vec<(f64, usize)>]) -> Vec<Vec<usize>> {
    rankings.iter().map(|r| r.iter().map(|x| x.1).collect()).collect()
}
