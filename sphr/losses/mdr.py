"""MDR: multi-level distance regularization (Kim & Park, AAAI 2021), on a triplet loss.

The regularizer pulls every pairwise distance of the batch towards the nearest
of a few learnable "levels". Distances are first standardized with a running
mean and SD (momentum 0.9, gradient stopped), so the levels live in SD units:
initialized at -3, 0, 3. The total is

    triplet + weight * mean_pairs min_k |(d - mu) / sigma - level_k| + level_reg * sum_k level_k^2

``weight`` (lambda) is 0.1-0.6 in the paper's experiments; ``level_reg`` is the
authors' small L2 penalty on the levels. The pairs are all pairs among the
batch's anchors, positives and negatives. The distance (of the pairs and of the triplet
term) and the triplet term's reducer are the loss's ``distance`` / ``reducer``
(:mod:`sphr.losses.base`; Euclidean and the mean by default). **Decision**: the authors' code also
divides the embeddings fed to the base loss by the batch's mean distance;
that is ``scale_embeddings=True`` here, off by default so that MDR's triplet
term is the same Euclidean triplet with margin 1 that the other losses use.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from sphr.errors import ConfigError
from sphr.losses.base import Labels, TripletObjective
from sphr.losses.distances import condensed, rowwise
from sphr.losses.triplet import triplet_hinge


class MDR(TripletObjective):
    """Triplet loss plus multi-level distance regularization."""

    name = "mdr"

    def __init__(self, margin: float = 1.0, weight: float = 0.6, level_reg: float = 0.01,
                 momentum: float = 0.9, levels: Sequence[float] = (-3.0, 0.0, 3.0),
                 scale_embeddings: bool = False, *, distance: Any = None,
                 reducer: Any = None) -> None:
        super().__init__()
        if not 0.0 <= momentum < 1.0:
            raise ConfigError(f"MDR momentum must be in [0, 1), got {momentum}")
        if len(levels) < 1:
            raise ConfigError("MDR needs at least one level")
        self.margin, self.weight, self.level_reg = float(margin), float(weight), float(level_reg)
        self.momentum, self.scale_embeddings = float(momentum), bool(scale_embeddings)
        self.compose(distance, reducer)
        self.levels = nn.Parameter(torch.tensor([float(x) for x in levels]))
        # running statistics; ``seen`` = 0 until the first batch sets them (no host sync needed)
        self.register_buffer("running_mean", torch.zeros(()))
        self.register_buffer("running_std", torch.ones(()))
        self.register_buffer("seen", torch.zeros(()))

    def hparams(self) -> dict[str, object]:
        return {"margin": self.margin, "weight": self.weight, "level_reg": self.level_reg,
                "momentum": self.momentum, "scale_embeddings": self.scale_embeddings}

    def _statistics(self, d: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean, std = d.mean().detach(), d.std(correction=0).detach()
        if self.training:
            m = self.momentum
            first = self.seen == 0
            with torch.no_grad():
                self.running_mean.copy_(
                    torch.where(first, mean, m * self.running_mean + (1 - m) * mean)
                )
                self.running_std.copy_(
                    torch.where(first, std, m * self.running_std + (1 - m) * std)
                )
                self.seen.fill_(1.0)
        return self.running_mean, self.running_std

    def regularizer(self, embeddings: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(MDR term, all pairwise distances i < j) for ``(N, D)`` embeddings."""
        d = condensed(self.distance, embeddings)  # Euclidean: torch.pdist
        mu, sigma = self._statistics(d)
        z = (d - mu) / sigma.clamp_min(1e-12)
        nearest = (z[:, None] - self.levels[None, :]).abs().min(dim=1).values
        return nearest.mean(), d

    def forward(self, anchor: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor,
                labels: Labels | None = None) -> torch.Tensor:
        mdr, d = self.regularizer(torch.cat([anchor, positive, negative]))
        if self.scale_embeddings:
            scale = d.mean()
            anchor, positive, negative = anchor / scale, positive / scale, negative / scale
        dist = self.distance
        per_triplet = triplet_hinge(rowwise(dist, anchor, positive),
                                    rowwise(dist, anchor, negative), self.margin, dist)
        trip = self.reduce(per_triplet, anchor, positive, negative, labels)
        return trip + self.weight * mdr + self.level_reg * self.levels.pow(2).sum()
