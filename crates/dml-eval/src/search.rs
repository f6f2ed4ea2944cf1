//! The chunked exact k-NN engine shared by [`crate::knn`] and [`crate::evaluate`].
//!
//! Queries are processed in blocks (rayon parallelises over blocks). For each block:
//!
//! 1. **Threshold.** When a query needs only a small fraction of the references, the block's distances
//!    to a strided sample of about 2,048 references are computed and, per query, a sample value whose
//!    rank exceeds the expected rank of the needed count by four binomial standard deviations becomes the
//!    query's threshold (a bucketed quantile, see [`crate::select::threshold_at_rank`]).
//! 2. **Filter.** The block's distances to every reference are computed panel by panel and only those
//!    `<=` the query's threshold are kept (fused into the AVX-512 kernel; a scalar pass after each `gemm`
//!    chunk otherwise). Nothing of size block × references is stored.
//! 3. **Select.** Each query's candidates are ordered exactly by `(distance, index)` ([`crate::select`]).
//!    A query whose threshold turned out too low (fewer candidates than needed) or too high (candidate
//!    buffer overflow) is recomputed against all references without a threshold, so the result is exact
//!    whatever the data distribution; the threshold only affects speed.
//! 4. **Consume.** The optional re-ranker rewrites the head of the list, then a caller-provided visitor
//!    consumes the final list (metrics accumulate per block; [`crate::knn`] copies it out).
//!
//! Peak memory is the packed reference copy plus, per worker thread, one block's candidate buffers
//! (bounded by [`CANDIDATE_BUDGET_BYTES`]) and, when queries fall back, a batch of full distance rows
//! (bounded by [`FALLBACK_BUDGET_BYTES`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use rayon::prelude::*;
use serde::Serialize;

use crate::distance::{Distance, PreparedRows};
use crate::error::EvalError;
use crate::kernel::{self, Candidates, MR, NR, PackedPanels};
use crate::rerank::{Neighbour, Reranker};
use crate::select::{self, SortScratch};

/// Which dot-product kernel computes distances.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Kernel {
    /// The AVX-512 kernel when the CPU supports AVX-512F, otherwise the portable `gemm` kernel.
    #[default]
    Auto,
    /// The fused AVX-512 kernel; an error on CPUs without AVX-512F.
    Avx512,
    /// The portable kernel built on the `gemm` crate (AVX-512 or AVX2/FMA, chosen at run time; NEON on ARM).
    Gemm,
}

/// Tuning knobs of the search. They never change results, only speed and memory.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchOptions {
    /// Queries per block, rounded up to a multiple of the kernel's 6-row tile and lowered when a block's
    /// candidate buffers would exceed 96 MiB. Default 256.
    pub block_size: usize,
    /// Worker threads; `None` uses rayon's global pool (one thread per core unless configured otherwise).
    pub threads: Option<usize>,
    /// Kernel selection. Default [`Kernel::Auto`].
    pub kernel: Kernel,
}

impl Default for SearchOptions {
    fn default() -> Self {
        Self {
            block_size: 256,
            threads: None,
            kernel: Kernel::Auto,
        }
    }
}

/// Where a search spent its time, summed over worker threads (so seconds can exceed wall time).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SearchStats {
    /// The kernel that ran: `"avx512"` or `"gemm"`.
    pub kernel: &'static str,
    /// Queries searched.
    pub queries: usize,
    /// Neighbours retrieved per query.
    pub neighbours_per_query: usize,
    /// Queries per block after rounding and the memory cap.
    pub block_size: usize,
    /// Whether sampled thresholds were used (false when queries need a large fraction of the references).
    pub thresholded: bool,
    /// Mean number of candidates that passed the threshold per query.
    pub mean_candidates: f64,
    /// Queries recomputed without a threshold because their candidate set was too small or overflowed.
    pub fallbacks: usize,
    /// Seconds packing references (once, single-threaded).
    pub prepare_secs: f64,
    /// Thread-seconds computing sampled thresholds.
    pub threshold_secs: f64,
    /// Thread-seconds in the distance kernel and filter.
    pub distance_secs: f64,
    /// Thread-seconds ordering candidates (including fallbacks).
    pub select_secs: f64,
    /// Thread-seconds re-ranking and in the caller's visitor (metric accumulation or copying lists).
    pub consume_secs: f64,
}

/// Upper bound for one block's candidate buffers.
pub(crate) const CANDIDATE_BUDGET_BYTES: usize = 96 << 20;
/// Below this many references every reference is a candidate (sampling would not pay off).
const SAMPLING_MIN_REFS: usize = 8192;
/// Approximate size of the reference sample used for thresholds. Measured on the 60,000 × 128 bench:
/// 1,024 to 2,048 samples are equally fast; 4,096 spends more on the sample than it saves in candidates.
const SAMPLE_TARGET: usize = 2048;
/// Upper bound for the full-row buffer of recomputed (fallback) queries.
const FALLBACK_BUDGET_BYTES: usize = 64 << 20;
/// Columns per `gemm` call in the portable path.
const GEMM_CHUNK: usize = 2048;

/// What to search: prepared rows, the distance and what each query needs.
pub(crate) struct SearchSpec<'p, 'a> {
    /// Prepared query rows.
    pub query: &'p PreparedRows<'a>,
    /// Prepared reference rows.
    pub reference: &'p PreparedRows<'a>,
    /// The distance both were prepared for.
    pub distance: Distance,
    /// Whether query row `i` must not retrieve reference row `i`.
    pub exclude_self: bool,
    /// Neighbours delivered per query; at most the references available per query.
    pub kk: usize,
    /// Whether the visitor needs distances (otherwise it receives an empty slice).
    pub want_distances: bool,
    /// Optional re-ranker applied to the head of every list.
    pub reranker: Option<&'p dyn Reranker>,
}

/// The sampled-threshold plan, shared by all blocks.
struct Sampling {
    /// Rank (0-based) within the sample whose value becomes the threshold.
    rank: usize,
    /// Number of sampled references.
    m: usize,
    /// Sample rows gathered row-major (portable path).
    rows: Vec<f32>,
    /// Sample biases (portable path).
    bias: Vec<f32>,
    /// Sample packed (AVX-512 path).
    packed: Option<PackedPanels>,
}

/// Everything the blocks share.
struct Ctx<'s, 'p, 'a> {
    spec: &'s SearchSpec<'p, 'a>,
    avx: bool,
    alpha: f32,
    n: usize,
    dim: usize,
    bias: Vec<f32>,
    packed: Option<PackedPanels>,
    sampling: Option<Sampling>,
    cap: usize,
    iota: Vec<u32>,
    threshold_ns: AtomicU64,
    distance_ns: AtomicU64,
    select_ns: AtomicU64,
    consume_ns: AtomicU64,
    candidates: AtomicU64,
    fallbacks: AtomicU64,
}

/// Per-worker buffers, reused across blocks so large allocations are not page-faulted in every block.
#[derive(Default)]
struct Scratch {
    apack: Vec<f32>,
    qrows: Vec<f32>,
    thr: Vec<f32>,
    skip: Vec<u32>,
    sample_out: Vec<f32>,
    chunk_out: Vec<f32>,
    cands: Option<Candidates>,
    sort: SortScratch,
    top: Vec<u64>,
    out_idx: Vec<u32>,
    out_dist: Vec<f32>,
    neigh: Vec<Neighbour>,
    before: Vec<u32>,
    after: Vec<u32>,
    fb_pack: Vec<f32>,
    fb_out: Vec<f32>,
    fb_idx: Vec<u32>,
}

/// Checks options and resolves the kernel (true = AVX-512).
pub(crate) fn resolve_kernel(options: &SearchOptions) -> Result<bool, EvalError> {
    if options.block_size == 0 {
        return Err(EvalError::Options("block_size must be at least 1".into()));
    }
    if options.threads == Some(0) {
        return Err(EvalError::Options("threads must be at least 1 when given".into()));
    }
    match options.kernel {
        Kernel::Auto => Ok(kernel::avx512_available()),
        Kernel::Gemm => Ok(false),
        Kernel::Avx512 if kernel::avx512_available() => Ok(true),
        Kernel::Avx512 => Err(EvalError::Options(
            "Kernel::Avx512 requested but this CPU lacks AVX-512F".into(),
        )),
    }
}

/// Runs `f` on a pool with `threads` workers, or on the current pool.
pub(crate) fn with_threads<T: Send>(
    threads: Option<usize>,
    f: impl FnOnce() -> Result<T, EvalError> + Send,
) -> Result<T, EvalError> {
    match threads {
        None => f(),
        Some(t) => rayon::ThreadPoolBuilder::new()
            .num_threads(t)
            .build()
            .map_err(|e| EvalError::Options(format!("cannot build a {t}-thread pool: {e}")))?
            .install(f),
    }
}

/// Searches the neighbours of query rows `queries` and feeds each final list to `visit(state, query_row,
/// indices, distances)`, where `state` is created per block by `init`. Returns the block states in block
/// order (so reductions over them are deterministic) and the search statistics.
pub(crate) fn search<S, I, V>(
    spec: &SearchSpec<'_, '_>,
    queries: &[u32],
    options: &SearchOptions,
    init: I,
    visit: V,
) -> Result<(Vec<S>, SearchStats), EvalError>
where
    S: Send,
    I: Fn() -> S + Sync + Send,
    V: Fn(&mut S, usize, &[u32], &[f32]) + Sync + Send,
{
    let avx = resolve_kernel(options)?;
    let (n, dim) = (spec.reference.rows, spec.reference.dim);
    assert_eq!(
        spec.query.dim, dim,
        "search: query dim {} vs reference dim {dim}",
        spec.query.dim
    );
    let available = n.saturating_sub(usize::from(spec.exclude_self));
    assert!(spec.kk <= available, "search: kk {} > available {available}", spec.kk);
    let mut stats = SearchStats {
        kernel: if avx { "avx512" } else { "gemm" },
        queries: queries.len(),
        neighbours_per_query: spec.kk,
        ..SearchStats::default()
    };
    if queries.is_empty() || spec.kk == 0 {
        return Ok((Vec::new(), stats));
    }
    with_threads(options.threads, move || {
        let started = Instant::now();
        let ctx = Ctx::new(spec, avx);
        stats.prepare_secs = started.elapsed().as_secs_f64();
        stats.thresholded = ctx.sampling.is_some();
        let per_row = (ctx.cap + 16) * 8;
        let budget_rows = (CANDIDATE_BUDGET_BYTES / per_row).max(MR) / MR * MR;
        let block = options
            .block_size
            .div_ceil(MR)
            .saturating_mul(MR)
            .min(budget_rows)
            .max(MR);
        stats.block_size = block;
        let states: Result<Vec<S>, EvalError> = queries
            .par_chunks(block)
            .map_init(Scratch::default, |scr, chunk| ctx.block(scr, chunk, &init, &visit))
            .collect();
        let states = states?;
        let secs = |a: &AtomicU64| a.load(Ordering::Relaxed) as f64 * 1e-9;
        stats.threshold_secs = secs(&ctx.threshold_ns);
        stats.distance_secs = secs(&ctx.distance_ns);
        stats.select_secs = secs(&ctx.select_ns);
        stats.consume_secs = secs(&ctx.consume_ns);
        stats.fallbacks = ctx.fallbacks.load(Ordering::Relaxed) as usize;
        stats.mean_candidates = ctx.candidates.load(Ordering::Relaxed) as f64 / queries.len() as f64;
        Ok((states, stats))
    })
}

impl<'s, 'p, 'a> Ctx<'s, 'p, 'a> {
    fn new(spec: &'s SearchSpec<'p, 'a>, avx: bool) -> Self {
        let r = spec.reference;
        let (n, dim) = (r.rows, r.dim);
        let bias: Vec<f32> = r.sq_norms.iter().map(|&s| spec.distance.bias(s)).collect();
        let packed = avx.then(|| PackedPanels::new(&r.data, n, dim, &bias));
        let (sampling, cap) = Self::plan_sampling(spec, avx, &bias);
        Ctx {
            spec,
            avx,
            alpha: spec.distance.alpha(),
            n,
            dim,
            bias,
            packed,
            sampling,
            cap,
            iota: (0..n as u32).collect(),
            threshold_ns: AtomicU64::new(0),
            distance_ns: AtomicU64::new(0),
            select_ns: AtomicU64::new(0),
            consume_ns: AtomicU64::new(0),
            candidates: AtomicU64::new(0),
            fallbacks: AtomicU64::new(0),
        }
    }

    /// Chooses the sample, the threshold rank and the candidate capacity, or no sampling (capacity = all
    /// references) when it cannot pay off.
    fn plan_sampling(spec: &SearchSpec<'_, '_>, avx: bool, bias: &[f32]) -> (Option<Sampling>, usize) {
        let r = spec.reference;
        let n = r.rows;
        // The query itself may be among the candidates and is dropped afterwards, so one more is needed.
        let need = spec.kk + usize::from(spec.exclude_self);
        if n < SAMPLING_MIN_REFS || need.saturating_mul(4) > n {
            return (None, n);
        }
        let stride = n / SAMPLE_TARGET;
        let m = n.div_ceil(stride);
        let p = need as f64 / n as f64;
        let mf = m as f64;
        let rank = (p * mf + 4.0 * (mf * p * (1.0 - p)).sqrt()).ceil() as usize + 1;
        if rank + 1 >= m {
            return (None, n);
        }
        // The fraction of all references below the rank-th sample value has mean (rank + 1) / (m + 1) and
        // binomial spread; five standard deviations above it makes overflow (and its fallback) rare.
        let p_hi = (rank + 1) as f64 / mf;
        let sd_hi = (p_hi * (1.0 - p_hi) / mf).sqrt();
        let cap = ((n as f64) * (p_hi + 5.0 * sd_hi)).ceil() as usize + 64;
        if cap.saturating_mul(2) > n {
            return (None, n);
        }
        let picks: Vec<usize> = (0..n).step_by(stride).collect();
        debug_assert_eq!(picks.len(), m);
        let mut rows = Vec::with_capacity(m * r.dim);
        for &j in &picks {
            rows.extend_from_slice(r.row(j));
        }
        let sbias: Vec<f32> = picks.iter().map(|&j| bias[j]).collect();
        let packed = avx.then(|| PackedPanels::new(&rows, m, r.dim, &sbias));
        (
            Some(Sampling {
                rank,
                m,
                rows,
                bias: sbias,
                packed,
            }),
            cap,
        )
    }

    /// Processes one block of query rows.
    fn block<S, I, V>(&self, scr: &mut Scratch, chunk: &[u32], init: &I, visit: &V) -> Result<S, EvalError>
    where
        I: Fn() -> S,
        V: Fn(&mut S, usize, &[u32], &[f32]),
    {
        let spec = self.spec;
        let nq = chunk.len();
        let groups = nq.div_ceil(MR);
        let rows_pad = groups * MR;
        let dim = self.dim;

        // Pack (AVX-512) or gather (portable) the block's query rows.
        if self.avx {
            kernel::pack_queries(nq, dim, |i| spec.query.row(chunk[i] as usize), &mut scr.apack);
        } else {
            scr.qrows.clear();
            for &q in chunk {
                scr.qrows.extend_from_slice(spec.query.row(q as usize));
            }
        }

        // Thresholds: padding rows get -inf so they never produce candidates. Under self-exclusion each
        // row also names the reference the filter must drop (u32::MAX matches no reference).
        let t0 = Instant::now();
        scr.thr.clear();
        scr.thr.resize(rows_pad, f32::NEG_INFINITY);
        scr.skip.clear();
        scr.skip.resize(rows_pad, u32::MAX);
        if spec.exclude_self {
            for (s, &q) in scr.skip.iter_mut().zip(chunk) {
                *s = q;
            }
        }
        match &self.sampling {
            None => scr.thr[..nq].fill(f32::MAX),
            Some(s) => {
                let ldo = if self.avx { s.m.div_ceil(NR) * NR } else { s.m };
                scr.sample_out.resize(rows_pad * ldo, 0.0);
                match &s.packed {
                    Some(sp) => {
                        // SAFETY: `self.avx` is only true when AVX-512F was detected at run time.
                        unsafe {
                            kernel::avx512::dists(
                                &scr.apack,
                                groups,
                                sp,
                                (0, sp.panels),
                                self.alpha,
                                &mut scr.sample_out,
                                ldo,
                            )
                        }
                    }
                    None => kernel::gemm_dists(
                        &scr.qrows,
                        nq,
                        &s.rows,
                        &s.bias,
                        dim,
                        (0, s.m),
                        self.alpha,
                        &mut scr.sample_out,
                        ldo,
                    ),
                }
                for i in 0..nq {
                    let row = &scr.sample_out[i * ldo..i * ldo + s.m];
                    scr.thr[i] = select::threshold_at_rank(row, s.rank, &mut scr.sort);
                }
            }
        }
        let t1 = Instant::now();

        // Filter every reference through the thresholds into the candidate buffers.
        let cands = scr.cands.get_or_insert_with(Candidates::new);
        cands.reset(rows_pad, self.cap);
        match &self.packed {
            Some(pp) => {
                // SAFETY: `self.avx` is only true when AVX-512F was detected at run time.
                unsafe {
                    kernel::avx512::filter(
                        &scr.apack,
                        groups,
                        pp,
                        (0, pp.panels),
                        self.alpha,
                        &scr.thr,
                        &scr.skip,
                        cands,
                    )
                }
            }
            None => {
                scr.chunk_out.resize(nq * GEMM_CHUNK, 0.0);
                for r0 in (0..self.n).step_by(GEMM_CHUNK) {
                    let r1 = (r0 + GEMM_CHUNK).min(self.n);
                    let w = r1 - r0;
                    let data = &spec.reference.data;
                    kernel::gemm_dists(
                        &scr.qrows,
                        nq,
                        data,
                        &self.bias,
                        dim,
                        (r0, r1),
                        self.alpha,
                        &mut scr.chunk_out,
                        GEMM_CHUNK,
                    );
                    for i in 0..nq {
                        let (t, skip) = (scr.thr[i], scr.skip[i] as usize);
                        for (c, &d) in scr.chunk_out[i * GEMM_CHUNK..i * GEMM_CHUNK + w].iter().enumerate() {
                            if d <= t && r0 + c != skip {
                                cands.push(i, d, (r0 + c) as u32);
                            }
                        }
                    }
                }
            }
        }
        let t2 = Instant::now();
        self.threshold_ns
            .fetch_add((t1 - t0).as_nanos() as u64, Ordering::Relaxed);
        self.distance_ns
            .fetch_add((t2 - t1).as_nanos() as u64, Ordering::Relaxed);

        // Queries whose candidate set overflowed or holds fewer than kk references are recomputed
        // against every reference, in batches that share the kernel's query tiles (a collapsed embedding,
        // where every distance ties, sends a whole block here).
        let kk = spec.kk;
        let cands = scr.cands.as_ref().expect("candidate buffers exist after the filter");
        let fallback: Vec<usize> = (0..nq).filter(|&i| cands.overflow[i] || cands.count[i] < kk).collect();
        self.fallbacks.fetch_add(fallback.len() as u64, Ordering::Relaxed);
        let fb_ld = self.fallback_stride();
        let fb_batch = (FALLBACK_BUDGET_BYTES / (fb_ld * 4)).max(1);
        let (mut fb_next, mut fb_batch_start, mut fb_batch_end) = (0usize, 0usize, 0usize);

        // Order, re-rank and hand over each query's list, in query order.
        let mut state = init();
        let (mut select_ns, mut consume_ns, mut ncand) = (0u64, 0u64, 0u64);
        for (i, &q) in chunk.iter().enumerate() {
            let q = q as usize;
            let ta = Instant::now();
            if fallback.get(fb_next) == Some(&i) {
                if fb_next == fb_batch_end {
                    fb_batch_start = fb_next;
                    fb_batch_end = (fb_next + fb_batch).min(fallback.len());
                    let rows: Vec<usize> = fallback[fb_batch_start..fb_batch_end]
                        .iter()
                        .map(|&r| chunk[r] as usize)
                        .collect();
                    self.full_rows(scr, &rows);
                }
                let at = (fb_next - fb_batch_start) * fb_ld;
                let row = &mut scr.fb_out[at..at + self.n];
                let valid = if spec.exclude_self && q < self.n {
                    // Drop the query's own entry by shifting the tail left, keeping indices ascending.
                    row.copy_within(q + 1.., q);
                    scr.fb_idx.clear();
                    scr.fb_idx.extend((0..self.n as u32).filter(|&j| j as usize != q));
                    select::top_k(&row[..self.n - 1], &scr.fb_idx, kk, &mut scr.sort, &mut scr.top)
                } else {
                    select::top_k(row, &self.iota, kk, &mut scr.sort, &mut scr.top)
                };
                assert!(
                    valid >= kk,
                    "search: full row of query {q} has {valid} < {kk} references"
                );
                fb_next += 1;
            } else {
                let cands = scr.cands.as_ref().expect("candidate buffers exist after the filter");
                let (d, j) = cands.row(i);
                ncand += d.len() as u64;
                let valid = select::top_k(d, j, kk, &mut scr.sort, &mut scr.top);
                assert!(
                    valid >= kk,
                    "search: query {q} has {valid} < {kk} candidates after the completeness check"
                );
            }
            let tb = Instant::now();
            scr.out_idx.clear();
            scr.out_idx.extend(scr.top.iter().map(|&k| select::key_index(k)));
            scr.out_dist.clear();
            let qn = spec.query.sq_norms[q];
            if spec.want_distances {
                scr.out_dist
                    .extend(scr.top.iter().map(|&k| spec.distance.report(select::key_dist(k), qn)));
            }
            if let Some(rr) = spec.reranker {
                rerank(rr, q, spec, qn, scr)?;
            }
            visit(&mut state, q, &scr.out_idx, &scr.out_dist);
            let tc = Instant::now();
            select_ns += (tb - ta).as_nanos() as u64;
            consume_ns += (tc - tb).as_nanos() as u64;
        }
        self.select_ns.fetch_add(select_ns, Ordering::Relaxed);
        self.consume_ns.fetch_add(consume_ns, Ordering::Relaxed);
        self.candidates.fetch_add(ncand, Ordering::Relaxed);
        Ok(state)
    }

    /// Row stride of the full-row buffer `scr.fb_out`.
    fn fallback_stride(&self) -> usize {
        match &self.packed {
            Some(pp) => pp.panels * NR,
            None => self.n,
        }
    }

    /// Computes the ranking distances of query rows `rows` to every reference into `scr.fb_out` (row `t`
    /// at `t * fallback_stride()`), with the same kernel, hence the same arithmetic, as the filter pass.
    fn full_rows(&self, scr: &mut Scratch, rows: &[usize]) {
        let q = self.spec.query;
        let ld = self.fallback_stride();
        match &self.packed {
            Some(pp) => {
                let groups = kernel::pack_queries(rows.len(), self.dim, |t| q.row(rows[t]), &mut scr.fb_pack);
                scr.fb_out.resize(groups * MR * ld, 0.0);
                // SAFETY: `self.packed` is only built when AVX-512F was detected at run time.
                unsafe {
                    kernel::avx512::dists(
                        &scr.fb_pack,
                        groups,
                        pp,
                        (0, pp.panels),
                        self.alpha,
                        &mut scr.fb_out,
                        ld,
                    )
                }
            }
            None => {
                scr.fb_pack.clear();
                for &r in rows {
                    scr.fb_pack.extend_from_slice(q.row(r));
                }
                scr.fb_out.resize(rows.len() * ld, 0.0);
                let data = &self.spec.reference.data;
                kernel::gemm_dists(
                    &scr.fb_pack,
                    rows.len(),
                    data,
                    &self.bias,
                    self.dim,
                    (0, self.n),
                    self.alpha,
                    &mut scr.fb_out,
                    ld,
                );
            }
        }
    }
}

/// Applies the re-ranker to the head of `scr.top`/`scr.out_idx`, re-sorts it by `(score, index)` and
/// writes the scores into `scr.out_dist` when distances are wanted.
fn rerank(rr: &dyn Reranker, q: usize, spec: &SearchSpec<'_, '_>, qn: f32, scr: &mut Scratch) -> Result<(), EvalError> {
    let depth = rr.depth().min(scr.out_idx.len());
    if depth == 0 {
        return Ok(());
    }
    scr.neigh.clear();
    scr.neigh.extend(scr.top[..depth].iter().map(|&k| Neighbour {
        index: select::key_index(k),
        score: spec.distance.report(select::key_dist(k), qn),
    }));
    scr.before.clear();
    scr.before.extend_from_slice(&scr.out_idx[..depth]);
    scr.before.sort_unstable();
    rr.rerank(q, &mut scr.neigh);
    if let Some(bad) = scr.neigh.iter().find(|n| n.score.is_nan()) {
        return Err(EvalError::RerankerNan {
            query: q,
            reference: bad.index,
        });
    }
    scr.after.clear();
    scr.after.extend(scr.neigh.iter().map(|n| n.index));
    scr.after.sort_unstable();
    if scr.after != scr.before {
        return Err(EvalError::RerankerChangedCandidates { query: q });
    }
    scr.neigh.sort_unstable_by_key(|n| select::pack(n.score, n.index));
    for (t, n) in scr.neigh.iter().enumerate() {
        scr.out_idx[t] = n.index;
        if spec.want_distances {
            scr.out_dist[t] = n.score;
        }
    }
    Ok(())
}
