"""SmoothGrad saliency maps in PyTorch + pytorch-metric-learning, the peer of
`crates/train/benches/saliency.rs` (the maths of `crates/dml-explain/src/saliency/smoothgrad.rs`,
Kobs et al. Eq. 1–2).

The model is the embedded default configuration's (`assets/configs/default.toml`): the small
CNN of `crates/dml-models/src/small_cnn.rs` (shared with `train.py`) with the default head
(global average pooling, linear to `embedding_dim` = 64, L2 normalisation), on 48² inputs, batch
norm in eval mode (ours freezes it for saliency). One map, as `smoothgrad()` computes it:

- an image `[3, 48, 48]` drawn from N(0, 1) (the bench's input) and `l` = 50 standard-normal
  noise images `[50, 3, 48, 48]`;
- `x_i = image + σ noise_i` with `σ = 0.15 · (max(image) − min(image))`, one batch of 50;
- `d_i` = the distance of the default loss (the margin loss: `LpDistance`, Euclidean on
  normalised embeddings) between the embedding of `x_i` and that of the base image, a black
  image after ImageNet normalisation (`-mean / std` per channel), whose embedding is a constant;
- the gradient of `Σ_i d_i` with respect to the 50 copies (one backward pass), read back with
  the distances;
- the post-processing ours does for every map: the mean gradient over the copies, the paper's
  map (channel mean of its absolute value), the code's map (`Σ_i |channel mean of grad_i| / l`)
  and the code map's normalisation by its 99th percentile (`np.percentile`, linear), as
  `sg.map(MapOrder::Code)` returns it.

Timing as ours: one warm-up map, then `--maps` maps (default 20), the time divided by the maps;
drawing the image and the noise is inside the timed loop in both.

The backward pass also computes the convolution and linear weights' gradients in both, since
neither ours nor PyTorch takes a model's parameters off the tape by default (ours' frozen batch
norm has no trainable parameters left; here its scale and shift get gradients too, a negligible
difference).

Deliberate differences: PyTorch's random weights and random numbers, not ours (the cost hardly
depends on the values). With `--device cuda` the maps are reduced on the GPU and only they come
back to the host, where ours reads the whole per-copy gradient back and reduces it on the host;
every map still ends on the host (its normalisation), so the clock needs no extra
synchronisation.
"""

import time

import numpy as np
import torch
from pytorch_metric_learning.distances import LpDistance

import common
from train import EmbeddingHead, small_cnn

OURS = "saliency/smoothgrad_small_cnn_48px"
SIDE = 48
EMBEDDING_DIM = 64
SPREAD = 0.15
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def black_image(side):
    """The base image of Eq. 1: black (0 in [0, 1]) after the ImageNet normalisation."""
    values = [-m / s for m, s in zip(IMAGENET_MEAN, IMAGENET_STD)]
    return torch.tensor(values, dtype=torch.float32).reshape(3, 1, 1).expand(3, side, side).contiguous()


def normalize_p99(raw):
    """`(g − min) / (p99 − min)` clipped to [0, 1], zeros when p99 equals the minimum, as
    `crates/dml-explain/src/saliency/normalize.rs` (the authors' code) does."""
    p99 = np.percentile(raw, 99.0)
    low = raw.min()
    if p99 <= low:
        return np.zeros_like(raw), p99
    return np.clip((raw - low) / (p99 - low), 0.0, 1.0), p99


def smoothgrad(model, distance, image, base, samples):
    """The raw SmoothGrad quantities of `image` against `base` and the normalised code map."""
    noise = torch.randn(samples, *image.shape, device=image.device)
    sigma = SPREAD * float(image.max() - image.min())
    x = (image.unsqueeze(0) + sigma * noise).requires_grad_(True)
    with torch.no_grad():
        reference = model(base.unsqueeze(0))
    d = distance(model(x), reference).reshape(samples)
    distances = d.detach().cpu().numpy()
    d.sum().backward()
    grad = x.grad
    grad_mean = grad.mean(dim=0)
    paper_map_raw = grad_mean.abs().mean(dim=0).cpu().numpy()
    code_map_raw = (grad.mean(dim=1) / samples).abs().sum(dim=0).cpu().numpy()
    code_map, _ = normalize_p99(code_map_raw)
    return distances, paper_map_raw, code_map


def main():
    p = common.parser(__doc__.split("\n\n")[0])
    p.add_argument("--maps", type=int, default=20, help="timed saliency maps")
    p.add_argument("--samples", type=int, default=50, help="noisy copies per map")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    args = p.parse_args()
    if args.maps < 1 or args.samples < 1:
        p.error("--maps and --samples must be at least 1")
    common.configure_threads(args.threads)
    if not common.selected(args, OURS):
        return
    maps = 2 if args.quick else args.maps
    torch.manual_seed(0)
    trunk, channels = small_cnn()
    device = torch.device(args.device)
    model = torch.nn.Sequential(trunk, EmbeddingHead(channels, EMBEDDING_DIM)).to(device).eval()
    distance = LpDistance()
    base = black_image(SIDE).to(device)

    def one_map():
        # The weights stay tracked, as in ours (a Burn module's parameters are on the tape unless
        # frozen), so the backward pass also computes their gradients; they are dropped before
        # each map rather than accumulated.
        model.zero_grad(set_to_none=True)
        return smoothgrad(model, distance, torch.randn(3, SIDE, SIDE, device=device), base, args.samples)

    one_map()
    start = time.perf_counter()
    for _ in range(maps):
        distances, _, code_map = one_map()
    seconds = (time.perf_counter() - start) / maps
    common.emit(
        f"torch/{OURS}",
        OURS,
        seconds,
        unit="saliency map",
        peer=common.peer_name("torch", "pytorch-metric-learning"),
        threads=args.threads,
        device=args.device,
        samples_per_map=args.samples,
        maps=maps,
        maps_per_second=1.0 / seconds,
        images_per_second=args.samples / seconds,
        mean_distance=float(distances.mean()),
        map_mean=float(code_map.mean()),
    )


if __name__ == "__main__":
    main()
