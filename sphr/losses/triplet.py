"""Triplet, Distance Swap and NPLB on Euclidean distance (the paper's Eq. 1-3; docs/METHODS.md#losses)."""

from __future__ import annotations

import torch

from sphr.errors import ConfigError
from sphr.losses.base import Labels, TripletObjective, distance


def hinge(d_ap: torch.Tensor, d_an: torch.Tensor, margin: float) -> torch.Tensor:
    return torch.relu(d_ap - d_an + margin)


class Triplet(TripletObjective):
    """``mean [d(a,p) - d(a,n) + m]_+`` (every triplet counts, as ``nn.TripletMarginLoss``)."""

    name = "triplet"

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

    def __init__(self, margin: float = 1.0, p: int = 2) -> None:
        super().__init__(margin)
        if isinstance(p, bool) or int(p) != p or p < 2 or int(p) % 2:
            raise ConfigError(f"NPLB power p must be an even integer >= 2 (got {p!r}): an odd "
                              "power makes the regularizer unbounded below")
        self.p = int(p)

    def hparams(self) -> dict[str, object]:
        return {"margin": self.margin, "p": self.p}

    def forward(self, anchor: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor,
                labels: Labels | None = None) -> torch.Tensor:
        d_an = distance(anchor, negative)
        # d(p, n) from the positive: the mistake this loss must not make is reusing d(a, n)
        d_pn = distance(positive, negative)
        reg = (d_pn - d_an).pow(self.p)
        return (hinge(distance(anchor, positive), d_an, self.margin) + reg).mean()
