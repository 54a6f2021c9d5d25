"""What every SPHR loss shares: one call signature on a batch of triplets.

``loss(anchor, positive, negative, labels=None) -> scalar``, with the three
embeddings ``(B, D)`` of the batch's offline triplets and, optionally, their
class labels ``(la, lp, ln)``. Distances are plain Euclidean (docs/METHODS.md#losses).
"""

from __future__ import annotations

from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import nn

Labels = tuple[torch.Tensor, torch.Tensor, torch.Tensor]

#: squared distances are clamped here before the square root: its slope is
#: infinite at 0, and clamp's zero gradient keeps coinciding points from giving NaN
_D2_EPS = 1e-12


def distance(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Row-wise Euclidean distance, as the paper's listing computes it.

    ``F.pairwise_distance`` (what ``nn.TripletMarginLoss`` uses) adds 1e-6 to
    the difference, which keeps the gradient finite when two rows coincide.
    """
    return F.pairwise_distance(x, y)


def pairwise_distances(e: torch.Tensor) -> torch.Tensor:
    """All ``(N, N)`` Euclidean distances via the Gram matrix (one matmul)."""
    sq = (e * e).sum(-1)
    d2 = sq[..., :, None] + sq[..., None, :] - 2.0 * (e @ e.transpose(-1, -2))
    return torch.sqrt(torch.clamp(d2, min=_D2_EPS))


class TripletObjective(nn.Module):
    """Base class: subclasses implement :meth:`forward` on one batch of triplets."""

    name: ClassVar[str] = ""
    #: the class labels change the loss (pytorch-metric-learning losses); others ignore them
    uses_labels: ClassVar[bool] = False
    #: a plain tensor function of the three embeddings (no labels, parameters, running
    #: statistics or host reads), so the compiled step can trace it (sphr.train.fused)
    pure: ClassVar[bool] = False

    def forward(self, anchor: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor,
                labels: Labels | None = None) -> torch.Tensor:
        raise NotImplementedError

    def extra_repr(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.hparams().items())

    def hparams(self) -> dict[str, object]:
        return {}
