"""Batched Sinkhorn in PyTorch (DIML's kernel-space loop) and POT, the peer of
`crates/dml-ot/benches/sinkhorn.rs`.

The problems are the Rust bench's: 1,000 pairs of 16 × 16 costs uniform in [0, 2) (DIML's G = 4
grid), eps 0.05, uniform marginals 1/16, exactly 50 iterations (ours runs with tolerance 0, which
disables its convergence test), and for the backward pass weights W uniform in [-1, 1). Each
time is the median of 7 runs after one warm-up, in seconds per 1,000 pairs.

- `torch/sinkhorn/host_unrolled/forward` and `.../forward_backward`: the Sinkhorn loop of DIML's
  public code (`utilities/diml.py`, Appendix A.1 Eq. 13–14: `K = exp(-C / eps)`, then
  `r = a / (K c)` and `c = b / (Kᵀ r)`, plan `diag(r) K diag(c)`), batched over the 1,000 pairs in
  f32, the forward pass alone and forward + backward of `(plan * W).sum()` through the 50 unrolled
  iterations, reading the cost's gradient. Ours: the default engine (`SinkhornEngine::Host`,
  `PlanGradient::Unrolled`), which runs the log-domain iteration in f64 on the host with a
  hand-written adjoint.
- `torch/sinkhorn/host_detached/forward`: the same forward pass timed again, for ours with
  `PlanGradient::Detached`, the setting `train`'s DIML training uses (DIML's training code also
  runs the loop without gradients, `criteria/margin_diml.py`). Off an autodiff device ours' two
  paths do the same computation, and on a cost that requires no gradient PyTorch records nothing
  for the backward pass, so both lines measure the same work twice.
- `pot/sinkhorn/host_f64/forward`: POT's `ot.sinkhorn(a, b, M, reg=0.05, method="sinkhorn_log",
  numItermax=50, stopThr=0)` in f64 NumPy, one call per pair, against ours' host solver in f64.
- `pot_batch/sinkhorn/host_f64/forward`: POT's batched solver, `ot.batch.solve_batch(M, 0.05, a, b,
  max_iter=50, tol=0, method="log_sinkhorn", grad="detach")`, on the same f64 costs.

Deliberate differences: DIML's loop is kept as its authors wrote it, including the contiguous
copy of `Kᵀ` in every iteration, but without its convergence test (`mean |Δr| < 0.1`, which would
read the error back in every iteration), since the workload is exactly 50 iterations. Both POT
solvers compute the marginal error every 10 iterations as part of their loop (with `stopThr=0` /
`tol=0` it never stops them). The costs and weights come from PyTorch's generator (seed 0), not
ours: the same distributions, other values.
"""

import numpy as np
import ot
import torch

import common

BATCH = 1000
N = 16
EPS = 0.05
ITERATIONS = 50


def diml_sinkhorn(K, u, v, iterations):
    """DIML's `Sinkhorn(K, u, v)` for a fixed number of iterations: the scalings `r`, `c` of
    Eq. 13, then the plan of Eq. 14."""
    r = torch.ones_like(u)
    c = torch.ones_like(v)
    for _ in range(iterations):
        r = u / torch.matmul(K, c.unsqueeze(-1)).squeeze(-1)
        c = v / torch.matmul(K.permute(0, 2, 1).contiguous(), r.unsqueeze(-1)).squeeze(-1)
    return torch.matmul(r.unsqueeze(-1), c.unsqueeze(-2)) * K


def main():
    p = common.parser(__doc__.split("\n\n")[0])
    args = p.parse_args()
    common.configure_threads(args.threads)
    repeats = 1 if args.quick else 7
    torch.manual_seed(0)
    cost = torch.rand(BATCH, N, N) * 2.0
    weights = torch.rand(BATCH, N, N) * 2.0 - 1.0
    uniform = torch.full((BATCH, N), 1.0 / N)
    torch_peer = common.peer_name("torch")
    details = {"batch": BATCH, "n": N, "m": N, "eps": EPS, "iterations": ITERATIONS}

    def forward(_):
        diml_sinkhorn(torch.exp(-cost / EPS), uniform, uniform, ITERATIONS)

    def forward_backward(c):
        plan = diml_sinkhorn(torch.exp(-c / EPS), uniform, uniform, ITERATIONS)
        (plan * weights).sum().backward()
        assert torch.isfinite(c.grad).all()

    torch_runs = [
        ("sinkhorn/host_unrolled/forward", forward, lambda: None),
        ("sinkhorn/host_unrolled/forward_backward", forward_backward, lambda: cost.clone().requires_grad_(True)),
        ("sinkhorn/host_detached/forward", forward, lambda: None),
    ]
    for ours, run, prepare in torch_runs:
        if not common.selected(args, ours):
            continue
        seconds = common.median_seconds(run, warmup=1, repeats=repeats, prepare=prepare)
        common.emit(
            f"torch/{ours}",
            ours,
            seconds,
            unit="1,000 pairs",
            peer=torch_peer,
            threads=args.threads,
            dtype="f32",
            **details,
        )

    ours = "sinkhorn/host_f64/forward"
    if not common.selected(args, ours):
        return
    costs = cost.numpy().astype(np.float64)
    a = np.full(N, 1.0 / N)
    pot_peer = common.peer_name("pot", "numpy")

    def pot_loop(_):
        for M in costs:
            ot.sinkhorn(a, a, M, reg=EPS, method="sinkhorn_log", numItermax=ITERATIONS, stopThr=0, warn=False)

    batch_a = np.full((BATCH, N), 1.0 / N)

    def pot_batch(_):
        ot.batch.solve_batch(
            costs, EPS, batch_a, batch_a, max_iter=ITERATIONS, tol=0, method="log_sinkhorn", grad="detach"
        )

    for peer_id, run, solver in [
        (f"pot/{ours}", pot_loop, "ot.sinkhorn(method='sinkhorn_log') per pair"),
        (f"pot_batch/{ours}", pot_batch, "ot.batch.solve_batch(method='log_sinkhorn')"),
    ]:
        seconds = common.median_seconds(run, warmup=1, repeats=repeats)
        common.emit(
            peer_id,
            ours,
            seconds,
            unit="1,000 pairs",
            peer=pot_peer,
            # POT's NumPy backend runs the log-sum-exp iteration on one thread (no BLAS call).
            threads=1,
            dtype="f64",
            solver=solver,
            **details,
        )


if __name__ == "__main__":
    main()
