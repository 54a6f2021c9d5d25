"""Triplet, Distance Swap and NPLB on Euclidean distance (the paper's Eq. 1-3; docs/METHODS.md#losses).

:func:`nplb_per_triplet` is the one NPLB formula of the project: the tabular
:class:`NPLB` here and the image-retrieval ``sphr.retrieval.losses.NPLBLoss``
both call it, each with its own margin and distance (docs/METHODS.md#losses).
"""

from __future__ import annotations

from typing import Any

import torch

from sphr.errors import ConfigError
from sphr.losses.base import Labels, TripletObjective, distance


def hinge(d_ap: torch.Tensor, d_an: torch.Tensor, margin: float) -> torch.Tensor:
    return torch.relu(d_ap - d_an + margin)


def nplb_power(p: Any) -> int:
    """NPLB's power ``p`` as an int; an odd or non-integer power is a :class:`ConfigError`.

    With an odd power the regularizer is unbounded below (d(p,n) < d(a,n)
    makes it negative) and the optimizer drives it to minus infinity (the
    paper's Section 3).
    """
    if isinstance(p, bool) or int(p) != p or p < 2 or int(p) % 2:
        raise ConfigError(f"NPLB power p must be an even integer >= 2 (got {p!r}): an odd "
                          "power makes the regularizer unbounded below")
    return int(p)


def nplb_per_triplet(d_ap: torch.Tensor, d_an: torch.Tensor, d_pn: torch.Tensor, margin: float, p: int,
                     distance: Any = None) -> torch.Tensor:
    """NPLB (the paper's Eq. 3) per triplet: ``[d(a,p) - d(a,n) + m]_+ + (d(p,n) - d(a,n))^p``.

    ``distance``: a pytorch-metric-learning distance whose ``margin(x, y)``
    orients each difference (``x - y`` for a distance, ``y - x`` for a
    similarity such as ``CosineSimilarity``); ``None`` means plain distances.
    The margin is the caller's: 1.0 in the tabular stack, 0.3 on the unit
    sphere in the retrieval stack (docs/METHODS.md#losses, docs/RETRIEVAL.md).
    """
    diff = (lambda x, y: x - y) if distance is None else distance.margin
    # d(p, n) from the positive: the mistake this loss must not make is reusing d(a, n)
    return torch.relu(diff(d_ap, d_an) + margin) + diff(d_pn, d_an).pow(p)


class Triplet(TripletObjective):
    """``mean [d(a,p) - d(a,n) + m]_+`` (every triplet counts, as ``nn.TripletMarginLoss``)."""

    name = "triplet"
    pure = True

    def __init__(self, margin: float = 1.0) -> None:
        super().__init__()
        self.margin = float(margin)

    def hparams(self) -> dict[str, object]:
        return {"margin": self.margin}

    def forward(self, anchor: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor,
                labels: Labels | None = None) -> torch.Tensor:
        return hinge(distance(anchor, positive), distance(anchor, negative), self.margin).mean()


class DistanceSwap(Triplet):
    """Balntas et al. 2016: the harder of d(a,n) and d(p,n) is the negative distance."""

    name = "distance_swap"

    def forward(self, anchor: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor,
                labels: Labels | None = None) -> torch.Tensor:
        d_neg = torch.minimum(distance(anchor, negative), distance(positive, negative))
        return hinge(distance(anchor, positive), d_neg, self.margin).mean()


class NPLB(Triplet):
    """No Pairs Left Behind: ``mean([d(a,p) - d(a,n) + m]_+ + (d(p,n) - d(a,n))^p)``.

    The regularizer ties the positive-to-negative distance to the
    anchor-to-negative one. ``p`` must be even: with an odd power the
    regularizer is unbounded below (d(p,n) < d(a,n) makes it negative) and the
    optimizer drives it to minus infinity (the paper's Section 3).
    """

    name = "nplb"

    # margin 1.0 on raw embeddings (the paper's listing); the retrieval NPLB uses 0.3 on
    # L2-normalized ones: the same formula, different scales (docs/METHODS.md#losses)
    def __init__(self, margin: float = 1.0, p: int = 2) -> None:
        super().__init__(margin)
        self.p = nplb_power(p)

    def hparams(self) -> dict[str, object]:
        return {"margin": self.margin, "p": self.p}

    def forward(self, anchor: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor,
                labels: Labels | None = None) -> torch.Tensor:
        d_ap, d_an, d_pn = distance(anchor, positive), distance(anchor, negative), distance(positive, negative)
        return nplb_per_triplet(d_ap, d_an, d_pn, self.margin, self.p).mean()
