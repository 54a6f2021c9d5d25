"""m-per-class batch sampler: each batch holds ``batch_size // m`` classes with m images each.

Triplet and pair losses mine inside the batch, so every anchor needs a
positive there. The AdaTriplet protocol draws 4 images per subject, batch 128
(32 subjects). When the data has fewer classes than ``batch_size // m``
(digits: 10), every class goes in each batch and m grows to fill the batch.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import numpy as np

from sphr.errors import ConfigError

log = logging.getLogger(__name__)


class MPerClassBatchSampler:
    """Yields lists of indices; ``len(self)`` batches per epoch (about one pass over the images)."""

    def __init__(self, labels: np.ndarray, m: int = 4, batch_size: int = 128, *, seed: int = 0,
                 batches_per_epoch: int | None = None) -> None:
        labels = np.asarray(labels)
        if m < 2:
            raise ConfigError(f"m-per-class sampler needs m >= 2 (anchor and positive), got {m}")
        classes, inverse = np.unique(labels, return_inverse=True)
        self.members = [np.flatnonzero(inverse == k) for k in range(len(classes))]
        # classes with one image cannot give a positive pair; they stay out of training batches
        self.usable = np.array([k for k, mem in enumerate(self.members) if len(mem) >= 2])
        if len(self.usable) < 2:
            raise ConfigError("training data needs at least two classes with two or more images "
                              "each")
        per_batch = max(batch_size // m, 1)
        if per_batch > len(self.usable):
            per_batch = len(self.usable)
            m = max(batch_size // per_batch, 2)
            log.info("only %d usable classes: %d per class per batch", per_batch, m)
        self.classes_per_batch = per_batch
        self.m = m
        self.batch_size = per_batch * m
        n_images = sum(len(self.members[k]) for k in self.usable)
        self.batches_per_epoch = batches_per_epoch or max(n_images // self.batch_size, 1)
        self.rng = np.random.default_rng(seed)

    def __len__(self) -> int:
        return self.batches_per_epoch

    def __iter__(self) -> Iterator[list[int]]:
        for _ in range(self.batches_per_epoch):
            chosen = self.rng.choice(self.usable, size=self.classes_per_batch, replace=False)
            batch: list[int] = []
            for k in chosen:
                mem = self.members[k]
                batch.extend(self.rng.choice(mem, size=self.m, replace=len(mem) < self.m).tolist())
            yield batch
