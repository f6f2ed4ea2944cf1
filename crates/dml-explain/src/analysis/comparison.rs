//! Saliency-map comparison (Kobs et al., Sec. 3.1): the Pearson correlation and the
//! Jensen–Shannon divergence between the saliency maps two models produce for the same image,
//! correlations averaged in Fisher-z space, and the all-pairs matrix over `N` models.
//!
//! The definitions follow the authors' code (`gradient_explainer/compare_gradients.py` and
//! `create_stats_table.py`), which is what the paper's tables report:
//!
//! - `r = np.corrcoef(a.flatten(), b.flatten())[0, 1]`;
//! - `jsd = scipy.spatial.distance.jensenshannon(a / a.sum(), b / b.sum()) ** 2`, natural log;
//!   the paper quotes the base-2 value (bounded by 1), so both are returned;
//! - over images, `mean = tanh(mean(atanh r))` and `spread = tanh(std(atanh r))`, `std` with
//!   `ddof = 0` (`np.std` on a pandas column).
//!
//! Maps are flat `&[f32]` slices (an `h × w` map row-major, or any other layout, as long as both
//! maps of a pair use the same one); all arithmetic is in `f64`, as in numpy.

use rayon::prelude::*;

use super::error::AnalysisError;

/// The bound on `|z|` of the Fisher transform: `atanh(±1) = ±∞` is replaced by `±20`.
///
/// `tanh(20)` rounds to exactly `1.0` in `f64`, while every correlation `|r| < 1` that `f64` can
/// represent has `|atanh r| < 18.8`; so the clamp changes only `r = ±1` (identical or exactly
/// anti-linear maps). Without it one such image would make the mean `tanh(∞) = 1` whatever the
/// other images say, and the spread NaN; with it, such an image weighs like a very high
/// correlation.
pub const FISHER_Z_LIMIT: f64 = 20.0;

/// A Jensen–Shannon divergence in both units the paper's pipeline uses.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Jsd {
    /// Natural-log JSD: `scipy.spatial.distance.jensenshannon(p, q) ** 2`, in `[0, ln 2]`; what
    /// `compare_gradients.py` stores.
    pub nats: f64,
    /// Base-2 JSD `nats / ln 2`, in `[0, 1]`: the quantity the paper describes ("bounded by 1").
    pub bits: f64,
}

impl Jsd {
    /// Both units from the natural-log value.
    pub fn from_nats(nats: f64) -> Self {
        Self {
            nats,
            bits: nats / std::f64::consts::LN_2,
        }
    }
}

/// Correlations averaged in Fisher-z space (Sec. 3.1, following Silver & Dunlap, the paper's
/// ref. 29).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct FisherSummary {
    /// `tanh(mean_i z_i)`, `z_i = atanh r_i` (clamped, see [`FISHER_Z_LIMIT`]): the mean
    /// correlation the paper's tables report.
    pub mean: f64,
    /// `tanh(std_i z_i)` with `ddof = 0`: the "±" of the paper's tables.
    pub spread: f64,
    /// `mean_i z_i`, the mean in z space.
    pub mean_z: f64,
    /// `std_i z_i` with `ddof = 0`, the standard deviation in z space.
    pub std_z: f64,
}

/// The comparison of one model pair's saliency maps over `n` images (Sec. 3.1).
#[derive(Debug, Clone, PartialEq)]
pub struct MapComparison {
    /// Per-image Pearson correlation `r_i`, `[n]`.
    pub pearson: Vec<f64>,
    /// Per-image Fisher transform `z_i = atanh r_i` (clamped to `±`[`FISHER_Z_LIMIT`]), `[n]`.
    pub fisher_z: Vec<f64>,
    /// Per-image Jensen–Shannon divergence, `[n]`.
    pub jsd: Vec<Jsd>,
    /// The Fisher-z mean and spread of `pearson`.
    pub correlation: FisherSummary,
    /// The arithmetic mean of `jsd` (in both units).
    pub mean_jsd: Jsd,
}

/// The all-pairs comparison of `N` models over the same `n` images (the paper's Tables 1–3).
///
/// Both matrices are `N × N`, row-major (`[i * models + j]`), and symmetric. The diagonal is
/// set, not computed, to what comparing a model with itself gives: `r = 1` (mean 1, spread 0,
/// `mean_z =` [`FISHER_Z_LIMIT`]) and JSD 0, as `create_stats_table.py` writes "100±0".
#[derive(Debug, Clone, PartialEq)]
pub struct ComparisonMatrix {
    /// Number of models `N`.
    pub models: usize,
    /// Number of images `n` each pair was compared on.
    pub images: usize,
    /// `[N × N]` Fisher-z mean and spread of the per-image correlations of models `i` and `j`.
    pub correlation: Vec<FisherSummary>,
    /// `[N × N]` mean per-image JSD of models `i` and `j`.
    pub mean_jsd: Vec<Jsd>,
}

impl ComparisonMatrix {
    /// The correlation summary of models `i` and `j`.
    ///
    /// # Panics
    /// When `i` or `j` is not below [`models`](Self::models).
    pub fn correlation_at(&self, i: usize, j: usize) -> FisherSummary {
        assert!(
            i < self.models && j < self.models,
            "({i}, {j}) outside {0} × {0}",
            self.models
        );
        self.correlation[i * self.models + j]
    }

    /// The mean JSD of models `i` and `j`.
    ///
    /// # Panics
    /// When `i` or `j` is not below [`models`](Self::models).
    pub fn mean_jsd_at(&self, i: usize, j: usize) -> Jsd {
        assert!(
            i < self.models && j < self.models,
            "({i}, {j}) outside {0} × {0}",
            self.models
        );
        self.mean_jsd[i * self.models + j]
    }
}

/// The Pearson correlation of two equally long maps, `np.corrcoef(a, b)[0, 1]`:
/// `r = Σ (a_k - ā)(b_k - b̄) / sqrt(Σ (a_k - ā)² Σ (b_k - b̄)²)` over the flattened maps,
/// computed in `f64` and clipped to `[-1, 1]` (as numpy clips, since rounding can leave `|r|`
/// a hair above 1).
///
/// `a`, `b`: `[h · w]` each (any layout, the same for both).
///
/// # Errors
/// [`AnalysisError::Shape`] when the lengths differ, [`AnalysisError::Empty`] when they are 0,
/// [`AnalysisError::InvalidValue`] for a NaN or infinite value, and
/// [`AnalysisError::ConstantMap`] when either map is constant (zero variance: numpy would return
/// NaN; this function refuses rather than let a NaN into a mean).
pub fn pearson(a: &[f32], b: &[f32]) -> Result<f64, AnalysisError> {
    check_same_len(a.len(), b.len(), || "a, b".to_string())?;
    let sa = MapStats::for_pearson(a, || "a".to_string())?;
    let sb = MapStats::for_pearson(b, || "b".to_string())?;
    Ok(pearson_with(a, b, &sa, &sb))
}

/// The Fisher transform `z = atanh r`, with `r = ±1` mapped to `±`[`FISHER_Z_LIMIT`] instead
/// of `±∞`.
///
/// The input must be a correlation, `-1 ≤ r ≤ 1` (not checked here; [`fisher_aggregate`]
/// checks).
pub fn fisher_z(r: f64) -> f64 {
    r.atanh().clamp(-FISHER_Z_LIMIT, FISHER_Z_LIMIT)
}

/// Averages correlations in Fisher-z space, as `create_stats_table.py`'s `fisher_z_aggr`:
/// `mean = tanh(mean_i atanh r_i)`, `spread = tanh(std_i atanh r_i)` with `ddof = 0`.
///
/// `rs`: `[n]` correlations in `[-1, 1]`; `±1` is clamped as [`fisher_z`] documents.
///
/// # Errors
/// [`AnalysisError::Empty`] for no correlations, [`AnalysisError::InvalidValue`] for a NaN or a
/// value outside `[-1, 1]`.
pub fn fisher_aggregate(rs: &[f64]) -> Result<FisherSummary, AnalysisError> {
    if rs.is_empty() {
        return Err(AnalysisError::Empty {
            what: "correlations".into(),
        });
    }
    if let Some((index, &r)) = rs.iter().enumerate().find(|(_, r)| !(-1.0..=1.0).contains(*r)) {
        return Err(AnalysisError::InvalidValue {
            what: "correlations".into(),
            index,
            value: r,
            reason: "a correlation must lie in [-1, 1]",
        });
    }
    let zs: Vec<f64> = rs.iter().map(|&r| fisher_z(r)).collect();
    Ok(fisher_of_z(&zs))
}

/// The Jensen–Shannon divergence of two saliency maps, each divided by its sum (Sec. 3.1):
/// with `p = a / Σa`, `q = b / Σb`, `m = (p + q) / 2`,
/// `JSD = ½ Σ p log(p / m) + ½ Σ q log(q / m)` (natural log; `0 log 0 = 0`), which is
/// `scipy.spatial.distance.jensenshannon(p, q) ** 2`. [`Jsd::bits`] is the paper's base-2 value.
///
/// `p_map`, `q_map`: `[h · w]` each, non-negative (saliency maps in `[0, 1]`).
///
/// # Errors
/// [`AnalysisError::Shape`] when the lengths differ, [`AnalysisError::Empty`] when they are 0,
/// [`AnalysisError::InvalidValue`] for a negative, NaN or infinite value, and
/// [`AnalysisError::ZeroSum`] when a map sums to 0 (all zeros: no distribution).
pub fn jsd(p_map: &[f32], q_map: &[f32]) -> Result<Jsd, AnalysisError> {
    check_same_len(p_map.len(), q_map.len(), || "p_map, q_map".to_string())?;
    let sp = MapStats::for_jsd(p_map, || "p_map".to_string())?;
    let sq = MapStats::for_jsd(q_map, || "q_map".to_string())?;
    Ok(Jsd::from_nats(jsd_nats_with(p_map, q_map, &sp, &sq)))
}

/// Compares one model pair's saliency maps of the same `n` images: per image the Pearson
/// correlation ([`pearson`]) and the JSD ([`jsd`]), then their Fisher-z summary
/// ([`fisher_aggregate`]) and mean.
///
/// `maps_a[i]` and `maps_b[i]`: the two models' maps of image `i`, `[h_i · w_i]` each (sizes may
/// differ between images, not within a pair). Images are processed in parallel.
///
/// # Errors
/// As [`pearson`] and [`jsd`], naming the map (`maps_a[i]`); [`AnalysisError::Shape`] when the
/// two lists differ in length, [`AnalysisError::Empty`] when they are empty.
pub fn compare_maps<A, B>(maps_a: &[A], maps_b: &[B]) -> Result<MapComparison, AnalysisError>
where
    A: AsRef<[f32]> + Sync,
    B: AsRef<[f32]> + Sync,
{
    if maps_a.len() != maps_b.len() {
        return Err(AnalysisError::Shape {
            what: "maps_a, maps_b".into(),
            message: format!("{} maps against {} maps", maps_a.len(), maps_b.len()),
        });
    }
    if maps_a.is_empty() {
        return Err(AnalysisError::Empty { what: "maps_a".into() });
    }
    // Every result is computed, and the first error in image order is reported, so that the
    // message does not depend on which thread finished first.
    let per_image: Vec<Result<(f64, f64), AnalysisError>> = maps_a
        .par_iter()
        .zip(maps_b.par_iter())
        .enumerate()
        .map(|(i, (a, b))| {
            let (a, b) = (a.as_ref(), b.as_ref());
            check_same_len(a.len(), b.len(), || format!("maps_a[{i}], maps_b[{i}]"))?;
            let sa = MapStats::for_both(a, || format!("maps_a[{i}]"))?;
            let sb = MapStats::for_both(b, || format!("maps_b[{i}]"))?;
            Ok((pearson_with(a, b, &sa, &sb), jsd_nats_with(a, b, &sa, &sb)))
        })
        .collect();
    let per_image = per_image.into_iter().collect::<Result<Vec<_>, _>>()?;
    let pearson: Vec<f64> = per_image.iter().map(|&(r, _)| r).collect();
    let fisher_z: Vec<f64> = pearson.iter().map(|&r| fisher_z(r)).collect();
    let jsd: Vec<Jsd> = per_image.iter().map(|&(_, j)| Jsd::from_nats(j)).collect();
    Ok(MapComparison {
        correlation: fisher_of_z(&fisher_z),
        mean_jsd: Jsd::from_nats(mean(per_image.iter().map(|&(_, j)| j), per_image.len())),
        pearson,
        fisher_z,
        jsd,
    })
}

/// The all-pairs comparison of `N` models' saliency maps of the same `n` images: for every pair
/// `i < j` the Fisher-z mean and spread of the per-image correlations and the mean JSD
/// ([`compare_maps`]), mirrored to `j, i`; the diagonal as [`ComparisonMatrix`] documents.
///
/// `maps[m][k]`: model `m`'s map of image `k`, `[h_k · w_k]` (the same size for every model).
/// Each map is validated once (not once per pair); images are processed in parallel.
///
/// # Errors
/// [`AnalysisError::Empty`] for no models or no images; [`AnalysisError::Shape`] when models
/// have different numbers of images or an image's maps differ in size; the map errors of
/// [`compare_maps`] naming `model m, image k`.
pub fn comparison_matrix<M>(maps: &[Vec<M>]) -> Result<ComparisonMatrix, AnalysisError>
where
    M: AsRef<[f32]> + Sync,
{
    let models = maps.len();
    let images = maps.first().map_or(0, Vec::len);
    if models == 0 {
        return Err(AnalysisError::Empty {
            what: "maps (models)".into(),
        });
    }
    if images == 0 {
        return Err(AnalysisError::Empty {
            what: "maps[0] (images)".into(),
        });
    }
    if let Some((m, list)) = maps.iter().enumerate().find(|(_, l)| l.len() != images) {
        return Err(AnalysisError::Shape {
            what: format!("maps[{m}]"),
            message: format!("{} images, while model 0 has {images}", list.len()),
        });
    }
    // Validate every map once and keep the sums and centred sums of squares that every pair
    // it takes part in needs.
    let mut stats = Vec::with_capacity(models * images);
    for (m, list) in maps.iter().enumerate() {
        for (k, map) in list.iter().enumerate() {
            let map = map.as_ref();
            check_same_len(maps[0][k].as_ref().len(), map.len(), || {
                format!("maps[0][{k}], maps[{m}][{k}] (model 0 and model {m}, image {k})")
            })?;
            stats.push(MapStats::for_both(map, || format!("model {m}, image {k}"))?);
        }
    }
    let diagonal_correlation = fisher_of_z(&[FISHER_Z_LIMIT]);
    let mut correlation = vec![diagonal_correlation; models * models];
    let mut mean_jsd = vec![Jsd::from_nats(0.0); models * models];
    for i in 0..models {
        for j in i + 1..models {
            let per_image: Vec<(f64, f64)> = (0..images)
                .into_par_iter()
                .map(|k| {
                    let (a, b) = (maps[i][k].as_ref(), maps[j][k].as_ref());
                    let (sa, sb) = (&stats[i * images + k], &stats[j * images + k]);
                    (fisher_z(pearson_with(a, b, sa, sb)), jsd_nats_with(a, b, sa, sb))
                })
                .collect();
            let zs: Vec<f64> = per_image.iter().map(|&(z, _)| z).collect();
            let summary = fisher_of_z(&zs);
            let jsd = Jsd::from_nats(mean(per_image.iter().map(|&(_, j)| j), images));
            for (r, c) in [(i, j), (j, i)] {
                correlation[r * models + c] = summary;
                mean_jsd[r * models + c] = jsd;
            }
        }
    }
    Ok(ComparisonMatrix {
        models,
        images,
        correlation,
        mean_jsd,
    })
}

/// What the pair statistics need of one map, computed (and the map validated) once.
#[derive(Debug, Clone, Copy)]
struct MapStats {
    /// `Σ a_k`, the JSD's normaliser.
    sum: f64,
    /// `ā`.
    mean: f64,
    /// `Σ (a_k - ā)²`, the Pearson denominator's factor.
    centred_ss: f64,
}

impl MapStats {
    /// Validation for Pearson: finite, non-empty, not constant.
    fn for_pearson(map: &[f32], what: impl Fn() -> String) -> Result<Self, AnalysisError> {
        check_values(map, false, &what)?;
        check_not_constant(map, &what)?;
        Ok(Self::of(map))
    }

    /// Validation for the JSD: finite, non-negative, non-empty, with a positive sum.
    fn for_jsd(map: &[f32], what: impl Fn() -> String) -> Result<Self, AnalysisError> {
        check_values(map, true, &what)?;
        let stats = Self::of(map);
        if stats.sum <= 0.0 {
            return Err(AnalysisError::ZeroSum {
                what: what(),
                len: map.len(),
            });
        }
        Ok(stats)
    }

    /// Validation for both statistics at once: finite, non-negative, non-empty, not constant
    /// (a non-constant, non-negative map has a positive sum).
    fn for_both(map: &[f32], what: impl Fn() -> String) -> Result<Self, AnalysisError> {
        check_values(map, true, &what)?;
        check_not_constant(map, &what)?;
        Ok(Self::of(map))
    }

    fn of(map: &[f32]) -> Self {
        let sum: f64 = map.iter().map(|&x| f64::from(x)).sum();
        let mean = sum / map.len() as f64;
        // Two passes (mean, then centred squares) as numpy does, rather than Σx² - n x̄², which
        // cancels catastrophically for maps with a large offset and a small variance.
        let centred_ss = map.iter().map(|&x| (f64::from(x) - mean).powi(2)).sum();
        Self { sum, mean, centred_ss }
    }
}

/// `Σ (a - ā)(b - b̄) / sqrt(Σ (a - ā)² Σ (b - b̄)²)`, clipped to `[-1, 1]`.
///
/// The denominator is `sqrt(sxx · syy)`, not `sqrt(sxx) · sqrt(syy)`, so that identical maps
/// give exactly `r = 1` (`sqrt(x²) = |x|` is exact in IEEE arithmetic).
fn pearson_with(a: &[f32], b: &[f32], sa: &MapStats, sb: &MapStats) -> f64 {
    let sxy: f64 = a
        .iter()
        .zip(b)
        .map(|(&x, &y)| (f64::from(x) - sa.mean) * (f64::from(y) - sb.mean))
        .sum();
    (sxy / (sa.centred_ss * sb.centred_ss).sqrt()).clamp(-1.0, 1.0)
}

/// `½ Σ p log(p / m) + ½ Σ q log(q / m)` with `p = a / Σa`, `q = b / Σb`, `m = (p + q) / 2`, in
/// nats; scipy's `rel_entr` convention `0 log(0 / m) = 0` (and `m > 0` wherever `p > 0`).
fn jsd_nats_with(a: &[f32], b: &[f32], sa: &MapStats, sb: &MapStats) -> f64 {
    let mut total = 0.0;
    for (&x, &y) in a.iter().zip(b) {
        let p = f64::from(x) / sa.sum;
        let q = f64::from(y) / sb.sum;
        let m = 0.5 * (p + q);
        if p > 0.0 {
            total += p * (p / m).ln();
        }
        if q > 0.0 {
            total += q * (q / m).ln();
        }
    }
    // The divergence is non-negative; rounding can leave a sum of terms of both signs a few ulps
    // below 0 for nearly identical maps (identical maps give exactly 0, since m = p there).
    (0.5 * total).max(0.0)
}

/// Mean and population standard deviation (`ddof = 0`) of `zs`, mapped back through `tanh`.
fn fisher_of_z(zs: &[f64]) -> FisherSummary {
    let mean_z = mean(zs.iter().copied(), zs.len());
    let std_z = mean(zs.iter().map(|&z| (z - mean_z).powi(2)), zs.len()).sqrt();
    FisherSummary {
        mean: mean_z.tanh(),
        spread: std_z.tanh(),
        mean_z,
        std_z,
    }
}

fn mean(values: impl Iterator<Item = f64>, n: usize) -> f64 {
    values.sum::<f64>() / n as f64
}

fn check_same_len(a: usize, b: usize, what: impl Fn() -> String) -> Result<(), AnalysisError> {
    if a != b {
        return Err(AnalysisError::Shape {
            what: what(),
            message: format!("maps of {a} and {b} values; a pair must have the same size"),
        });
    }
    Ok(())
}

/// Rejects an empty map and NaN or infinite values (and negative ones when `non_negative`).
fn check_values(map: &[f32], non_negative: bool, what: &impl Fn() -> String) -> Result<(), AnalysisError> {
    if map.is_empty() {
        return Err(AnalysisError::Empty { what: what() });
    }
    for (index, &x) in map.iter().enumerate() {
        let reason = if !x.is_finite() {
            "not finite"
        } else if non_negative && x < 0.0 {
            "negative (the JSD needs a map that normalises to a distribution)"
        } else {
            continue;
        };
        return Err(AnalysisError::InvalidValue {
            what: what(),
            index,
            value: f64::from(x),
            reason,
        });
    }
    Ok(())
}

fn check_not_constant(map: &[f32], what: &impl Fn() -> String) -> Result<(), AnalysisError> {
    // Comparing against the first value is exact, unlike testing a computed variance for 0.
    if map.iter().all(|&x| x == map[0]) {
        return Err(AnalysisError::ConstantMap {
            what: what(),
            len: map.len(),
            value: f64::from(map[0]),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    use super::*;

    fn close(got: f64, want: f64, tol: f64) -> bool {
        (got - want).abs() <= tol
    }

    #[test]
    fn pearson_hand_values() {
        assert_eq!(pearson(&[1.0, 2.0, 3.0], &[2.0, 4.0, 6.0]).unwrap(), 1.0);
        assert_eq!(pearson(&[1.0, 2.0, 3.0], &[3.0, 2.0, 1.0]).unwrap(), -1.0);
        // Centred: a = (-1.5, -0.5, 0.5, 1.5), b = (-1.5, 0.5, -0.5, 1.5); Σab = 4, Σa² = Σb² = 5.
        let r = pearson(&[1.0, 2.0, 3.0, 4.0], &[1.0, 3.0, 2.0, 4.0]).unwrap();
        assert!(close(r, 0.8, 1e-15), "{r}");
        // Orthogonal centred vectors: (-1, 1, -1, 1) and (-1, -1, 1, 1).
        let r = pearson(&[0.0, 2.0, 0.0, 2.0], &[0.0, 0.0, 2.0, 2.0]).unwrap();
        assert!(close(r, 0.0, 1e-15), "{r}");
    }

    #[test]
    fn pearson_rejects_constant_mismatched_and_non_finite_maps() {
        let e = pearson(&[0.5, 0.5, 0.5], &[0.0, 1.0, 2.0]).unwrap_err();
        assert!(
            matches!(e, AnalysisError::ConstantMap { ref what, len: 3, .. } if what == "a"),
            "{e}"
        );
        assert!(e.to_string().contains("constant"), "{e}");
        let e = pearson(&[0.0, 1.0], &[0.0, 1.0, 2.0]).unwrap_err();
        assert!(e.to_string().contains("2 and 3"), "{e}");
        let e = pearson(&[0.0, f32::NAN], &[0.0, 1.0]).unwrap_err();
        assert!(matches!(e, AnalysisError::InvalidValue { index: 1, .. }), "{e}");
        assert!(matches!(pearson(&[], &[]).unwrap_err(), AnalysisError::Empty { .. }));
        // Pearson alone accepts negative values (only the JSD needs a distribution).
        assert_eq!(pearson(&[-1.0, 1.0], &[-2.0, 2.0]).unwrap(), 1.0);
    }

    #[test]
    fn jsd_hand_values() {
        // Disjoint supports: m = (½, ½), each KL is ln 2, so JSD = ln 2 nats = 1 bit.
        let j = jsd(&[1.0, 0.0], &[0.0, 1.0]).unwrap();
        assert!(
            close(j.nats, std::f64::consts::LN_2, 1e-15) && close(j.bits, 1.0, 1e-15),
            "{j:?}"
        );
        // p = (½, ½), q = (¼, ¾), m = (⅜, ⅝); the scale of a map does not matter (the inputs are
        // exact in binary, so the only error is the rounding of the logarithms).
        let want =
            0.5 * (0.5 * (4.0f64 / 3.0).ln() + 0.5 * 0.8f64.ln() + 0.25 * (2.0f64 / 3.0).ln() + 0.75 * 1.2f64.ln());
        let j = jsd(&[2.0, 2.0], &[0.5, 1.5]).unwrap();
        assert!(close(j.nats, want, 1e-15), "{} vs {want}", j.nats);
        assert!(close(j.bits, want / std::f64::consts::LN_2, 1e-15));
        // Symmetric.
        let k = jsd(&[0.5, 1.5], &[2.0, 2.0]).unwrap();
        assert!(close(j.nats, k.nats, 1e-17));
    }

    #[test]
    fn jsd_rejects_zero_sum_and_negative_maps() {
        let e = jsd(&[0.0, 0.0], &[0.0, 1.0]).unwrap_err();
        assert!(
            matches!(e, AnalysisError::ZeroSum { ref what, len: 2 } if what == "p_map"),
            "{e}"
        );
        let e = jsd(&[0.0, 1.0], &[-0.5, 1.0]).unwrap_err();
        assert!(
            matches!(e, AnalysisError::InvalidValue { ref what, index: 0, .. } if what == "q_map"),
            "{e}"
        );
        assert!(matches!(
            jsd(&[1.0], &[1.0, 2.0]).unwrap_err(),
            AnalysisError::Shape { .. }
        ));
    }

    #[test]
    fn fisher_hand_values_and_clamp() {
        // z = ±atanh ½: mean 0, population std atanh ½, so the spread maps back to exactly ½.
        let s = fisher_aggregate(&[0.5, -0.5]).unwrap();
        assert!(close(s.mean, 0.0, 1e-15) && close(s.spread, 0.5, 1e-15), "{s:?}");
        // One value: spread 0 (ddof 0), mean the value itself.
        let s = fisher_aggregate(&[0.3]).unwrap();
        assert!(close(s.mean, 0.3, 1e-15) && s.spread == 0.0, "{s:?}");
        // r = 1 is clamped, not infinite: the mean stays finite and below 1.
        assert_eq!(fisher_z(1.0), FISHER_Z_LIMIT);
        assert_eq!(fisher_z(-1.0), -FISHER_Z_LIMIT);
        let s = fisher_aggregate(&[1.0, 0.0]).unwrap();
        assert!(
            close(s.mean, (FISHER_Z_LIMIT / 2.0).tanh(), 1e-15) && s.spread.is_finite(),
            "{s:?}"
        );
        assert_eq!(fisher_aggregate(&[1.0, 1.0]).unwrap().mean, 1.0);
        // Every correlation below 1 in f64 is untouched by the clamp.
        let below_one = 1.0 - f64::EPSILON / 2.0;
        assert!(fisher_z(below_one) < FISHER_Z_LIMIT && FISHER_Z_LIMIT.tanh() == 1.0);
        assert!(matches!(
            fisher_aggregate(&[]).unwrap_err(),
            AnalysisError::Empty { .. }
        ));
        let e = fisher_aggregate(&[0.1, 1.5]).unwrap_err();
        assert!(matches!(e, AnalysisError::InvalidValue { index: 1, .. }), "{e}");
        assert!(fisher_aggregate(&[f64::NAN]).is_err());
    }

    fn random_map(rng: &mut ChaCha8Rng, len: usize) -> Vec<f32> {
        // Saliency-like: values in [0, 1] with exact zeros and ones.
        (0..len)
            .map(|_| match rng.random_range(0..10) {
                0 => 0.0,
                1 => 1.0,
                _ => rng.random::<f32>(),
            })
            .collect()
    }

    #[test]
    fn identical_maps_give_r_one_and_zero_jsd() {
        for seed in 0..8 {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let maps: Vec<Vec<f32>> = (0..5).map(|_| random_map(&mut rng, 37 * 23)).collect();
            for map in &maps {
                assert_eq!(pearson(map, map).unwrap(), 1.0, "seed {seed}");
                let j = jsd(map, map).unwrap();
                assert_eq!((j.nats, j.bits), (0.0, 0.0), "seed {seed}");
                // A rescaled copy is the same distribution and perfectly correlated.
                let scaled: Vec<f32> = map.iter().map(|&x| x * 0.25).collect();
                assert!(close(pearson(map, &scaled).unwrap(), 1.0, 1e-12), "seed {seed}");
                assert!(jsd(map, &scaled).unwrap().nats < 1e-15, "seed {seed}");
            }
            let c = compare_maps(&maps, &maps).unwrap();
            assert_eq!(c.correlation.mean, 1.0);
            assert_eq!(c.correlation.spread, 0.0);
            assert_eq!(c.mean_jsd.nats, 0.0);
            assert!(c.pearson.iter().all(|&r| r == 1.0));
        }
    }

    #[test]
    fn jsd_and_correlation_stay_in_range_for_random_maps() {
        for seed in 0..8 {
            let mut rng = ChaCha8Rng::seed_from_u64(100 + seed);
            let a = random_map(&mut rng, 400);
            let b = random_map(&mut rng, 400);
            let r = pearson(&a, &b).unwrap();
            let j = jsd(&a, &b).unwrap();
            assert!((-1.0..=1.0).contains(&r));
            assert!(j.nats > 0.0 && j.bits <= 1.0, "{j:?}");
        }
    }

    #[test]
    fn compare_maps_agrees_with_the_single_functions() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let a: Vec<Vec<f32>> = (0..4).map(|i| random_map(&mut rng, 50 + i)).collect();
        let b: Vec<Vec<f32>> = (0..4).map(|i| random_map(&mut rng, 50 + i)).collect();
        let c = compare_maps(&a, &b).unwrap();
        let rs: Vec<f64> = a.iter().zip(&b).map(|(x, y)| pearson(x, y).unwrap()).collect();
        let js: Vec<f64> = a.iter().zip(&b).map(|(x, y)| jsd(x, y).unwrap().nats).collect();
        assert_eq!(c.pearson, rs);
        assert_eq!(c.jsd.iter().map(|j| j.nats).collect::<Vec<_>>(), js);
        assert_eq!(c.correlation, fisher_aggregate(&rs).unwrap());
        assert!(close(c.mean_jsd.nats, js.iter().sum::<f64>() / 4.0, 1e-17));
        assert_eq!(c.fisher_z, rs.iter().map(|&r| r.atanh()).collect::<Vec<_>>());
    }

    #[test]
    fn compare_maps_names_the_failing_map() {
        let a = vec![vec![0.0f32, 1.0], vec![0.5, 0.5]];
        let b = vec![vec![1.0f32, 0.0], vec![0.0, 1.0]];
        let e = compare_maps(&a, &b).unwrap_err();
        assert!(e.to_string().starts_with("maps_a[1] is constant"), "{e}");
        let e = compare_maps(&a, &b[..1]).unwrap_err();
        assert!(matches!(e, AnalysisError::Shape { .. }), "{e}");
    }

    #[test]
    fn matrix_is_symmetric_with_unit_diagonal_and_matches_pairs() {
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let maps: Vec<Vec<Vec<f32>>> = (0..3)
            .map(|_| (0..6).map(|k| random_map(&mut rng, 30 + 3 * k)).collect())
            .collect();
        let m = comparison_matrix(&maps).unwrap();
        assert_eq!((m.models, m.images), (3, 6));
        for i in 0..3 {
            assert_eq!(m.correlation_at(i, i).mean, 1.0);
            assert_eq!(m.correlation_at(i, i).spread, 0.0);
            assert_eq!(m.mean_jsd_at(i, i).nats, 0.0);
            for j in 0..3 {
                assert_eq!(m.correlation_at(i, j), m.correlation_at(j, i));
                assert_eq!(m.mean_jsd_at(i, j), m.mean_jsd_at(j, i));
                if i != j {
                    let pair = compare_maps(&maps[i], &maps[j]).unwrap();
                    let got = m.correlation_at(i, j);
                    assert!(close(got.mean, pair.correlation.mean, 1e-15));
                    assert!(close(got.spread, pair.correlation.spread, 1e-15));
                    assert!(close(m.mean_jsd_at(i, j).nats, pair.mean_jsd.nats, 1e-15));
                }
            }
        }
    }

    #[test]
    fn matrix_rejects_ragged_input_naming_model_and_image() {
        let ok = vec![vec![0.0f32, 1.0, 0.5]; 2];
        let e = comparison_matrix(&[ok.clone(), vec![vec![0.0f32, 1.0, 0.5]]]).unwrap_err();
        assert!(e.to_string().contains("maps[1]"), "{e}");
        let e = comparison_matrix(&[ok.clone(), vec![vec![0.0f32, 1.0, 0.5], vec![0.0, 1.0]]]).unwrap_err();
        assert!(e.to_string().contains("image 1"), "{e}");
        let e = comparison_matrix(&[ok, vec![vec![0.0f32, 1.0, 0.5], vec![0.0, 0.0, 0.0]]]).unwrap_err();
        assert!(e.to_string().starts_with("model 1, image 1"), "{e}");
        assert!(comparison_matrix::<Vec<f32>>(&[]).is_err());
    }
}
