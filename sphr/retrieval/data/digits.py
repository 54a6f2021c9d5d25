"""scikit-learn's bundled handwritten digits (1,797 real 8x8 scans; no download)
for class-level retrieval."""

from __future__ import annotations

import numpy as np
import torch

from sphr.retrieval.data.core import ImageSet, RetrievalData, split_stratified


def load_digits_data(*, test_fraction: float = 0.5, split_seed: int = 0,
                     limit: int | None = None) -> RetrievalData:
    """Digits 0-9 split by image (stratified, seeded); retrieval is leave-one-out on the test split.

    Images stay 8x8 uint8 here; the batch transform upsamples them to the
    model's input size. ``limit`` keeps the first n images of a seeded
    shuffle (for quick tests).
    """
    from sklearn.datasets import load_digits

    bunch = load_digits()
    images = np.clip(bunch.images * 16.0, 0, 255).astype(np.uint8)  # 0..16 -> 0..255
    labels = bunch.target.astype(np.int64)
    if limit is not None and limit < len(labels):
        keep = np.sort(np.random.default_rng(split_seed).permutation(len(labels))[:limit])
        images, labels = images[keep], labels[keep]
    test = split_stratified(labels, test_fraction, split_seed)
    tensor = torch.from_numpy(images[:, None, :, :].copy())
    no_years = np.full(len(labels), np.nan)

    def part(mask: np.ndarray) -> ImageSet:
        idx = np.flatnonzero(mask)
        return ImageSet(tensor[torch.from_numpy(idx)], labels[idx], no_years[idx])

    return RetrievalData(
        name="digits", level="class", train=part(~test), test=part(test), channels=1, native_size=8,
        info={"source": "sklearn.datasets.load_digits", "images": len(labels), "classes": 10,
              "test_fraction": test_fraction, "split_seed": split_seed},
    )
