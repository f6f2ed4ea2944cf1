"""What the peer benchmarks share: their command line, the measurement line they print and
the timers.

Every peer script re-implements one of the workspace's Rust benches in PyTorch,
pytorch-metric-learning (PML), POT or faiss, and prints one JSON line per measurement on
stdout, in the format of `dml_testkit::bench` plus an `ours` key that names the Rust
measurement it mirrors, so that `cargo xtask bench --peers` can pair the two:

    {"id": "torch/train/resnet18_112px_b32", "ours": "train/resnet18_112px_b32",
     "seconds": 0.46, "unit": "training step", "peer": "PyTorch 2.15.0 + PML 2.9.0",
     "threads": 2, ...}

Everything else (progress, warnings) goes to stderr, so that stdout stays machine-readable.
"""

import argparse
import json
import math
import os
import resource
import sys
import time
from importlib import metadata

import torch


def parser(description):
    """An argument parser with the flags every peer script takes; scripts add their own."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument(
        "--only",
        metavar="PREFIX",
        help="run only the workloads whose Rust id (e.g. train/resnet18_112px_b32), "
        "or that id without its bench name (resnet18_112px_b32), starts with PREFIX",
    )
    p.add_argument(
        "--threads",
        type=int,
        default=os.cpu_count(),
        help="intra-op threads of PyTorch (and faiss where used); default: every core",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="tiny iteration counts, to check that the script runs (the times mean nothing)",
    )
    return p


def configure_threads(threads):
    """Gives PyTorch `threads` intra-op threads, as the Rust benches use every core by default."""
    torch.set_num_threads(threads)


def selected(args, ours):
    """Whether `--only` lets the workload whose Rust id is `ours` run.

    The prefix is tried against the whole id and against the id without its bench name, so
    that `--only resnet18` and `--only train/resnet18` both select `train/resnet18_112px_b32`,
    as `--only resnet18` does for the Rust bench."""
    if args.only is None:
        return True
    workload = ours.split("/", 1)[1]
    return ours.startswith(args.only) or workload.startswith(args.only)


def peer_name(*packages):
    """`PyTorch 2.15.0 + PML 2.9.0` for `peer_name("torch", "pytorch-metric-learning")`: the
    libraries that did the work, with the versions actually installed."""
    labels = {
        "torch": "PyTorch",
        "torchvision": "torchvision",
        "pytorch-metric-learning": "PML",
        "pot": "POT",
        "faiss-cpu": "faiss",
        "numpy": "NumPy",
        "pillow": "Pillow",
    }
    return " + ".join(f"{labels[p]} {metadata.version(p)}" for p in packages)


def emit(peer_id, ours, seconds, *, unit, peer, threads, **extra):
    """Prints one measurement line: `seconds` is the time of one `unit` of work (lower is
    better), `ours` the id of the Rust measurement the line is compared with.

    A time that is not a finite non-negative number is refused, as `dml_testkit::bench` does:
    a peer that measured nothing must not print a time."""
    if not (math.isfinite(seconds) and seconds >= 0.0):
        raise ValueError(f"peer {peer_id}: measured time {seconds} s is not a finite non-negative number")
    record = {
        "id": peer_id,
        "ours": ours,
        "seconds": seconds,
        "unit": unit,
        "peer": peer,
        "threads": threads,
    }
    for key in extra:
        if key in record:
            raise ValueError(f"peer {peer_id}: detail key {key!r} is reserved")
    record.update(extra)
    print(json.dumps(record), flush=True)


def log(message):
    """A progress line on stderr (stdout carries only measurement lines)."""
    print(message, file=sys.stderr, flush=True)


def peak_rss_mb():
    """Peak resident set size of this process in MB (Linux reports `ru_maxrss` in KB), the
    counterpart of the Rust benches' VmHWM."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def median_seconds(run, *, warmup, repeats, prepare=lambda: None):
    """The median wall time of `run(prepare())` over `repeats` calls, after `warmup` untimed
    ones. `prepare` builds the inputs of one call outside the timed region, as the Rust
    benches build theirs before starting the clock."""
    for _ in range(warmup):
        run(prepare())
    times = []
    for _ in range(repeats):
        inputs = prepare()
        start = time.perf_counter()
        run(inputs)
        times.append(time.perf_counter() - start)
    # The upper middle value of an even count, as `dml_testkit::bench::median` takes.
    return sorted(times)[len(times) // 2]
