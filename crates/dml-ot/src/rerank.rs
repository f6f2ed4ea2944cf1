//! DIML's multi-scale matching (Sec. 3.3 "MM", Appendix A.2) as a re-ranker: the top-K neighbours by
//! global cosine are re-scored by global cosine + structural similarity.
//!
//! The re-ranker works on plain data (row indices and scores), so this crate does not depend on an
//! evaluation crate; a caller adapts [`StructuralReranker::rerank`] to its evaluator's interface.

use crate::error::OtError;
use crate::host::{HostProblem, solve_batch};
use crate::marginals::Marginals;
use crate::structural::StructuralConfig;
use crate::types::Params;

dml_config::config! {
    /// Configuration of [`StructuralReranker`]. The defaults follow DIML's evaluation (its truncation
    /// number K, solver settings and cross-correlation marginals).
    #[derive(Clone, Debug, PartialEq)]
    pub struct StructuralRerankerConfig {
        /// How many of each query's nearest neighbours are re-scored (DIML's truncation number K; 0
        /// turns re-ranking off).
        pub depth: usize = 100,
        /// Solver and marginals of the structural similarity (its gradient setting does not apply: the
        /// re-ranker solves on the host).
        pub structural: StructuralConfig = StructuralConfig::default(),
    }
}

/// One set of images on the host: `G × G` pooled feature maps and global embeddings, row `r` of both
/// describing the same image.
#[derive(Debug, Clone, Copy)]
pub struct FeatureBank<'a> {
    /// `[rows, channels, locations]` row-major, the layout of a `[rows, C, G, G]` tensor read back
    /// with `into_data()` (locations in row-major grid order).
    pub maps: &'a [f32],
    /// `[rows, embedding_dim]` global embeddings (any scale: they are L2-normalised here).
    pub embeddings: &'a [f32],
    /// Number of images.
    pub rows: usize,
    /// Channels `C` of the maps.
    pub channels: usize,
    /// Locations per map (`G·G`).
    pub locations: usize,
    /// Width of an embedding.
    pub embedding_dim: usize,
}

/// A bank prepared for scoring: unit-length locations (location-major), unit mean directions and unit
/// embeddings.
#[derive(Debug, Clone)]
struct Prepared {
    /// `[rows, locations, channels]`.
    locals: Vec<f32>,
    /// `[rows, channels]`.
    means: Vec<f32>,
    /// `[rows, embedding_dim]`.
    embeddings: Vec<f32>,
    rows: usize,
    locations: usize,
}

/// Re-scores the first [`StructuralReranker::depth`] neighbours of a query with
/// `score = -(cos(ψ^q, ψ^g) + s_struct(z^q, z^g))` (smaller is closer, as a distance), the sum of
/// DIML's two scales (Appendix A.2). The global cosine is recomputed from the stored embeddings,
/// whatever distance the search used; the structural similarity is solved on the host in `f64` for
/// all of a query's candidates in one batch.
#[derive(Debug, Clone)]
pub struct StructuralReranker {
    query: Prepared,
    gallery: Prepared,
    channels: usize,
    embedding_dim: usize,
    depth: usize,
    params: Params,
    marginals: Marginals,
}

impl StructuralRerankerConfig {
    /// Validates the banks and prepares them (normalisation and transposition to location-major).
    ///
    /// For evaluation with the query set equal to the reference set, pass the same bank twice.
    ///
    /// # Errors
    /// Those of [`StructuralConfig::init`]; [`OtError::Zero`] for a zero size, [`OtError::Length`] for
    /// a slice that does not match its bank's sizes, [`OtError::Mismatch`] when the banks disagree on
    /// channels or embedding width, [`OtError::NotFinite`] for NaN or infinite values.
    pub fn init(&self, query: &FeatureBank<'_>, gallery: &FeatureBank<'_>) -> Result<StructuralReranker, OtError> {
        let structural = self.structural.init()?;
        check_bank("query", query)?;
        check_bank("gallery", gallery)?;
        for (what, got, expected) in [
            ("channels", gallery.channels, query.channels),
            ("embedding_dim", gallery.embedding_dim, query.embedding_dim),
        ] {
            if got != expected {
                return Err(OtError::Mismatch {
                    input: "gallery",
                    what,
                    got,
                    other: "query",
                    expected,
                });
            }
        }
        Ok(StructuralReranker {
            query: prepare(query),
            gallery: prepare(gallery),
            channels: query.channels,
            embedding_dim: query.embedding_dim,
            depth: self.depth,
            params: structural.sinkhorn().host_params(),
            marginals: structural.marginals().clone(),
        })
    }
}

fn check_bank(input: &'static str, bank: &FeatureBank<'_>) -> Result<(), OtError> {
    for (what, v) in [
        ("rows", bank.rows),
        ("channels", bank.channels),
        ("locations", bank.locations),
        ("embedding_dim", bank.embedding_dim),
    ] {
        if v == 0 {
            return Err(OtError::Zero {
                input: match (input, what) {
                    ("query", "rows") => "query.rows",
                    ("query", "channels") => "query.channels",
                    ("query", "locations") => "query.locations",
                    ("query", _) => "query.embedding_dim",
                    (_, "rows") => "gallery.rows",
                    (_, "channels") => "gallery.channels",
                    (_, "locations") => "gallery.locations",
                    _ => "gallery.embedding_dim",
                },
            });
        }
    }
    let checks = [
        (
            "maps",
            bank.maps,
            bank.rows * bank.channels * bank.locations,
            format!(
                "[rows, channels, locations] = [{}, {}, {}]",
                bank.rows, bank.channels, bank.locations
            ),
        ),
        (
            "embeddings",
            bank.embeddings,
            bank.rows * bank.embedding_dim,
            format!("[rows, embedding_dim] = [{}, {}]", bank.rows, bank.embedding_dim),
        ),
    ];
    for (what, x, expected, shape) in checks {
        let name = match (input, what) {
            ("query", "maps") => "query.maps",
            ("query", _) => "query.embeddings",
            (_, "maps") => "gallery.maps",
            _ => "gallery.embeddings",
        };
        if x.len() != expected {
            return Err(OtError::Length {
                input: name,
                shape,
                expected,
                got: x.len(),
            });
        }
        if let Some((index, &value)) = x.iter().enumerate().find(|(_, v)| !v.is_finite()) {
            return Err(OtError::NotFinite {
                input: name,
                index,
                value: value as f64,
            });
        }
    }
    Ok(())
}

/// Transposes the maps to location-major and normalises locations, means and embeddings (in `f64`,
/// stored as `f32`).
fn prepare(bank: &FeatureBank<'_>) -> Prepared {
    let (c, l) = (bank.channels, bank.locations);
    let mut locals = vec![0f32; bank.rows * l * c];
    let mut means = vec![0f32; bank.rows * c];
    for r in 0..bank.rows {
        let map = &bank.maps[r * c * l..(r + 1) * c * l];
        let mut mean = vec![0f64; c];
        for loc in 0..l {
            let mut v: Vec<f64> = (0..c).map(|ch| map[ch * l + loc] as f64).collect();
            for (s, x) in mean.iter_mut().zip(&v) {
                *s += x / l as f64;
            }
            normalize(&mut v);
            for (o, x) in locals[(r * l + loc) * c..(r * l + loc + 1) * c].iter_mut().zip(&v) {
                *o = *x as f32;
            }
        }
        normalize(&mut mean);
        for (o, x) in means[r * c..(r + 1) * c].iter_mut().zip(&mean) {
            *o = *x as f32;
        }
    }
    let e = bank.embedding_dim;
    let mut embeddings = vec![0f32; bank.rows * e];
    for (out, row) in embeddings.chunks_exact_mut(e).zip(bank.embeddings.chunks_exact(e)) {
        let mut v: Vec<f64> = row.iter().map(|&x| x as f64).collect();
        normalize(&mut v);
        for (o, x) in out.iter_mut().zip(&v) {
            *o = *x as f32;
        }
    }
    Prepared {
        locals,
        means,
        embeddings,
        rows: bank.rows,
        locations: l,
    }
}

/// Scales `v` to unit length (an all-zero vector stays zero).
fn normalize(v: &mut [f64]) {
    let norm = v.iter().map(|x| x * x).sum::<f64>().sqrt().max(1e-12);
    v.iter_mut().for_each(|x| *x /= norm);
}

impl StructuralReranker {
    /// The number of re-scored neighbours per query.
    pub fn depth(&self) -> usize {
        self.depth
    }

    /// Re-scores the neighbours of query row `query` in place: each `(gallery row, score)` pair gets
    /// `score = -(cos(ψ^q, ψ^g) + s_struct(z^q, z^g))` (DIML Eq. 5 plus the global cosine, Appendix
    /// A.2; smaller is closer). The rows are kept and their order is left to the caller, which sorts
    /// by the new scores. An evaluator passes the first [`Self::depth`] neighbours (nearest first);
    /// every pair given is re-scored, their transport problems solved together as one batch.
    ///
    /// # Panics
    /// When `query` or a gallery row is out of range.
    pub fn rerank(&self, query: usize, neighbours: &mut [(u32, f32)]) {
        if neighbours.is_empty() {
            return;
        }
        let candidates: Vec<usize> = neighbours.iter().map(|&(index, _)| index as usize).collect();
        for ((_, score), (global, structural)) in neighbours.iter_mut().zip(self.scores(query, &candidates)) {
            *score = -(global + structural) as f32;
        }
    }

    /// `(global cosine, structural similarity)` of query row `query` with every gallery row in
    /// `candidates`, the candidates' transport problems solved together as one batch.
    ///
    /// # Panics
    /// When `query` or a candidate is out of range.
    pub fn scores(&self, query: usize, candidates: &[usize]) -> Vec<(f64, f64)> {
        assert!(
            query < self.query.rows,
            "structural reranker: query {query} out of range for {} rows",
            self.query.rows
        );
        let (c, e) = (self.channels, self.embedding_dim);
        let (n, m) = (self.query.locations, self.gallery.locations);
        let k = candidates.len();
        let q_locals = &self.query.locals[query * n * c..(query + 1) * n * c];
        let q_mean = &self.query.means[query * c..(query + 1) * c];
        let q_emb = &self.query.embeddings[query * e..(query + 1) * e];
        let mut similarity = vec![0f64; k * n * m];
        let mut a = vec![0f64; k * n];
        let mut b = vec![0f64; k * m];
        let mut globals = Vec::with_capacity(k);
        for (slot, &g) in candidates.iter().enumerate() {
            assert!(
                g < self.gallery.rows,
                "structural reranker: candidate {g} out of range for {} gallery rows",
                self.gallery.rows
            );
            let g_locals = &self.gallery.locals[g * m * c..(g + 1) * m * c];
            let g_mean = &self.gallery.means[g * c..(g + 1) * c];
            globals.push(dot32(q_emb, &self.gallery.embeddings[g * e..(g + 1) * e]) as f64);
            let s = &mut similarity[slot * n * m..(slot + 1) * n * m];
            for (i, zi) in q_locals.chunks_exact(c).enumerate() {
                for (j, zj) in g_locals.chunks_exact(c).enumerate() {
                    s[i * m + j] = dot32(zi, zj) as f64;
                }
            }
            let (mu_q, mu_g) = (&mut a[slot * n..(slot + 1) * n], &mut b[slot * m..(slot + 1) * m]);
            match self.marginals {
                Marginals::Uniform => {
                    mu_q.iter_mut().for_each(|x| *x = 1.0 / n as f64);
                    mu_g.iter_mut().for_each(|x| *x = 1.0 / m as f64);
                }
                Marginals::CrossCorrelation => {
                    correlate(q_locals, g_mean, mu_q);
                    correlate(g_locals, q_mean, mu_g);
                }
            }
        }
        let cost: Vec<f64> = similarity.iter().map(|s| 1.0 - s).collect();
        let problem = HostProblem {
            cost: &cost,
            a: &a,
            b: &b,
            batch: k,
            n,
            m,
        };
        // Sequential: the evaluator already runs queries on every thread.
        let solution = solve_batch(self.params, &problem, false);
        (0..k)
            .map(|slot| {
                let plan = solution.plan(slot);
                let s = &similarity[slot * n * m..(slot + 1) * n * m];
                (globals[slot], plan.iter().zip(s).map(|(t, s)| t * s).sum())
            })
            .collect()
    }
}

/// DIML Eq. 8–9 for unit locations against a unit direction, with the uniform fallback.
fn correlate(locals: &[f32], direction: &[f32], out: &mut [f64]) {
    let c = direction.len();
    for (o, z) in out.iter_mut().zip(locals.chunks_exact(c)) {
        *o = (dot32(z, direction) as f64).max(0.0);
    }
    let total: f64 = out.iter().sum();
    if total <= 1e-12 {
        let l = out.len() as f64;
        out.iter_mut().for_each(|x| *x = 1.0 / l);
    } else {
        out.iter_mut().for_each(|x| *x /= total);
    }
}

/// `f32` dot product with eight independent accumulators, which the compiler turns into SIMD.
#[inline]
fn dot32(x: &[f32], y: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (xc, yc) = (x.chunks_exact(8), y.chunks_exact(8));
    let (xr, yr) = (xc.remainder(), yc.remainder());
    for (p, q) in xc.zip(yc) {
        for k in 0..8 {
            acc[k] += p[k] * q[k];
        }
    }
    let mut s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (p, q) in xr.iter().zip(yr) {
        s += p * q;
    }
    s
}
