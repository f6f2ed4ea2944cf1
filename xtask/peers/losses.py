"""Forward + backward time of four loss/miner pairs in pytorch-metric-learning, the peer of
`crates/dml-losses/benches/losses.rs`.

The batch is the Rust bench's: N = 180 embeddings of D = 512 in f32, uniform in [-1, 1),
labels `i // 4` (45 classes of 4), and 100 classes for the proxy-based loss. Every loss and
miner uses PML's defaults, which are ours too (the Rust bench sets only the names, plus
margin 0.2 for the triplet loss and semi-hard triplets for its miner):

- `losses/proxy_anchor`: `ProxyAnchorLoss(num_classes=100, embedding_size=512)`;
- `losses/multi_similarity+miner`: `MultiSimilarityLoss()` on `MultiSimilarityMiner()`;
- `losses/margin+distance_weighted`: `MarginLoss()` on `DistanceWeightedMiner()`;
- `losses/triplet_margin+semihard`: `TripletMarginLoss(margin=0.2)` on
  `TripletMarginMiner(type_of_triplets="semihard")` (the miner's own margin is 0.2 by default).

One iteration, as ours times it: the miner and the loss on a fresh leaf tensor, the backward
pass, and reading the embeddings' gradient (ours copies it to the host; here it is a NumPy view
of memory PyTorch already wrote). The leaf tensor is built before the clock starts, in both.
5 warm-up iterations, then 200 timed ones (`--quick`: 1 and 5); the median is reported.

Deliberate differences: the embeddings come from NumPy's generator (seed 0), not ours (the same
distribution, other values, so the miners pick comparable but not identical tuples; `mined`
reports how many the miner returned in the last iteration: pairs for the multi-similarity
miner, triplets for the others); the proxies are PML's initialisation, not ours. The proxies'
gradient is computed in both (they are parameters of the loss) and is dropped before each
iteration here instead of accumulating.
"""

import numpy as np
import torch
from pytorch_metric_learning import losses, miners

import common

N = 180
D = 512
PER_CLASS = 4
NUM_CLASSES = 100


def setups():
    """(ours id, loss, miner or None) of the Rust bench's four configurations."""
    return [
        (
            "losses/proxy_anchor",
            losses.ProxyAnchorLoss(num_classes=NUM_CLASSES, embedding_size=D),
            None,
        ),
        (
            "losses/multi_similarity+miner",
            losses.MultiSimilarityLoss(),
            miners.MultiSimilarityMiner(),
        ),
        (
            "losses/margin+distance_weighted",
            losses.MarginLoss(),
            miners.DistanceWeightedMiner(),
        ),
        (
            "losses/triplet_margin+semihard",
            losses.TripletMarginLoss(margin=0.2),
            miners.TripletMarginMiner(type_of_triplets="semihard"),
        ),
    ]


def mined_count(tuples):
    """Pairs (positive + negative) or triplets in a miner's output."""
    if len(tuples) == 4:
        return len(tuples[0]) + len(tuples[2])
    return len(tuples[0])


def main():
    p = common.parser(__doc__.split("\n\n")[0])
    args = p.parse_args()
    common.configure_threads(args.threads)
    warmup, iterations = (1, 5) if args.quick else (5, 200)
    values = torch.from_numpy(np.random.default_rng(0).uniform(-1.0, 1.0, (N, D)).astype(np.float32))
    labels = torch.arange(N) // PER_CLASS
    peer = common.peer_name("torch", "pytorch-metric-learning")
    torch.manual_seed(0)
    for ours, loss_fn, miner in setups():
        if not common.selected(args, ours):
            continue
        mined = []

        def prepare():
            loss_fn.zero_grad(set_to_none=True)
            return values.clone().requires_grad_(True)

        def run(x):
            if miner is None:
                loss = loss_fn(x, labels)
            else:
                tuples = miner(x, labels)
                mined.append(mined_count(tuples))
                loss = loss_fn(x, labels, tuples)
            loss.backward()
            gradient = x.grad.numpy()
            assert gradient.shape == (N, D)

        seconds = common.median_seconds(run, warmup=warmup, repeats=iterations, prepare=prepare)
        common.emit(
            f"pml/{ours}",
            ours,
            seconds,
            unit="forward + backward",
            peer=peer,
            threads=args.threads,
            n=N,
            d=D,
            samples_per_class=PER_CLASS,
            proxies=NUM_CLASSES,
            iterations=iterations,
            mined=mined[-1] if mined else None,
        )


if __name__ == "__main__":
    main()
