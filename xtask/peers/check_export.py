"""Loads a `train export` folder in PyTorch and embeds images with it; compares the embeddings with
the ones `train embed` wrote for the same images (the rows of a .npy, in the order given).

    python check_export.py EXPORT_DIR EMBEDDINGS.npy IMAGE... [--normalize]

The images must already have the run's input size (the check is of the model, not of resizing);
pixels are scaled to [0, 1] and normalised with ImageNet's mean and std, the run's defaults.
Prints the largest absolute difference and exits 1 when it exceeds 1e-4 + 1e-4 * |value|.
"""
import sys

import numpy as np
import safetensors.torch
import torch
import torchvision
from PIL import Image

args = [a for a in sys.argv[1:] if not a.startswith("--")]
export, npy, images = args[0], args[1], args[2:]
trunk = torchvision.models.resnet18()
trunk.fc = torch.nn.Identity()
trunk.load_state_dict(safetensors.torch.load_file(f"{export}/trunk.safetensors"))
weights = safetensors.torch.load_file(f"{export}/embedder.safetensors")
if "weight" in weights:
    embedder = torch.nn.Linear(weights["weight"].shape[1], weights["weight"].shape[0])
else:
    # An nn.Sequential: linear layers at the indices that have weights, ReLUs in the gaps.
    linear = {int(k.split(".")[0]): v for k, v in weights.items() if k.endswith(".weight")}
    embedder = torch.nn.Sequential(
        *[
            torch.nn.Linear(linear[i].shape[1], linear[i].shape[0]) if i in linear else torch.nn.ReLU()
            for i in range(max(linear) + 1)
        ]
    )
embedder.load_state_dict(weights)
trunk.eval()
embedder.eval()
mean = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
std = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)
x = torch.stack(
    [
        (torch.from_numpy(np.asarray(Image.open(p).convert("RGB"), dtype=np.float32) / 255.0).permute(2, 0, 1) - mean)
        / std
        for p in images
    ]
)
with torch.no_grad():
    e = embedder(trunk(x))
    if "--normalize" in sys.argv:
        e = torch.nn.functional.normalize(e, dim=1)
ours = np.load(npy)
diff = np.abs(ours - e.numpy())
print(f"max |difference| {diff.max():.3g} over {ours.shape}")
sys.exit(0 if (diff <= 1e-4 + 1e-4 * np.abs(e.numpy())).all() else 1)
