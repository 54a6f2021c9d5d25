"""Containers for a retrieval dataset: images + subject/class ids + years from baseline."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset


@dataclass
class ImageSet:
    """One split. ``images`` is a uint8 ``(N, C, H, W)`` tensor held in memory, or a
    torch ``Dataset`` returning uint8 ``(C, H, W)`` tensors (large manifests).

    ``labels``: subject (or class) id per image, int64. ``years``: years from
    baseline (0 = baseline), NaN where the data has no visit information.
    """

    images: torch.Tensor | Dataset
    labels: np.ndarray
    years: np.ndarray
    names: list[str] | None = None

    def __post_init__(self) -> None:
        self.labels = np.asarray(self.labels, dtype=np.int64)
        self.years = np.asarray(self.years, dtype=np.float64)
        n_images = len(self.images)  # type: ignore[arg-type]
        if len(self.labels) != len(self.years) or len(self.labels) != n_images:
            raise ValueError("images, labels and years must have the same length")

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def in_memory(self) -> bool:
        return isinstance(self.images, torch.Tensor)

    def batch(self, indices: np.ndarray | list[int]) -> torch.Tensor:
        """uint8 ``(B, C, H, W)`` for these rows."""
        idx = np.asarray(indices, dtype=np.int64)
        if isinstance(self.images, torch.Tensor):
            return self.images[torch.from_numpy(idx)]
        return torch.stack([self.images[int(i)] for i in idx])

    @property
    def has_visits(self) -> bool:
        """True when there are baseline images and follow-ups to query with."""
        y = self.years[~np.isnan(self.years)]
        return bool(len(y)) and bool((y == 0).any()) and bool((y > 0).any())

    def subset(self, mask: np.ndarray) -> ImageSet:
        idx = np.flatnonzero(mask)
        images = (self.images[torch.from_numpy(idx)] if isinstance(self.images, torch.Tensor)
                  else torch.utils.data.Subset(self.images, idx.tolist()))
        names = [self.names[i] for i in idx] if self.names is not None else None
        return ImageSet(images, self.labels[idx], self.years[idx], names)


@dataclass
class RetrievalData:
    """A dataset ready for training and evaluation.

    ``level``: ``subject`` (forensic matching: the same person at another
    visit; train and test subjects are disjoint) or ``class`` (class-level
    retrieval, e.g. digits: classes are shared by train and test).
    """

    name: str
    level: str
    train: ImageSet
    test: ImageSet
    channels: int
    native_size: int
    info: dict[str, Any] = field(default_factory=dict)


def split_by_group(groups: np.ndarray, test_fraction: float, seed: int) -> np.ndarray:
    """Boolean test mask assigning whole groups (subjects) to test, seeded."""
    rng = np.random.default_rng(seed)
    uniq = np.unique(groups)
    n_test = max(1, round(len(uniq) * test_fraction))
    test_groups = rng.permutation(uniq)[:n_test]
    return np.isin(groups, test_groups)


def split_stratified(labels: np.ndarray, test_fraction: float, seed: int) -> np.ndarray:
    """Boolean test mask splitting images (not classes), the same
    fraction in every class, seeded."""
    rng = np.random.default_rng(seed)
    test = np.zeros(len(labels), dtype=bool)
    for k in np.unique(labels):
        idx = rng.permutation(np.flatnonzero(labels == k))
        test[idx[: round(len(idx) * test_fraction)]] = True
    return test
