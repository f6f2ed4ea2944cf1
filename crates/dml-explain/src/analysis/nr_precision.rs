//! Normalized R-Precision (Kobs et al., Sec. 4.1, Eq. 4–5): how strongly embeddings cluster by
//! an image property other than the class, normalised so that properties with different numbers
//! of values can be compared.
//!
//! For a property `k` and a query `q` with value `a_k(q)`, among `n` items:
//!
//! - `R = |{i : a_k(i) = a_k(q)}| - 1`, the other items sharing the query's value;
//! - the `R` nearest *other* embeddings by Euclidean distance (the query excluded by index;
//!   equal distances are broken by the smaller index);
//! - `X` = how many of them share the query's value; R-Precision (Eq. 4) is the mean of `X / R`;
//! - `p = (R + 1) / n`, the query included (`label_counts[label] / len(labels)` in the
//!   authors' `3D_cars/evaluate.py`);
//! - per query `(X - R p) / sqrt(R p (1 - p))`, and NR-Precision (Eq. 5) is its mean.
//!
//! The paper's text calls the variance `R p (1 - p)` "σ" and divides by it; the code, whose
//! numbers the paper reports, divides by its square root, as here (the reference cases follow
//! the code too).

use std::collections::HashMap;

use rayon::prelude::*;

use super::error::AnalysisError;

/// The critical value the paper compares NR-Precision with: `2.576 = Φ⁻¹(0.995)`, the two-sided
/// 1 % level of a standard normal ("if NR-Prec exceeds 2.576, the embeddings locations are
/// significantly different from random embeddings with a 1% significance level", Sec. 4.1).
pub const NR_PRECISION_CRITICAL_VALUE: f64 = 2.576;

/// The NR-Precision of one property over `n` items (Eq. 5), with its per-query terms.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct NrPrecision {
    /// `R` per query: the count of the query's value minus 1, `[n]`.
    pub per_query_r: Vec<usize>,
    /// `p` per query: the count of the query's value over `n`, the query included, `[n]`.
    pub per_query_p: Vec<f64>,
    /// `X` per query: items with the query's value among its `R` nearest other items, `[n]`
    /// (0 for a query with `R = 0`).
    pub per_query_hits: Vec<usize>,
    /// `(X - R p) / sqrt(R p (1 - p))` per query, `[n]`; `None` for a skipped query (`R = 0`,
    /// see [`skipped`](Self::skipped)).
    pub per_query_nr_precision: Vec<Option<f64>>,
    /// NR-Precision (Eq. 5): the mean of `per_query_nr_precision` over the evaluated queries.
    pub nr_precision: f64,
    /// R-Precision (Eq. 4): the mean of `X / R` over the same queries.
    pub r_precision: f64,
    /// Number of queries both means are taken over.
    pub evaluated: usize,
    /// Number of queries skipped because their value occurs only once (`R = 0`: no neighbour
    /// to retrieve, `0 / 0` in both metrics). The authors' code drops these "lone" queries
    /// before averaging (pytorch-metric-learning's `not_lone_query_mask`), as here.
    pub skipped: usize,
    /// `|nr_precision| > `[`NR_PRECISION_CRITICAL_VALUE`]: the paper's significance rule,
    /// applied to the mean as in its Table 6 (see [`is_significant`]).
    pub significant: bool,
}

/// The paper's significance rule: `|nr| > 2.576` ([`NR_PRECISION_CRITICAL_VALUE`]).
///
/// The paper writes "exceeds 2.576" and applies it to the mean NR-Precision of a property (the
/// underlined cells of Table 6, all positive there). 2.576 is the two-sided 1 % quantile, so
/// the rule is read two-sided: a clustering markedly *worse* than random (`nr < -2.576`) is
/// equally "different from random embeddings". Note that the mean of `n` per-query z-scores is
/// not itself standard normal under randomness (its spread shrinks roughly like
/// `sqrt(2 / n)`), so comparing the mean with 2.576 is a much stricter test than its nominal
/// level; this function follows the paper rather than correcting it.
pub fn is_significant(nr: f64) -> bool {
    nr.abs() > NR_PRECISION_CRITICAL_VALUE
}

/// NR-Precision (Eq. 5) and R-Precision (Eq. 4) of one property.
///
/// `embeddings`: `[n, dim]` row-major; `property`: `[n]` integer codes of the property's values
/// (any `u32`s; only equality matters).
///
/// Exact: all `n (n - 1)` squared distances are computed in `f64` (`O(n² dim)`), and each
/// query's `R` nearest are found by a partial sort (`O(n)`), queries in parallel.
///
/// # Errors
/// See [`nr_precision_many`].
pub fn nr_precision(embeddings: &[f32], dim: usize, property: &[u32]) -> Result<NrPrecision, AnalysisError> {
    let mut all = nr_precision_many(embeddings, dim, &[property])?;
    Ok(all.remove(0))
}

/// NR-Precision and R-Precision of several properties of the same embeddings (one row of the
/// paper's Table 6); each query's distances are computed once for all properties.
///
/// `embeddings`: `[n, dim]` row-major; `properties[k]`: `[n]` integer codes of property `k`.
/// Returns one [`NrPrecision`] per property, in order.
///
/// # Errors
/// - [`AnalysisError::Shape`] when `dim` is 0, `embeddings.len()` is not a multiple of `dim`,
///   or a property's length is not `n`;
/// - [`AnalysisError::Empty`] when there are no embeddings or no properties;
/// - [`AnalysisError::InvalidValue`] for a NaN or infinite embedding value;
/// - [`AnalysisError::ConstantProperty`] when a property has one value on every item (`p = 1`,
///   the binomial deviation is 0 for every query);
/// - [`AnalysisError::NoValidQuery`] when every value of a property occurs once (`R = 0` for
///   every query).
pub fn nr_precision_many(
    embeddings: &[f32],
    dim: usize,
    properties: &[&[u32]],
) -> Result<Vec<NrPrecision>, AnalysisError> {
    let n = check_embeddings(embeddings, dim)?;
    if properties.is_empty() {
        return Err(AnalysisError::Empty {
            what: "properties".into(),
        });
    }
    // Per property and item: how many items share the item's value (the item included).
    let counts = properties
        .iter()
        .enumerate()
        .map(|(k, values)| value_counts(values, n, || format!("properties[{k}]")))
        .collect::<Result<Vec<_>, _>>()?;
    let hits = neighbour_hits(embeddings, dim, n, properties, &counts);
    Ok(counts
        .iter()
        .enumerate()
        .map(|(k, counts)| summarise(counts, hits.iter().map(|per_property| per_property[k])))
        .collect())
}

/// Checks the `[n, dim]` buffer and returns `n`.
fn check_embeddings(embeddings: &[f32], dim: usize) -> Result<usize, AnalysisError> {
    if dim == 0 || !embeddings.len().is_multiple_of(dim) {
        return Err(AnalysisError::Shape {
            what: "embeddings".into(),
            message: format!(
                "{} values are not a whole number of rows of dim {dim}",
                embeddings.len()
            ),
        });
    }
    if embeddings.is_empty() {
        return Err(AnalysisError::Empty {
            what: "embeddings".into(),
        });
    }
    if let Some(index) = embeddings.iter().position(|x| !x.is_finite()) {
        return Err(AnalysisError::InvalidValue {
            what: "embeddings".into(),
            index,
            value: f64::from(embeddings[index]),
            reason: "not finite",
        });
    }
    Ok(embeddings.len() / dim)
}

/// `count[i]` = the number of items with item `i`'s value, after rejecting a wrong length, a
/// constant property and one whose values all occur once.
fn value_counts(values: &[u32], n: usize, what: impl Fn() -> String) -> Result<Vec<usize>, AnalysisError> {
    if values.len() != n {
        return Err(AnalysisError::Shape {
            what: what(),
            message: format!("{} values for {n} embeddings", values.len()),
        });
    }
    let mut histogram: HashMap<u32, usize> = HashMap::new();
    for &v in values {
        *histogram.entry(v).or_default() += 1;
    }
    if histogram.len() == 1 {
        return Err(AnalysisError::ConstantProperty {
            what: what(),
            value: values[0],
            n,
        });
    }
    if histogram.len() == n {
        return Err(AnalysisError::NoValidQuery { what: what(), n });
    }
    Ok(values.iter().map(|v| histogram[v]).collect())
}

/// `hits[q][k]`: among query `q`'s `R_k = counts[k][q] - 1` nearest other items, how many share
/// its value of property `k`.
fn neighbour_hits(
    embeddings: &[f32],
    dim: usize,
    n: usize,
    properties: &[&[u32]],
    counts: &[Vec<usize>],
) -> Vec<Vec<usize>> {
    (0..n)
        .into_par_iter()
        .map_init(
            || Vec::with_capacity(n - 1),
            |candidates: &mut Vec<(f64, u32)>, q| {
                let query = &embeddings[q * dim..(q + 1) * dim];
                candidates.clear();
                candidates.extend((0..n).filter(|&i| i != q).map(|i| {
                    let other = &embeddings[i * dim..(i + 1) * dim];
                    // u32 indices halve the buffer; n beyond u32::MAX is far out of reach of
                    // an O(n²) method anyway.
                    (squared_distance(query, other), i as u32)
                }));
                properties
                    .iter()
                    .zip(counts)
                    .map(|(values, counts)| {
                        let r = counts[q] - 1;
                        if r == 0 {
                            return 0;
                        }
                        // Squared distances order the neighbours as distances do. The order is
                        // total (distance, then index), so the R smallest are one well-defined
                        // set, whatever order the partial sort leaves them in.
                        candidates.select_nth_unstable_by(r - 1, |a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
                        candidates[..r]
                            .iter()
                            .filter(|&&(_, i)| values[i as usize] == values[q])
                            .count()
                    })
                    .collect()
            },
        )
        .collect()
}

/// `Σ (a_k - b_k)²` in `f64`, over four interleaved partial sums so that the loop vectorises
/// (a single running sum fixes the order of the additions and cannot).
fn squared_distance(a: &[f32], b: &[f32]) -> f64 {
    let mut acc = [0.0f64; 4];
    let (a4, b4) = (a.chunks_exact(4), b.chunks_exact(4));
    let (a_rest, b_rest) = (a4.remainder(), b4.remainder());
    for (x, y) in a4.zip(b4) {
        for lane in 0..4 {
            let d = f64::from(x[lane]) - f64::from(y[lane]);
            acc[lane] += d * d;
        }
    }
    let tail: f64 = a_rest
        .iter()
        .zip(b_rest)
        .map(|(&x, &y)| (f64::from(x) - f64::from(y)).powi(2))
        .sum();
    (acc[0] + acc[1]) + (acc[2] + acc[3]) + tail
}

/// The per-query terms and the means of one property from its value counts and hits.
fn summarise(counts: &[usize], hits: impl Iterator<Item = usize>) -> NrPrecision {
    let n = counts.len();
    let per_query_hits: Vec<usize> = hits.collect();
    let per_query_r: Vec<usize> = counts.iter().map(|&c| c - 1).collect();
    let per_query_p: Vec<f64> = counts.iter().map(|&c| c as f64 / n as f64).collect();
    let mut nr_sum = 0.0;
    let mut r_sum = 0.0;
    let mut evaluated = 0usize;
    let per_query_nr_precision: Vec<Option<f64>> = (0..n)
        .map(|q| {
            let (r, p, x) = (per_query_r[q] as f64, per_query_p[q], per_query_hits[q] as f64);
            // p < 1 for every query, since a constant property was rejected, so only R = 0
            // leaves the ratio undefined.
            if per_query_r[q] == 0 {
                return None;
            }
            let z = (x - r * p) / (r * p * (1.0 - p)).sqrt();
            nr_sum += z;
            r_sum += x / r;
            evaluated += 1;
            Some(z)
        })
        .collect();
    let nr_precision = nr_sum / evaluated as f64;
    NrPrecision {
        per_query_r,
        per_query_p,
        per_query_hits,
        per_query_nr_precision,
        nr_precision,
        r_precision: r_sum / evaluated as f64,
        evaluated,
        skipped: n - evaluated,
        significant: is_significant(nr_precision),
    }
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use statrs::distribution::{ContinuousCDF, Normal};

    use super::*;

    fn close(got: f64, want: f64) -> bool {
        (got - want).abs() <= 1e-12
    }

    #[test]
    fn two_clusters_hand_values() {
        // 1-d points 0, 1, 2 | 10, 11, 12; n = 6.
        let e = [0.0f32, 1.0, 2.0, 10.0, 11.0, 12.0];
        // Property aligned with the clusters: count 3, R = 2, p = ½, X = 2 for every query:
        // (2 - 1) / sqrt(2 · ½ · ½) = √2.
        let m = nr_precision(&e, 1, &[7, 7, 7, 9, 9, 9]).unwrap();
        assert_eq!(m.per_query_r, vec![2; 6]);
        assert_eq!(m.per_query_hits, vec![2; 6]);
        assert!(m.per_query_p.iter().all(|&p| p == 0.5));
        assert!(close(m.nr_precision, 2f64.sqrt()) && close(m.r_precision, 1.0), "{m:?}");
        assert_eq!((m.evaluated, m.skipped, m.significant), (6, 0, false));
        // Alternating property: query 0 (value 0; neighbours 1 and 2) hits 1 = R p: NR 0.
        // Query 1 (value 1; neighbours 0 and 2) hits 0: (0 - 1) / sqrt(½) = -√2.
        let m = nr_precision(&e, 1, &[0, 1, 0, 1, 0, 1]).unwrap();
        assert_eq!(m.per_query_hits, vec![1, 0, 1, 1, 0, 1]);
        let want = [0.0, -(2f64.sqrt()), 0.0, 0.0, -(2f64.sqrt()), 0.0];
        for (got, want) in m.per_query_nr_precision.iter().zip(want) {
            assert!(close(got.unwrap(), want));
        }
        assert!(close(m.nr_precision, -(2f64.sqrt()) / 3.0));
        assert!(close(m.r_precision, 4.0 / 12.0));
    }

    #[test]
    fn equal_distances_are_broken_by_the_smaller_index() {
        // Query 0 at 0 has items 1 (at +1) and 2 (at -1) equally far; its value 5 occurs twice
        // (R = 1), so only item 1 is retrieved: a miss. With the larger index it would be a hit.
        let e = [0.0f32, 1.0, -1.0, 8.0];
        let m = nr_precision(&e, 1, &[5, 6, 5, 6]).unwrap();
        assert_eq!(m.per_query_hits[0], 0);
        // Giving item 1 the query's value instead makes it a hit.
        let m = nr_precision(&e, 1, &[5, 5, 6, 6]).unwrap();
        assert_eq!(m.per_query_hits[0], 1);
    }

    #[test]
    fn a_duplicate_embedding_is_a_neighbour_but_the_query_is_not() {
        // Items 0 and 1 coincide. Query 0 (R = 1) must retrieve item 1, not itself.
        let e = [0.0f32, 0.0, 0.0, 0.0, 3.0, 3.0, 4.0, 4.0];
        let m = nr_precision(&e, 2, &[1, 1, 2, 2]).unwrap();
        assert_eq!(m.per_query_hits, vec![1, 1, 1, 1]);
    }

    #[test]
    fn lone_queries_are_skipped_and_counted() {
        let e = [0.0f32, 1.0, 5.0, 6.0, 20.0];
        let m = nr_precision(&e, 1, &[0, 0, 1, 1, 2]).unwrap();
        assert_eq!((m.evaluated, m.skipped), (4, 1));
        assert_eq!(m.per_query_nr_precision[4], None);
        assert_eq!((m.per_query_r[4], m.per_query_hits[4]), (0, 0));
        // Each evaluated query: R = 1, p = 2/5, X = 1: (1 - 0.4) / sqrt(0.4 · 0.6).
        let z = 0.6 / 0.24f64.sqrt();
        assert!(close(m.nr_precision, z) && close(m.r_precision, 1.0));
    }

    #[test]
    fn degenerate_inputs_are_errors() {
        let e = [0.0f32, 1.0, 2.0];
        assert!(matches!(
            nr_precision(&e, 1, &[4, 4, 4]).unwrap_err(),
            AnalysisError::ConstantProperty { value: 4, n: 3, .. }
        ));
        assert!(matches!(
            nr_precision(&e, 1, &[1, 2, 3]).unwrap_err(),
            AnalysisError::NoValidQuery { n: 3, .. }
        ));
        assert!(matches!(
            nr_precision(&e, 2, &[1, 1]).unwrap_err(),
            AnalysisError::Shape { .. }
        ));
        assert!(matches!(
            nr_precision(&e, 0, &[1, 1]).unwrap_err(),
            AnalysisError::Shape { .. }
        ));
        assert!(matches!(
            nr_precision(&e, 1, &[1, 1]).unwrap_err(),
            AnalysisError::Shape { .. }
        ));
        assert!(matches!(
            nr_precision(&[], 1, &[]).unwrap_err(),
            AnalysisError::Empty { .. }
        ));
        let e = [0.0f32, f32::INFINITY, 2.0];
        assert!(matches!(
            nr_precision(&e, 1, &[1, 1, 2]).unwrap_err(),
            AnalysisError::InvalidValue { index: 1, .. }
        ));
        let err = nr_precision_many(&[0.0f32, 1.0, 2.0], 1, &[&[1, 1, 2], &[3, 3, 3]]).unwrap_err();
        assert!(err.to_string().starts_with("properties[1]"), "{err}");
    }

    #[test]
    fn many_properties_equal_one_at_a_time() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let (n, d) = (60, 5);
        let e: Vec<f32> = (0..n * d).map(|_| rng.random::<f32>() - 0.5).collect();
        let a: Vec<u32> = (0..n).map(|_| rng.random_range(0..3)).collect();
        let b: Vec<u32> = (0..n).map(|_| rng.random_range(0..7)).collect();
        let both = nr_precision_many(&e, d, &[&a, &b]).unwrap();
        assert_eq!(both[0], nr_precision(&e, d, &a).unwrap());
        assert_eq!(both[1], nr_precision(&e, d, &b).unwrap());
    }

    #[test]
    fn critical_value_is_the_two_sided_one_percent_quantile() {
        let z = Normal::standard().inverse_cdf(0.995);
        assert!((z - NR_PRECISION_CRITICAL_VALUE).abs() < 5e-4, "{z}");
        assert!(is_significant(2.6) && is_significant(-2.6) && !is_significant(2.5));
    }

    /// The expected NR-Precision of a property independent of the embeddings.
    ///
    /// Given the query's value (count c), the other `n - 1` items hold `c - 1` matches in a
    /// uniformly random arrangement, so `X` is hypergeometric with mean `R (c - 1) / (n - 1)`,
    /// slightly below the `R p = R c / n` that Eq. 5 subtracts. Averaging the resulting
    /// per-query offset gives the exact expectation of the mean, a small negative number
    /// (about `-sqrt((K - 1) / (K n))` for `K` equally frequent values).
    fn expected_under_randomness(m: &NrPrecision) -> f64 {
        let n = m.per_query_r.len() as f64;
        let offsets = m
            .per_query_r
            .iter()
            .zip(&m.per_query_p)
            .filter(|(r, _)| **r > 0)
            .map(|(&r, &p)| {
                let r = r as f64;
                (r * r / (n - 1.0) - r * p) / (r * p * (1.0 - p)).sqrt()
            });
        offsets.sum::<f64>() / m.evaluated as f64
    }

    #[test]
    fn random_embeddings_do_not_cluster_by_a_random_property() {
        // Random embeddings and a property drawn independently of them. Each per-query term is
        // a standardised count, variance ≤ 1. The hits of different queries are nearly
        // uncorrelated under a random labelling (two same-value indicators of distinct pairs
        // are uncorrelated when values are drawn independently), except that a mutual-neighbour
        // pair counts the same indicator twice; so the mean over n queries has a standard
        // deviation of at most about sqrt(2 / n). Measured over 150 seeds each (n = 400 and
        // 1000, d = 8 to 64, 2 to 10 values), the deviation from the expectation had a standard
        // deviation of 0.6 to 0.85 sqrt(2 / n) and never exceeded 2.6 sqrt(2 / n). The bound below
        // is 4 sqrt(2 / n) = 0.28 around the exact expectation, ten times tighter than the
        // paper's 2.576 (which the test also checks).
        let (n, d) = (400, 8);
        let bound = 4.0 * (2.0 / n as f64).sqrt();
        for seed in 0..6u64 {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let e: Vec<f32> = (0..n * d).map(|_| rng.random::<f32>() * 2.0 - 1.0).collect();
            for k in [2u32, 3, 5, 10] {
                let property: Vec<u32> = (0..n).map(|_| rng.random_range(0..k)).collect();
                let m = nr_precision(&e, d, &property).unwrap();
                let expected = expected_under_randomness(&m);
                assert!(
                    (m.nr_precision - expected).abs() < bound,
                    "seed {seed}, {k} values: NR-Precision {} vs expectation {expected} ± {bound}",
                    m.nr_precision
                );
                assert!(!m.significant && m.nr_precision.abs() < NR_PRECISION_CRITICAL_VALUE);
            }
        }
    }

    #[test]
    fn clustered_embeddings_are_significant() {
        // A property that shifts the embeddings far apart: every neighbour shares the value.
        let (n, d) = (200, 4);
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let property: Vec<u32> = (0..n).map(|i| (i % 4) as u32).collect();
        let e: Vec<f32> = (0..n * d)
            .map(|j| property[j / d] as f32 * 10.0 + rng.random::<f32>())
            .collect();
        let m = nr_precision(&e, d, &property).unwrap();
        assert_eq!(m.r_precision, 1.0);
        // X = R = 49, p = 50 / 200: (49 - 12.25) / sqrt(49 · 0.25 · 0.75).
        assert!(close(m.nr_precision, 36.75 / (49.0f64 * 0.1875).sqrt()));
        assert!(m.significant);
    }
}
