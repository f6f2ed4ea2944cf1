"""Retrieval metrics with pytorch-metric-learning's `AccuracyCalculator` and faiss, the peer of
`crates/dml-eval/benches/retrieval.rs`.

The embeddings follow the Rust bench's recipe: `--n` × `--dim` f32 rows in `--classes` Gaussian
clusters, centres drawn from N(0, I), each point its centre plus 1.6 · N(0, I), labels drawn
uniformly. The query set is the reference set. The work timed is one call of
`AccuracyCalculator(include=("precision_at_1", "mean_average_precision_at_r"),
k="max_bin_count").get_accuracy(x, y, x, y, ref_includes_query=True)`: PML counts the labels,
sets k to the largest class size minus one, runs its default k-nearest-neighbour search
(`FaissKNN`, an exact `faiss.IndexFlatL2` over all rows, Euclidean as ours) for k + 1
neighbours, drops each query itself, and computes the two metrics; generating the data is not
timed, in either. faiss gets `--threads` OpenMP threads, PyTorch as many intra-op threads.

`--quick` sets `--n 2000`, to check that the script runs.

Memory: at its peak PML holds about 64 bytes per query–neighbour entry (faiss's distances and
indices, the neighbours' labels, MAP@R's relevance masks and running sums), so the default
60,000 rows with k ≈ 6,000 need about 24 GB; where there is less, the kernel's out-of-memory
killer ends the process and no line is printed (it did on the 23 GB machine this was written on;
`--n 20000` needs about 3 GB). PML's label counting (`get_label_match_counts`) also compares
every distinct label with every reference label in one boolean matrix, classes × n bytes: at
1,000,000 rows in 188,679 classes that is 188 GB, and the allocation fails at once.

Reported: the seconds of `get_accuracy`, the peak resident set of the whole process in MB
(`ru_maxrss`, as ours reports its VmHWM, which includes the data in both), k, the two metric
values, and which k-NN function ran.

Deliberate differences: the data come from NumPy's generator (seed 2024), not ours (ChaCha8 with
Box–Muller): the same distribution, other values, so the metric values agree only to within
sampling noise. The calculator is pinned to the CPU (`device=cpu`), where PML would otherwise
move the data to a GPU when it sees one, since the Rust bench measures the CPU.
"""

import time

import faiss
import numpy as np
import torch
from pytorch_metric_learning.utils.accuracy_calculator import AccuracyCalculator

import common


def dataset(n, dim, classes):
    """`n × dim` embeddings of `classes` Gaussian clusters (centres ~ N(0, I), points ~
    N(centre, 1.6² I)) and their uniformly drawn labels."""
    rng = np.random.default_rng(2024)
    centres = rng.standard_normal((classes, dim), dtype=np.float32)
    labels = rng.integers(0, classes, size=n)
    data = centres[labels] + np.float32(1.6) * rng.standard_normal((n, dim), dtype=np.float32)
    return data, labels


def main():
    p = common.parser(__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=60_000, help="rows (queries = references)")
    p.add_argument("--dim", type=int, default=128, help="embedding width")
    p.add_argument("--classes", type=int, default=10, help="Gaussian clusters")
    args = p.parse_args()
    if args.quick:
        args.n = 2_000
    ours = f"retrieval/{args.n}x{args.dim}_c{args.classes}"
    if not common.selected(args, ours):
        return
    common.configure_threads(args.threads)
    faiss.omp_set_num_threads(args.threads)
    data, labels = dataset(args.n, args.dim, args.classes)
    x = torch.from_numpy(data)
    y = torch.from_numpy(labels)
    calculator = AccuracyCalculator(
        include=("precision_at_1", "mean_average_precision_at_r"),
        k="max_bin_count",
        device=torch.device("cpu"),
    )
    knn = calculator.knn_func
    common.log(f"k-NN function: {type(knn).__module__}.{type(knn).__name__} ({knn.index_init_fn.__name__})")
    start = time.perf_counter()
    metrics = calculator.get_accuracy(x, y, x, y, ref_includes_query=True)
    seconds = time.perf_counter() - start
    k = int(torch.bincount(y).max()) - 1
    common.emit(
        f"pml/{ours}",
        ours,
        seconds,
        unit="evaluation (P@1 + MAP@R)",
        peer=common.peer_name("torch", "pytorch-metric-learning", "faiss-cpu"),
        threads=args.threads,
        n=args.n,
        dim=args.dim,
        classes=args.classes,
        distance="euclidean",
        k=k,
        knn=f"{type(knn).__name__}({knn.index_init_fn.__name__})",
        peak_rss_mb=round(common.peak_rss_mb()),
        precision_at_1=metrics["precision_at_1"],
        mean_average_precision_at_r=metrics["mean_average_precision_at_r"],
    )


if __name__ == "__main__":
    main()
