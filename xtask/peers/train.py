"""Training throughput in PyTorch + pytorch-metric-learning, the peer of
`crates/train/benches/throughput.rs`.

One training step is what `train::Learner::step` does for the bench's configuration (the
embedded `assets/configs/default.toml` with `model.backbone`, `model.embedding_dim = 128`,
`loss.name = "contrastive"` and `miner = none` set): the forward pass of a backbone and the
default embedding head, PML's `ContrastiveLoss` with its defaults (pos_margin 0, neg_margin 1,
`LpDistance` on normalised embeddings, the average of the non-zero terms), reading the loss
value back (as ours does, which also synchronises a GPU), the backward pass and an Adam update
(eps 1e-8, no weight decay, learning rate 1e-4 for the backbone and the head, the rates the
Rust bench passes). Batch norm runs in training mode.

The models are those of `crates/dml-models`:
- the small CNN of `small_cnn.rs`: four conv 3×3 (padding 1, no bias) → batch norm → ReLU
  stages of 32, 64, 128 and 256 channels, a 2×2 max-pool (stride 2) before every stage but
  the first;
- torchvision's ResNet-18 and ResNet-50 (weights=None), without their average pool and
  classifier, as `resnet.rs` builds them (torchvision's layout, v1.5 strides);
- the head of `head.rs` with the default config: global average pooling, a linear layer to
  the embedding dimension and L2 normalisation (`F.normalize`, whose 1e-12 floor on the norm
  is ours too).

The batch is the Rust bench's deterministic one, `((i * 7919) % 1013) / 506 - 1` for flat
index i of a `[B, 3, S, S]` tensor, labels `i // 4`, and like the Rust bench each step
uploads a fresh copy of it to the device. Timing as ours: two warm-up steps, then `--steps`
timed steps (default 10) between device synchronisations; the time is their mean.

Deliberate differences: the weights are PyTorch's own random initialisation, not ours (the
cost of a step hardly depends on the values); the one Adam optimiser has two parameter
groups where ours has one optimiser per group (the same update); the per-phase profile of
the Rust bench is not reproduced. `--channels-last` (off by default) runs the model in
PyTorch's NHWC memory format, which can be faster on the CPU; the line says which format ran.
`--device cuda` measures PyTorch on a GPU, where cuDNN may compute the convolutions in TF32
(PyTorch's default) unless `--no-tf32` is given. `--quick` runs one timed step of batch 8 at 32²
per workload, to check that the script runs. ResNet-50 at batch 64 runs only with `--device
cuda` or when `--only` selects it, as in the Rust bench.
"""

import time

import torch
import torch.nn.functional as F
from pytorch_metric_learning.losses import ContrastiveLoss
from torch import nn
from torchvision.models import resnet18, resnet50

import common

WORKLOADS = [
    # (ours id, backbone, side, batch, embedding dim, GPU only)
    ("train/small_cnn_28px_b128", "small_cnn", 28, 128, 128, False),
    ("train/resnet18_112px_b32", "resnet18", 112, 32, 128, False),
    ("train/resnet50_224px_b16", "resnet50", 224, 16, 128, False),
    # As in the Rust bench: on a GPU device, or when --only selects it.
    ("train/resnet50_224px_b64", "resnet50", 224, 64, 128, True),
]
LEARNING_RATE = 1e-4


def small_cnn(widths=(32, 64, 128, 256)):
    """The small CNN of `crates/dml-models/src/small_cnn.rs`: conv-BN-ReLU stages, a 2×2
    max-pool before every stage after the first."""
    layers = []
    inputs = 3
    for stage, width in enumerate(widths):
        if stage > 0:
            layers.append(nn.MaxPool2d(2))
        layers += [
            nn.Conv2d(inputs, width, 3, padding=1, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU(inplace=True),
        ]
        inputs = width
    return nn.Sequential(*layers), inputs


def resnet_trunk(build):
    """A torchvision ResNet without its global pooling and classifier (the feature maps of
    layer4), as `crates/dml-models/src/resnet.rs` returns them, and its output channels."""
    net = build(weights=None)
    channels = net.fc.in_features
    return nn.Sequential(*list(net.children())[:-2]), channels


class EmbeddingHead(nn.Module):
    """The default head of `crates/dml-models/src/head.rs`: global average pooling, linear
    projection, L2 normalisation."""

    def __init__(self, channels, dim):
        super().__init__()
        self.linear = nn.Linear(channels, dim)

    def forward(self, maps):
        return F.normalize(self.linear(maps.mean(dim=(2, 3))), dim=1)


BACKBONES = {
    "small_cnn": small_cnn,
    "resnet18": lambda: resnet_trunk(resnet18),
    "resnet50": lambda: resnet_trunk(resnet50),
}


def build(backbone, dim):
    """The backbone and the head of one workload."""
    trunk, channels = BACKBONES[backbone]()
    return trunk, EmbeddingHead(channels, dim)


def pixels(batch, side):
    """The Rust bench's deterministic batch `[batch, 3, side, side]` with values in [-1, 1)."""
    i = torch.arange(batch * 3 * side * side, dtype=torch.int64)
    return (((i * 7919) % 1013).to(torch.float32) / 506.0 - 1.0).reshape(batch, 3, side, side)


def main():
    p = common.parser(__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=10, help="timed training steps per workload")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument(
        "--no-tf32",
        action="store_true",
        help="on CUDA, keep convolutions and products in f32 (PyTorch lets cuDNN's convolutions "
        "use TF32 tensor cores by default; our wgpu kernels compute in f32)",
    )
    p.add_argument(
        "--channels-last",
        action="store_true",
        help="run the model in the channels-last (NHWC) memory format",
    )
    args = p.parse_args()
    if args.steps < 1:
        p.error("--steps must be at least 1")
    common.configure_threads(args.threads)
    steps = 1 if args.quick else args.steps
    device = torch.device(args.device)
    if args.no_tf32:
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
    memory_format = torch.channels_last if args.channels_last else torch.contiguous_format
    peer = common.peer_name("torch", "torchvision", "pytorch-metric-learning")

    def sync():
        # CUDA kernels run asynchronously: the clock is read only after the device finished.
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    for ours, backbone, side, batch, dim, gpu_only in WORKLOADS:
        if not common.selected(args, ours):
            continue
        if gpu_only and args.only is None and device.type != "cuda":
            continue
        if args.quick:
            # The smallest batch with positive pairs in every class and the smallest side
            # the ResNets' five halvings accept.
            batch, side = 8, 32
        torch.manual_seed(0)
        trunk, head = build(backbone, dim)
        trunk = trunk.to(device=device, memory_format=memory_format).train()
        head = head.to(device).train()
        optimizer = torch.optim.Adam(
            [
                {"params": trunk.parameters(), "lr": LEARNING_RATE},
                {"params": head.parameters(), "lr": LEARNING_RATE},
            ],
            eps=1e-8,
            weight_decay=0.0,
        )
        loss_fn = ContrastiveLoss()
        images = pixels(batch, side)
        labels = (torch.arange(batch) // 4).to(device)

        def step():
            x = images.to(device=device, memory_format=memory_format, copy=True)
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(head(trunk(x)), labels)
            value = loss.item()
            loss.backward()
            optimizer.step()
            return value

        for _ in range(2):
            step()
        sync()
        start = time.perf_counter()
        for _ in range(steps):
            value = step()
        sync()
        seconds = (time.perf_counter() - start) / steps
        common.emit(
            f"torch/{ours}",
            ours,
            seconds,
            unit="training step",
            peer=peer,
            threads=args.threads,
            device=args.device,
            memory_format="channels_last" if args.channels_last else "contiguous",
            tf32=args.device == "cuda" and torch.backends.cudnn.allow_tf32,
            batch=batch,
            input=[3, side, side],
            steps=steps,
            images_per_second=batch / seconds,
            last_loss=value,
        )


if __name__ == "__main__":
    main()
