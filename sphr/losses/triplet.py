"""Triplet, Distance Swap and NPLB (the paper's Eq. 1-3; docs/METHODS.md#losses).

Each is a per-triplet formula on a distance, reduced over the batch: by default the
paper's Euclidean distance and the mean (``distance=`` / ``reducer=`` take any
pytorch-metric-learning distance or reducer, :mod:`sphr.losses.base`).
:func:`nplb_per_triplet` is the one NPLB formula of the project (its first term
:func:`triplet_hinge`, the triplet loss of every loss here): the tabular losses here and
the image-retrieval ``sphr.retrieval.losses.NPLBLoss`` call it, each with its own margin
and distance (docs/METHODS.md#losses).
"""

from __future__ import annotations

from typing import Any

import torch

from sphr.errors import ConfigError
from sphr.losses.base import Labels, TripletObjective
from sphr.losses.distances import rowwise


def _difference(distance: Any) -> Any:
    """``distance.margin``: ``x - y`` for a distance, ``y - x`` for a
    similarity (None: a distance)."""
    return (lambda x, y: x - y) if distance is None else distance.margin


def triplet_hinge(d_ap: torch.Tensor, d_an: torch.Tensor, margin: float, distance: Any = None
                  ) -> torch.Tensor:
    """The triplet loss (the paper's Eq. 1) per triplet: ``[d(a,p) - d(a,n) + m]_+``.

    ``distance``: as in :func:`nplb_per_triplet` (a similarity flips the difference).
    """
    return torch.relu(_difference(distance)(d_ap, d_an) + margin)


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


def nplb_per_triplet(d_ap: torch.Tensor, d_an: torch.Tensor, d_pn: torch.Tensor, margin: float,
                     p: int, distance: Any = None) -> torch.Tensor:
    """NPLB (the paper's Eq. 3) per triplet: ``[d(a,p) - d(a,n) + m]_+ + (d(p,n) - d(a,n))^p``.

    ``distance``: a pytorch-metric-learning distance whose ``margin(x, y)``
    orients each difference (``x - y`` for a distance, ``y - x`` for a
    similarity such as ``CosineSimilarity``); ``None`` means plain distances.
    The margin is the caller's: 1.0 in the tabular stack, 0.3 on the unit
    sphere in the retrieval stack (docs/METHODS.md#losses, docs/notes/RETRIEVAL.md).
    """
    # d(p, n) from the positive: the mistake this loss must not make is reusing d(a, n)
    return triplet_hinge(d_ap, d_an, margin, distance) + _difference(distance)(d_pn, d_an).pow(p)


class Triplet(TripletObjective):
    """``reduce [d(a,p) - d(a,n) + m]_+``: the mean over every triplet by default, as
    ``nn.TripletMarginLoss``. ``distance`` / ``reducer``: see :mod:`sphr.losses.base`."""

    name = "triplet"
    pure_formula = True

    def __init__(self, margin: float = 1.0, *, distance: Any = None, reducer: Any = None) -> None:
        super().__init__()
        self.margin = float(margin)
        self.compose(distance, reducer)

    def hparams(self) -> dict[str, object]:
        return {"margin": self.margin}

    def per_triplet(self, anchor: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor
                    ) -> torch.Tensor:
        """The loss of each triplet, ``(B,)``, before the reducer."""
        d = self.distance
        return triplet_hinge(rowwise(d, anchor, positive), rowwise(d, anchor, negative),
                             self.margin, d)

    def forward(self, anchor: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor,
                labels: Labels | None = None) -> torch.Tensor:
        return self.reduce(self.per_triplet(anchor, positive, negative), anchor, positive, negative,
                           labels)


class DistanceSwap(Triplet):
    """Balntas et al. 2016: the harder of d(a,n) and d(p,n) (``distance.smallest_dist``) is the
    negative distance."""

    name = "distance_swap"

    def per_triplet(self, anchor: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor
                    ) -> torch.Tensor:
        d = self.distance
        d_neg = d.smallest_dist(rowwise(d, anchor, negative), rowwise(d, positive, negative))
        return triplet_hinge(rowwise(d, anchor, positive), d_neg, self.margin, d)


class NPLB(Triplet):
    """No Pairs Left Behind: ``reduce([d(a,p) - d(a,n) + m]_+ + (d(p,n) - d(a,n))^p)``.

    The regularizer ties the positive-to-negative distance to the
    anchor-to-negative one. ``p`` must be even: with an odd power the
    regularizer is unbounded below (d(p,n) < d(a,n) makes it negative) and the
    optimizer drives it to minus infinity (the paper's Section 3).
    """

    name = "nplb"

    # margin 1.0 on raw embeddings (the paper's listing); the retrieval NPLB uses 0.3 on
    # L2-normalized ones: the same formula, different scales (docs/METHODS.md#losses)
    def __init__(self, margin: float = 1.0, p: int = 2, *, distance: Any = None,
                 reducer: Any = None) -> None:
        super().__init__(margin, distance=distance, reducer=reducer)
        self.p = nplb_power(p)

    def hparams(self) -> dict[str, object]:
        return {"margin": self.margin, "p": self.p}

    def per_triplet(self, anchor: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor
                    ) -> torch.Tensor:
        d = self.distance
        d_ap, d_an = rowwise(d, anchor, positive), rowwise(d, anchor, negative)
        d_pn = rowwise(d, positive, negative)
        return nplb_per_triplet(d_ap, d_an, d_pn, self.margin, self.p, d)
