//! Every bench of the workspace, and the peer script that runs the same workloads elsewhere.
//!
//! A new bench is one entry here: its `[[bench]]` target prints measurement lines in the format
//! of `dml_testkit::bench`, and its peer (if one exists) prints lines whose `ours` field names the
//! measurement it mirrors.

/// One bench target of the workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// The name `--only` selects (unique).
    pub name: &'static str,
    /// The `[[bench]]` target's name (unique in the workspace).
    pub target: &'static str,
    /// Arguments after `--` for our bench.
    pub args: &'static [&'static str],
    /// Whether our bench takes `--device NAME`.
    pub takes_device: bool,
    /// The same workloads in Python, if a peer library implements them.
    pub peer: Option<Peer>,
    /// Whether a run without `--only` includes it (the million-image evaluation takes half an hour
    /// on two cores and is selected by name).
    pub default: bool,
    /// What it measures, for `--list`.
    pub what: &'static str,
}

/// A peer script under `xtask/peers/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    /// The script's file name.
    pub script: &'static str,
    /// Its arguments.
    pub args: &'static [&'static str],
    /// Whether it takes `--device cpu|cuda`.
    pub takes_device: bool,
}

const fn peer(script: &'static str, args: &'static [&'static str], takes_device: bool) -> Option<Peer> {
    Some(Peer {
        script,
        args,
        takes_device,
    })
}

/// The workspace's benches, in the order they run.
pub const ENTRIES: &[Entry] = &[
    Entry {
        name: "throughput",
        target: "throughput",
        args: &[],
        takes_device: true,
        peer: peer("train.py", &[], true),
        default: true,
        what: "training steps: small CNN 28² b128, ResNet-18 112² b32, ResNet-50 224² b16, on a GPU also ResNet-50 b64 (PyTorch + PML)",
    },
    Entry {
        name: "losses",
        target: "losses",
        args: &[],
        takes_device: false,
        peer: peer("losses.py", &[], false),
        default: true,
        what: "loss + miner forward and backward, N = 180, D = 512 (pytorch-metric-learning)",
    },
    Entry {
        name: "sinkhorn",
        target: "sinkhorn",
        args: &[],
        takes_device: true,
        peer: peer("sinkhorn.py", &[], false),
        default: true,
        what: "1,000 entropic OT problems of 16 × 16, 50 iterations (DIML's PyTorch loop, POT)",
    },
    Entry {
        name: "rerank",
        target: "rerank",
        args: &[],
        takes_device: false,
        peer: peer("rerank.py", &[], false),
        default: true,
        what: "DIML structural re-ranking of 100 candidates per query (DIML's PyTorch code)",
    },
    Entry {
        name: "retrieval",
        target: "retrieval",
        args: &["--n", "60000", "--classes", "11316"],
        takes_device: false,
        peer: peer("retrieval.py", &["--n", "60000", "--classes", "11316"], false),
        default: true,
        what: "P@1 + MAP@R of 60,000 × 128 in SOP's 11,316 classes, exact search (PML AccuracyCalculator + faiss)",
    },
    Entry {
        name: "retrieval-c10",
        target: "retrieval",
        args: &["--n", "60000", "--classes", "10"],
        takes_device: false,
        // PML keeps about 64 bytes per query and neighbour: with k ≈ 6,000 that is 24 GB, more
        // than this machine has (its run was killed at 22.7 GB), so this shape has no peer.
        peer: None,
        default: true,
        what: "P@1 + MAP@R of 60,000 × 128 in 10 classes (k ≈ 6,000, the memory worst case; PML needs ~24 GB)",
    },
    Entry {
        name: "retrieval-1m",
        target: "retrieval",
        args: &["--n", "1000000", "--classes", "188679"],
        takes_device: false,
        // PML's `get_label_match_counts` compares every distinct label with every reference
        // label in one boolean matrix, classes × n: 188 GB here (the run failed allocating it),
        // so this shape has no peer.
        peer: None,
        default: false,
        what: "P@1 + MAP@R of 1,000,000 × 128 at SOP's 5.3 images per class, exact search (PML needs 188 GB)",
    },
    Entry {
        name: "loader",
        target: "loader",
        args: &[],
        takes_device: false,
        peer: peer("loader.py", &[], false),
        default: true,
        what: "JPEG decoding + training augmentation at 224², 1 and 2 threads (torchvision DataLoader)",
    },
    Entry {
        name: "render",
        target: "render",
        args: &[],
        takes_device: false,
        peer: None,
        default: true,
        what: "rendering the synthetic shapes and parts sets (image and mask) at 64² and 128², all cores",
    },
    Entry {
        name: "saliency",
        target: "saliency",
        args: &[],
        takes_device: true,
        peer: peer("saliency.py", &[], true),
        default: true,
        what: "SmoothGrad maps of 50 noisy copies, small CNN 48² (PyTorch)",
    },
    Entry {
        name: "mining",
        target: "mining",
        args: &[],
        takes_device: true,
        peer: None,
        default: true,
        what: "a triplet step with and without similarity mining",
    },
    Entry {
        name: "avsl",
        target: "avsl",
        args: &[],
        takes_device: true,
        peer: None,
        default: true,
        what: "a Proxy-Anchor step with and without AVSL; d̂ per pair",
    },
    Entry {
        name: "geodesic",
        target: "geodesic",
        args: &["--iters", "20"],
        takes_device: false,
        peer: None,
        default: true,
        what: "PPGML's geodesic factor and the GML losses next to their baselines",
    },
    Entry {
        name: "conv",
        target: "conv",
        args: &[],
        takes_device: false,
        peer: None,
        default: true,
        what: "the conv-BN-ReLU block on ResNet-18's 3 × 3 layers, Winograd and direct routes",
    },
];

/// Measurements where the peer is (or may be, within the noise) faster, with the reason. A row
/// of the table whose ratio is below 1.0 is marked, and its reason printed under the table; one
/// with no entry here is marked "not explained".
pub const EXPLAINED: &[(&str, &str)] = &[
    ("train/small_cnn_28px_b128", CONVOLUTIONS),
    ("train/resnet18_112px_b32", CONVOLUTIONS),
    ("train/resnet50_224px_b16", CONVOLUTIONS),
    ("saliency/smoothgrad_small_cnn_48px", CONVOLUTIONS),
    (
        "rerank/scores_single_thread",
        "DIML's code stops its Sinkhorn loop when the mean change of its scalings falls below 0.1, after \
         about 6 iterations; ours iterates until the plan's marginal error is at most 1e-6 (about 64). \
         With our stopping rule the same PyTorch code is the slower one (the `torch_tolerance` row).",
    ),
    (
        "sinkhorn/host_unrolled/forward",
        "The same 50 iterations: ours in f64 in the log domain (stable for any eps, and the forward \
         pass of the differentiable plan), DIML's in f32 in kernel space (which underflows for small \
         eps); the two are within the noise of each other.",
    ),
];

/// Why PyTorch trains convolutional networks faster on the CPU.
const CONVOLUTIONS: &str = "Our convolutions run on our AVX-512 product: Winograd F(4×4, 3×3) or \
    F(2×2, 3×3) for the wide 3 × 3 stride-1 layers (4 or 2.25 times fewer multiply-adds), im2col for \
    the others. The products, at 45–65 GMAC/s per core, are about half of a ResNet-18 step; the \
    Winograd transforms, the unfolding and packing, the batch-norm, ReLU and pooling passes and the \
    reorders between them are most of the rest (about 40 % of a 0.43 s step, profiled 2026-11-25), \
    passes that oneDNN's direct convolutions on blocked layouts fuse away. The small CNN's layers \
    have too few channels for Winograd to pay, so it runs on im2col alone (docs/cpu.md).";

/// The entries `only` selects: every default entry when it is empty, else each entry whose name
/// is listed (comma-separated names may also be given in one argument).
pub fn select(only: &[String]) -> anyhow::Result<Vec<&'static Entry>> {
    if only.is_empty() {
        return Ok(ENTRIES.iter().filter(|e| e.default).collect());
    }
    let names: Vec<&str> = only
        .iter()
        .flat_map(|o| o.split(','))
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .collect();
    let mut selected = Vec::new();
    for name in &names {
        let entry = ENTRIES.iter().find(|e| e.name == *name).ok_or_else(|| {
            let known: Vec<&str> = ENTRIES.iter().map(|e| e.name).collect();
            anyhow::anyhow!("--only {name}: no such bench; the benches are {}", known.join(", "))
        })?;
        if !selected.contains(&entry) {
            selected.push(entry);
        }
    }
    // Run in catalogue order whatever the order on the command line, so tables compare.
    selected.sort_by_key(|e| ENTRIES.iter().position(|x| x == *e));
    Ok(selected)
}

/// The reason a peer beats `ours_id`, if one is recorded.
pub fn explanation(ours_id: &str) -> Option<&'static str> {
    EXPLAINED.iter().find(|(id, _)| *id == ours_id).map(|(_, why)| *why)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_the_default_excludes_the_million() {
        for (i, a) in ENTRIES.iter().enumerate() {
            assert!(ENTRIES[i + 1..].iter().all(|b| b.name != a.name), "{} twice", a.name);
        }
        let default = select(&[]).unwrap();
        assert!(default.iter().all(|e| e.name != "retrieval-1m"));
        assert_eq!(default.len(), ENTRIES.len() - 1);
    }

    #[test]
    fn only_keeps_catalogue_order_and_names_unknown_benches() {
        let picked = select(&["retrieval,throughput".into(), "retrieval".into()]).unwrap();
        let names: Vec<&str> = picked.iter().map(|e| e.name).collect();
        assert_eq!(names, ["throughput", "retrieval"]);
        let err = select(&["resnet".into()]).unwrap_err().to_string();
        assert!(err.contains("--only resnet") && err.contains("throughput"), "{err}");
    }

    #[test]
    fn every_peer_script_exists() {
        let peers = dml_testkit::workspace_root().join("xtask/peers");
        for e in ENTRIES {
            if let Some(p) = e.peer {
                assert!(
                    peers.join(p.script).is_file(),
                    "{}: xtask/peers/{} is missing",
                    e.name,
                    p.script
                );
            }
        }
        assert!(peers.join("requirements.txt").is_file());
    }
}
