"""Collapse monitor: is an embedding squeezed to a point or onto a few directions?

Two signs, either one flags a collapse:

* **mean negative-pair cosine** above ``cos_threshold`` (0.95): pairs of
  different subjects / classes point the same way, so every distance is near
  0. A triplet hinge at margin 0 on the unit sphere is minimized by exactly
  this (all deltas -> 0), which is how a DAMS run at mu0 = 0 locks itself.
* **effective rank** (Roy & Vetterli 2007: exp of the entropy of the
  normalized singular values of the centered embedding) below ``min_rank``
  (2): the embedding varies along about one direction.

:func:`embedding_health` measures both on a batch or a whole split;
:class:`CollapseMonitor` averages them over an epoch's batches for the
training loop, which logs a warning when a collapse is seen.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

#: defaults of the monitor
COS_THRESHOLD = 0.95
MIN_RANK = 2.0


def effective_rank(x: torch.Tensor) -> float:
    """exp(entropy of the singular values / their sum) of the centered
    rows; 0 for a constant matrix."""
    x = x.detach().float()
    if x.shape[0] < 2:
        return math.nan
    s = torch.linalg.svdvals(x - x.mean(0, keepdim=True))
    total = float(s.sum())
    if total <= 1e-12 * max(1.0, float(x.abs().max())):
        return 0.0
    p = s / total
    p = p[p > 0]
    return float(torch.exp(-(p * p.log()).sum()))


def mean_negative_cosine(x: torch.Tensor, labels: torch.Tensor | np.ndarray, *,
                         max_pairs: int = 1 << 22) -> float:
    """Mean cosine similarity over pairs with different labels (rows are L2-normalized first).

    Uses the identity sum over all pairs = |sum x|^2 (minus same-label blocks), so
    it is exact and needs no (N, N) matrix for large N.
    """
    x = F.normalize(x.detach().double(), dim=1)
    y = torch.as_tensor(np.asarray(labels) if not isinstance(labels, torch.Tensor) else labels,
                        device=x.device).reshape(-1)
    n = len(y)
    if n < 2:
        return math.nan
    total = x.sum(0)
    all_pairs = float(total @ total) - n  # ordered pairs i != j (each |x_i|^2 = 1 removed)
    same_sum, same_count = 0.0, 0
    for k in torch.unique(y):
        xs = x[y == k]
        t = xs.sum(0)
        same_sum += float(t @ t) - len(xs)
        same_count += len(xs) * (len(xs) - 1)
    neg_count = n * (n - 1) - same_count
    if neg_count <= 0:
        return math.nan
    return (all_pairs - same_sum) / neg_count


@dataclass
class Health:
    mean_negative_cosine: float
    effective_rank: float
    collapsed: bool

    def as_dict(self) -> dict[str, float]:
        return {"neg_cos": self.mean_negative_cosine, "eff_rank": self.effective_rank,
                "collapsed": float(self.collapsed)}


def is_collapsed(neg_cos: float, eff_rank: float, *, cos_threshold: float = COS_THRESHOLD,
                 min_rank: float = MIN_RANK) -> bool:
    return bool((np.isfinite(neg_cos) and neg_cos > cos_threshold)
                or (np.isfinite(eff_rank) and eff_rank < min_rank))


def embedding_health(x: torch.Tensor, labels: torch.Tensor | np.ndarray, *,
                     cos_threshold: float = COS_THRESHOLD, min_rank: float = MIN_RANK) -> Health:
    """Mean negative-pair cosine, effective rank and the collapse
    verdict of one embedding matrix."""
    neg = mean_negative_cosine(x, labels)
    rank = effective_rank(F.normalize(x.detach().double(), dim=1))
    return Health(
        neg, rank, is_collapsed(neg, rank, cos_threshold=cos_threshold, min_rank=min_rank)
    )


class CollapseMonitor:
    """Averages batch health over an epoch (``update`` per batch, ``end_epoch`` per epoch)."""

    def __init__(self, *, cos_threshold: float = COS_THRESHOLD, min_rank: float = MIN_RANK) -> None:
        self.cos_threshold = cos_threshold
        self.min_rank = min_rank
        self.epochs_collapsed = 0
        self._neg: list[float] = []
        self._rank: list[float] = []

    def update(self, x: torch.Tensor, labels: torch.Tensor) -> None:
        with torch.no_grad():
            self._neg.append(mean_negative_cosine(x, labels))
            self._rank.append(effective_rank(F.normalize(x.detach().float(), dim=1)))

    def end_epoch(self) -> Health:
        neg = float(np.nanmean(self._neg)) if self._neg else math.nan
        rank = float(np.nanmean(self._rank)) if self._rank else math.nan
        self._neg, self._rank = [], []
        h = Health(
            neg,
            rank,
            is_collapsed(neg, rank, cos_threshold=self.cos_threshold, min_rank=self.min_rank),
        )
        self.epochs_collapsed += int(h.collapsed)
        return h
