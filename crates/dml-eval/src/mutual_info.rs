//! Normalised and adjusted mutual information with scikit-learn's semantics (`average_method =
//! "arithmetic"`), including its degenerate cases and its hypergeometric expected mutual information.

use std::collections::HashMap;

use crate::error::EvalError;

/// `ln Γ(x)` for `x > 0` by the Lanczos approximation (g = 7, 9 coefficients), accurate to about 1e-15
/// relative; the reflection formula covers `x < 0.5`.
pub fn ln_gamma(x: f64) -> f64 {
    const G: f64 = 7.0;
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Γ(x)Γ(1-x) = π / sin(πx).
        return (std::f64::consts::PI / (std::f64::consts::PI * x).sin()).abs().ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = C[0];
    let t = x + G + 0.5;
    for (i, &c) in C.iter().enumerate().skip(1) {
        a += c / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// The contingency table of two labelings as sparse counts plus marginals.
struct Contingency {
    /// Size of every row class (`a_i`).
    rows: Vec<u64>,
    /// Size of every column cluster (`b_j`).
    cols: Vec<u64>,
    /// Non-zero cells `n_ij`.
    cells: Vec<u64>,
    /// Cells' row and column ids.
    cell_ids: Vec<(usize, usize)>,
    /// Number of samples.
    n: u64,
}

fn contingency(labels_true: &[u32], labels_pred: &[u32]) -> Result<Contingency, EvalError> {
    if labels_true.len() != labels_pred.len() {
        return Err(EvalError::LabelingLength {
            true_len: labels_true.len(),
            pred_len: labels_pred.len(),
        });
    }
    let dense = |labels: &[u32]| -> (Vec<usize>, usize) {
        let mut ids: HashMap<u32, usize> = HashMap::new();
        let v = labels
            .iter()
            .map(|&l| {
                let next = ids.len();
                *ids.entry(l).or_insert(next)
            })
            .collect();
        (v, ids.len())
    };
    let (t, nt) = dense(labels_true);
    let (p, np) = dense(labels_pred);
    let mut rows = vec![0u64; nt];
    let mut cols = vec![0u64; np];
    let mut cell_map: HashMap<(usize, usize), u64> = HashMap::new();
    for (&a, &b) in t.iter().zip(&p) {
        rows[a] += 1;
        cols[b] += 1;
        *cell_map.entry((a, b)).or_insert(0) += 1;
    }
    let mut cell_vec: Vec<((usize, usize), u64)> = cell_map.into_iter().collect();
    cell_vec.sort_unstable();
    Ok(Contingency {
        rows,
        cols,
        cells: cell_vec.iter().map(|c| c.1).collect(),
        cell_ids: cell_vec.iter().map(|c| c.0).collect(),
        n: labels_true.len() as u64,
    })
}

/// sklearn's `entropy` of a labeling given its class sizes (natural log).
fn entropy(sizes: &[u64]) -> f64 {
    let sizes: Vec<f64> = sizes.iter().filter(|&&s| s > 0).map(|&s| s as f64).collect();
    if sizes.len() <= 1 {
        return 0.0;
    }
    let total: f64 = sizes.iter().sum();
    let log_total = total.ln();
    -sizes.iter().map(|&s| (s / total) * (s.ln() - log_total)).sum::<f64>()
}

/// sklearn's `mutual_info_score` from a contingency table (natural log, clipped at 0).
fn mutual_info(c: &Contingency) -> f64 {
    if c.rows.len() == 1 || c.cols.len() == 1 {
        return 0.0;
    }
    let total = c.n as f64;
    let (log_pi_sum, log_pj_sum) = (total.ln(), total.ln());
    let mut mi = 0.0;
    for (&nij, &(i, j)) in c.cells.iter().zip(&c.cell_ids) {
        let nij_f = nij as f64;
        let cnm = nij_f / total;
        let outer = (c.rows[i] as f64) * (c.cols[j] as f64);
        let log_outer = -outer.ln() + log_pi_sum + log_pj_sum;
        let term = cnm * (nij_f.ln() - total.ln()) + cnm * log_outer;
        // sklearn zeroes terms below machine epsilon before summing.
        mi += if term.abs() < f64::EPSILON { 0.0 } else { term };
    }
    mi.max(0.0)
}

/// sklearn's `expected_mutual_information` under the hypergeometric model of random labelings with the
/// given marginals. Cells with equal `(a_i, b_j)` contribute equally, so marginals are grouped by value
/// first, which makes tables with thousands of classes cheap.
fn expected_mutual_info(c: &Contingency) -> f64 {
    if c.rows.len() == 1 || c.cols.len() == 1 {
        return 0.0;
    }
    let n = c.n;
    let group = |v: &[u64]| -> Vec<(u64, f64)> {
        let mut m: HashMap<u64, u64> = HashMap::new();
        for &x in v {
            *m.entry(x).or_insert(0) += 1;
        }
        let mut g: Vec<(u64, f64)> = m.into_iter().map(|(k, c)| (k, c as f64)).collect();
        g.sort_unstable_by_key(|x| x.0);
        g
    };
    let (ga, gb) = (group(&c.rows), group(&c.cols));
    // ln(k!) for k in 0..=n, each from ln Γ(k + 1) directly so that errors do not accumulate.
    let lnf: Vec<f64> = (0..=n).map(|k| ln_gamma(k as f64 + 1.0)).collect();
    let nf = n as f64;
    let log_n = nf.ln();
    let mut emi = 0.0;
    for &(a, wa) in &ga {
        for &(b, wb) in &gb {
            let start = 1.max((a + b).saturating_sub(n));
            let end = a.min(b);
            let fixed =
                lnf[a as usize] + lnf[b as usize] + lnf[(n - a) as usize] + lnf[(n - b) as usize] - lnf[n as usize];
            let (log_a, log_b) = ((a as f64).ln(), (b as f64).ln());
            let mut sum = 0.0;
            for nij in start..=end {
                let nij_f = nij as f64;
                let term1 = nij_f / nf;
                let term2 = log_n + nij_f.ln() - log_a - log_b;
                let gln = fixed
                    - lnf[nij as usize]
                    - lnf[(a - nij) as usize]
                    - lnf[(b - nij) as usize]
                    - lnf[(n + nij - a - b) as usize];
                sum += term1 * term2 * gln.exp();
            }
            emi += wa * wb * sum;
        }
    }
    emi
}

/// Normalised mutual information of two labelings, as scikit-learn's
/// `normalized_mutual_info_score(labels_true, labels_pred, average_method="arithmetic")`:
/// `MI / ((H(true) + H(pred)) / 2)`, with `1.0` when both labelings have a single cluster (or no samples)
/// and `0.0` whenever the mutual information is zero otherwise.
///
/// # Errors
/// [`EvalError::LabelingLength`] when the slices differ in length.
pub fn normalized_mutual_info(labels_true: &[u32], labels_pred: &[u32]) -> Result<f64, EvalError> {
    let c = contingency(labels_true, labels_pred)?;
    if c.rows.len() == c.cols.len() && c.rows.len() <= 1 {
        return Ok(1.0);
    }
    let mi = mutual_info(&c);
    if mi == 0.0 {
        return Ok(0.0);
    }
    let normalizer = (entropy(&c.rows) + entropy(&c.cols)) / 2.0;
    Ok(mi / normalizer)
}

/// Adjusted mutual information of two labelings, as scikit-learn's
/// `adjusted_mutual_info_score(labels_true, labels_pred, average_method="arithmetic")`:
/// `(MI - E[MI]) / (mean(H(true), H(pred)) - E[MI])` with the expectation under the hypergeometric model,
/// `1.0` when both labelings have a single cluster (or no samples), and sklearn's guard that keeps the
/// denominator's sign but at least machine epsilon in magnitude.
///
/// # Errors
/// [`EvalError::LabelingLength`] when the slices differ in length.
pub fn adjusted_mutual_info(labels_true: &[u32], labels_pred: &[u32]) -> Result<f64, EvalError> {
    let c = contingency(labels_true, labels_pred)?;
    if c.rows.len() == c.cols.len() && c.rows.len() <= 1 {
        return Ok(1.0);
    }
    let mi = mutual_info(&c);
    let emi = expected_mutual_info(&c);
    let normalizer = (entropy(&c.rows) + entropy(&c.cols)) / 2.0;
    let mut denominator = normalizer - emi;
    denominator = if denominator < 0.0 {
        denominator.min(-f64::EPSILON)
    } else {
        denominator.max(f64::EPSILON)
    };
    Ok((mi - emi) / denominator)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ln_gamma_matches_factorials_and_half_integers() {
        // ln Γ(n + 1) = ln n! computed exactly in f64 for small n.
        let mut f = 1.0f64;
        for n in 1..=20u32 {
            f *= f64::from(n);
            let got = ln_gamma(f64::from(n) + 1.0);
            assert!(
                (got - f.ln()).abs() <= 1e-13 * f.ln().max(1.0),
                "n = {n}: {got} vs {}",
                f.ln()
            );
        }
        // Γ(1/2) = √π; Γ(0.1) = 9.513507698668732 (scipy.special.gamma(0.1)).
        assert!((ln_gamma(0.5) - std::f64::consts::PI.sqrt().ln()).abs() < 1e-14);
        assert!((ln_gamma(0.1) - 9.513_507_698_668_732f64.ln()).abs() < 1e-13);
        // Values from scipy.special.gammaln(60001.0), gammaln(1e6 + 1) and gammaln(3.7).
        for (x, want) in [
            (60_001.0, 600_132.410_462_096_9),
            (1e6 + 1.0, 12_815_518.384_658_169),
            (3.7, 1.428_072_326_665_388),
        ] {
            let got = ln_gamma(x);
            assert!(
                (got - want).abs() <= 1e-14 * want.abs().max(1.0),
                "ln_gamma({x}) = {got}, want {want}"
            );
        }
    }
}
