"""DIML's structural re-ranking scores in PyTorch, the peer of the single-thread measurement of
`crates/dml-ot/benches/rerank.rs` (`rerank/scores_single_thread`, the work of
`StructuralReranker::scores` in `crates/dml-ot/src/rerank.rs`).

The data are the Rust bench's, bit for bit: its SplitMix64 generator (seed 42) is reproduced
here with wrapping uint64 arithmetic, so the prototypes, the 1,000 query and 3,000 gallery
feature maps (`[256 channels, 4 × 4 grid]`, class prototype plus N(0, 1) noise, rectified), their
128-wide embeddings (the sums of the first 128 channels over the grid) and the 200 queries' 100
random candidates are the same numbers; only the maps of the 200 timed queries and the gallery
are kept.

The banks are prepared once, untimed, as both DIML's `evaluation/eval_diml.py` and ours do:
every grid location L2-normalised over the channels, the normalised mean map (DIML's training-mode
centre, the direction ours correlates against) and the normalised embeddings. One query, timed, is
what DIML's evaluation does for its top-K candidates (`utilities/diml.py`, `calc_similarity` at
stage 1 plus the stage-0 cosine), batched over the 100 candidates: the global cosine of the
embeddings; the 100 × 16 × 16 location cosines `S`; the cross-correlation marginals (Eq. 8–9);
`K = exp(-(1 - S) / 0.05)`; DIML's Sinkhorn; the structural similarity `Σ T ⊙ S`; and both
scores read back (ours returns them to the caller). One thread (`torch.set_num_threads(1)`)
whatever `--threads` says, as ours runs on one. One warm-up query, then 200 timed ones; the time
is their mean, in seconds per query.

Two measurements differ in the solver's stopping rule only:
- `torch/rerank/scores_single_thread`: DIML's Sinkhorn as its code runs it, in f32 kernel space,
  stopping when the mean change of the row scalings is below 0.1 (at most 100 iterations);
- `torch_tolerance/rerank/scores_single_thread`: the same loop stopping as ours does, once the
  plan's marginal error is at most 1e-6 (at most 100 iterations), for about ours' amount of work.
`iterations` reports how many iterations each ran on average.

Deliberate differences, DIML's own choices kept as its code makes them: the solver iterates in
kernel space in f32 where ours iterates in f64 (stabilised, in the log domain when needed), and a
batch of 100 stops when its slowest item converged where ours stops each item on its own; the
marginals divide by `sum + 1e-5` where ours normalises exactly (with a uniform fallback for an
all-zero row).
"""

import time

import numpy as np
import torch
import torch.nn.functional as F

import common

OURS = "rerank/scores_single_thread"
QUERIES = 1000
GALLERY = 3000
CHANNELS = 256
LOCATIONS = 16
EMBEDDING = 128
DEPTH = 100
CLASSES = 100
MEASURED = 200
EPS = 0.05
# Ours' solver settings for re-ranking (`StructuralConfig::default()`).
TOLERANCE = 1e-6
MAX_ITERATIONS = 100

GOLDEN = np.uint64(0x9E3779B97F4A7C15)
MIX1 = np.uint64(0xBF58476D1CE4E5B9)
MIX2 = np.uint64(0x94D049BB133111EB)


def uniforms(first, count):
    """Draws `first` to `first + count - 1` (0-based) of the Rust bench's SplitMix64 generator
    seeded with 42: the state after draw k is `42 + (k + 1) · golden` (wrapping), mixed and
    scaled to [0, 1) from its top 53 bits."""
    k = np.arange(first + 1, first + count + 1, dtype=np.uint64)
    z = np.uint64(42) + k * GOLDEN
    z = (z ^ (z >> np.uint64(30))) * MIX1
    z = (z ^ (z >> np.uint64(27))) * MIX2
    return ((z ^ (z >> np.uint64(31))) >> np.uint64(11)).astype(np.float64) / float(1 << 53)


def normals(first_normal, count):
    """Normal draws `first_normal …` of the Rust bench (Box–Muller on two consecutive uniforms,
    the radius from the first, floored at 1e-300), as f32."""
    u = uniforms(2 * first_normal, 2 * count).reshape(count, 2)
    radius = np.sqrt(-2.0 * np.log(np.maximum(u[:, 0], 1e-300)))
    return (radius * np.cos(2.0 * np.pi * u[:, 1])).astype(np.float32)


def images(prototypes, first_normal, first_row, rows):
    """Rows `first_row …` of one of the bench's image sets whose first normal draw is
    `first_normal`: maps `[rows, C, L]` (prototype of class `row % 100` plus noise, rectified)
    and embeddings `[rows, 128]` (the grid sums of the first 128 channels)."""
    per_map = CHANNELS * LOCATIONS
    noise = normals(first_normal + first_row * per_map, rows * per_map).reshape(rows, per_map)
    classes = np.arange(first_row, first_row + rows) % CLASSES
    maps = np.maximum(prototypes[classes] + noise, np.float32(0.0)).reshape(rows, CHANNELS, LOCATIONS)
    return maps, maps[:, :EMBEDDING, :].sum(axis=2)


def bench_data():
    """The timed queries' and the gallery's maps and embeddings, and the 200 candidate lists."""
    per_map = CHANNELS * LOCATIONS
    prototypes = normals(0, CLASSES * per_map).reshape(CLASSES, per_map)
    query_start = CLASSES * per_map
    gallery_start = query_start + QUERIES * per_map
    q_maps, q_emb = images(prototypes, query_start, 0, MEASURED)
    chunks = [images(prototypes, gallery_start, r, 500) for r in range(0, GALLERY, 500)]
    g_maps = np.concatenate([m for m, _ in chunks])
    g_emb = np.concatenate([e for _, e in chunks])
    candidate_draws = 2 * (gallery_start + GALLERY * per_map)
    candidates = (uniforms(candidate_draws, MEASURED * DEPTH) * GALLERY).astype(np.int64).reshape(MEASURED, DEPTH)
    return q_maps, q_emb, g_maps, g_emb, candidates


def prepare(maps, embeddings):
    """DIML's normalisation of a bank: unit locations `[rows, C, L]`, unit mean maps `[rows, C]`
    and unit embeddings."""
    maps = torch.from_numpy(maps)
    return (
        F.normalize(maps, p=2, dim=1),
        F.normalize(maps.mean(dim=2), p=2, dim=1),
        F.normalize(torch.from_numpy(embeddings), p=2, dim=1),
    )


def diml_sinkhorn(K, u, v):
    """DIML's `Sinkhorn(K, u, v)` (`utilities/diml.py`), returning the iterations it ran too."""
    r = torch.ones_like(u)
    c = torch.ones_like(v)
    thresh = 1e-1
    for iteration in range(100):
        r0 = r
        r = u / torch.matmul(K, c.unsqueeze(-1)).squeeze(-1)
        c = v / torch.matmul(K.permute(0, 2, 1).contiguous(), r.unsqueeze(-1)).squeeze(-1)
        err = (r - r0).abs().mean()
        if err.item() < thresh:
            break
    T = torch.matmul(r.unsqueeze(-1), c.unsqueeze(-2)) * K
    return T, iteration + 1


def sinkhorn_to_tolerance(K, u, v):
    """DIML's loop with ours' stopping rule (`Params::solve` in `crates/dml-ot/src/host.rs`): stop
    once the plan's row marginals are within `TOLERANCE` of `u` (its columns are exact after each
    column step), at most `MAX_ITERATIONS` iterations. The row sums `r ⊙ (K c)` reuse the product
    the next row step needs, as ours does, so the test costs no extra matrix-vector product. The
    batch stops when its last item converged, where ours stops each item on its own."""
    r = torch.ones_like(u)
    c = torch.ones_like(v)
    iterations = 0
    while True:
        Kc = torch.matmul(K, c.unsqueeze(-1)).squeeze(-1)
        if (r * Kc - u).abs().max().item() <= TOLERANCE or iterations == MAX_ITERATIONS:
            break
        r = u / Kc
        c = v / torch.matmul(K.permute(0, 2, 1).contiguous(), r.unsqueeze(-1)).squeeze(-1)
        iterations += 1
    T = torch.matmul(r.unsqueeze(-1), c.unsqueeze(-2)) * K
    return T, iterations


def structural_similarity(anchor, anchor_center, fb, fb_center, solver):
    """DIML's `calc_similarity(..., stage=1)` with cross-correlation marginals and the Sinkhorn
    `solver`: `anchor` `[C, L]`, `anchor_center` `[C]`, the candidates' `fb` `[K, C, L]` and
    `fb_center` `[K, C]`."""
    N, _, R = fb.size()
    sim = torch.einsum("cm,ncs->nsm", anchor, fb).contiguous().view(N, R, R)
    dis = 1.0 - sim
    K = torch.exp(-dis / EPS)
    att = F.relu(torch.einsum("c,ncr->nr", anchor_center, fb)).view(N, R)
    u = att / (att.sum(dim=1, keepdims=True) + 1e-5)
    att = F.relu(torch.einsum("cr,nc->nr", anchor, fb_center)).view(N, R)
    v = att / (att.sum(dim=1, keepdims=True) + 1e-5)
    T, iterations = solver(K, u, v)
    return torch.sum(T * sim, dim=(1, 2)), iterations


def main():
    p = common.parser(__doc__.split("\n\n")[0])
    args = p.parse_args()
    if not common.selected(args, OURS):
        return
    # The workload is single-threaded by definition, as the Rust measurement is.
    common.configure_threads(1)
    measured = 10 if args.quick else MEASURED
    q_maps, q_emb, g_maps, g_emb, candidates = bench_data()
    q_locals, q_centres, q_embeddings = prepare(q_maps, q_emb)
    g_locals, g_centres, g_embeddings = prepare(g_maps, g_emb)
    candidates = torch.from_numpy(candidates)

    solvers = [
        # DIML's code as its authors run it.
        ("torch", diml_sinkhorn, "DIML: mean |change of r| < 0.1, at most 100 iterations"),
        # The same loop doing ours' amount of work.
        ("torch_tolerance", sinkhorn_to_tolerance, "ours: marginal error <= 1e-6, at most 100 iterations"),
    ]
    for name, solver, stopping in solvers:

        def scores(query):
            top = candidates[query]
            global_cosine = torch.einsum("c,nc->n", q_embeddings[query], g_embeddings[top])
            structural, iterations = structural_similarity(
                q_locals[query], q_centres[query], g_locals[top], g_centres[top], solver
            )
            return global_cosine.numpy(), structural.numpy(), iterations

        with torch.no_grad():
            scores(0)
            checksum = 0.0
            iterations = []
            start = time.perf_counter()
            for query in range(measured):
                _, structural, ran = scores(query)
                checksum += float(structural.sum())
                iterations.append(ran)
            seconds = (time.perf_counter() - start) / measured
        if not np.isfinite(checksum):
            raise RuntimeError(f"{name}: structural similarities are not finite (checksum {checksum})")
        common.emit(
            f"{name}/{OURS}",
            OURS,
            seconds,
            unit="query (100 candidates)",
            peer=common.peer_name("torch"),
            threads=1,
            stopping=stopping,
            depth=DEPTH,
            grid=4,
            channels=CHANNELS,
            queries=measured,
            iterations=sum(iterations) / len(iterations),
            mean_structural_similarity=checksum / (measured * DEPTH),
        )

if __name__ == "__main__":
    main()
