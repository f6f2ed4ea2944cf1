"""JPEG decoding + training augmentation with torchvision and a PyTorch `DataLoader`, the peer
of `crates/dml-data/benches/loader.rs`.

The images are the Rust bench's: 192 RGB images of 500 × 375 from its pixel formula (smooth
gradients plus a hash texture, computed here with the same wrapping uint32 arithmetic), written
as JPEG quality 90 into a temporary directory. The transform is the papers' training
augmentation, which ours reproduces: `RandomResizedCrop(224)` (scale 0.08–1, ratio 3/4–4/3,
antialiased bilinear on PIL images), `RandomHorizontalFlip()`, `ToTensor()` and ImageNet's
`Normalize`. The loader reads batches of 32, shuffled, dropping an incomplete last batch (192
images make six full ones), with 1 and 2 worker processes, the Rust bench's 1 and 2 decoding
threads. For each: one warm-up epoch (the page cache then holds the files, as in ours), then 3
epochs timed; the time is divided by the images loaded.

Deliberate differences: the JPEG files are Pillow's encoding (4:2:0 chroma subsampling by
default), not the `image` crate's, so their sizes differ a little; `source` reports the mean
size for comparison with ours. Each epoch starts its worker processes afresh (PyTorch's default,
`persistent_workers=False`), as ours builds a new loader with new threads per epoch; a process
costs more to start than a thread, which is part of what PyTorch users pay. The main process,
which only collects the batches, keeps `--threads` intra-op threads.
"""

import os
import tempfile
import time

import numpy as np
from PIL import Image
from torch.utils.data import DataLoader, Dataset
from torchvision import transforms

import common

IMAGES = 192
WIDTH, HEIGHT = 500, 375
BATCH = 32
EPOCHS = 3
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def bench_image(i):
    """Image `i` of the Rust bench, `[375, 500, 3]` uint8: `x`, `y` and the hash in wrapping
    uint32 arithmetic, as its closure computes them."""
    y, x = np.mgrid[0:HEIGHT, 0:WIDTH].astype(np.uint32)
    seed = np.uint32((i * 83_492_791) & 0xFFFF_FFFF)
    h = ((x * np.uint32(73_856_093)) ^ (y * np.uint32(19_349_663)) ^ seed) % np.uint32(13)
    red = (x // 2 + np.uint32(i * 7)) % 256
    green = (y * 2 // 3 + h) % 256
    blue = ((x + y) // 4 + h * 2) % 256
    return np.stack([red, green, blue], axis=-1).astype(np.uint8)


class JpegFolder(Dataset):
    """The written JPEG files with their labels, decoded and augmented on access."""

    def __init__(self, paths, transform):
        self.paths = paths
        self.transform = transform

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, index):
        with Image.open(self.paths[index]) as image:
            return self.transform(image.convert("RGB")), index % 8


def main():
    p = common.parser(__doc__.split("\n\n")[0])
    args = p.parse_args()
    common.configure_threads(args.threads)
    epochs = 1 if args.quick else EPOCHS
    transform = transforms.Compose(
        [
            transforms.RandomResizedCrop(224),
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
            transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD),
        ]
    )
    with tempfile.TemporaryDirectory(prefix="dml-peer-loader-") as directory:
        paths = []
        for i in range(IMAGES):
            path = os.path.join(directory, f"{i:04}.jpg")
            Image.fromarray(bench_image(i)).save(path, quality=90)
            paths.append(path)
        source_kb = sum(os.path.getsize(p) for p in paths) // IMAGES // 1024
        dataset = JpegFolder(paths, transform)
        for workers in (1, 2):
            ours = f"loader/224_t{workers}"
            if not common.selected(args, ours):
                continue
            loader = DataLoader(dataset, batch_size=BATCH, shuffle=True, drop_last=True, num_workers=workers)
            for images, _ in loader:
                assert images.shape == (BATCH, 3, 224, 224)
            start = time.perf_counter()
            loaded = 0
            for _ in range(epochs):
                for images, _ in loader:
                    loaded += images.shape[0]
            seconds = time.perf_counter() - start
            common.emit(
                f"torch/{ours}",
                ours,
                seconds / loaded,
                unit="image decoded and augmented",
                peer=common.peer_name("torch", "torchvision", "pillow"),
                threads=workers,
                source=f"500x375 JPEG q90, mean {source_kb} KB",
                transform="random-resized-crop 224 + flip + normalise",
                batch=BATCH,
                images=loaded,
                images_per_second=loaded / seconds,
            )


if __name__ == "__main__":
    main()
