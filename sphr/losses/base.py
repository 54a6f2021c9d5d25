"""What every SPHR loss shares: one call signature on a batch of triplets, and its parts.

``loss(anchor, positive, negative, labels=None) -> scalar``, with the three
embeddings ``(B, D)`` of the batch's offline triplets and, optionally, their
class labels ``(la, lp, ln)``. A loss is a distance, a reducer and a per-triplet
formula, composed as in pytorch-metric-learning (docs/METHODS.md#losses): the
distance defaults to the paper's plain Euclidean (:class:`~sphr.losses.distances.Euclidean`),
the reducer to the mean over the batch (:class:`~sphr.losses.reducers.Mean`).
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch import nn

from sphr.errors import ConfigError
from sphr.losses.distances import Euclidean, distance, pairwise_distances
from sphr.losses.reducers import Mean, TensorReducer

Labels = tuple[torch.Tensor, torch.Tensor, torch.Tensor]

__all__ = ["DISTANCE_METHODS", "Labels", "TripletObjective", "check_parts", "distance", "is_pure",
           "pairwise_distances", "pml_batch"]


#: what a distance must answer for the formulas (pytorch-metric-learning's distance interface)
DISTANCE_METHODS: tuple[str, ...] = ("pairwise_distance", "maybe_normalize", "smallest_dist",
                                     "margin")


def check_parts(distance: Any, reducer: Any) -> None:
    """A :class:`ConfigError` unless ``distance`` / ``reducer`` are None or objects with
    pytorch-metric-learning's interface (a name such as ``"cosine"`` is not one)."""
    missing = [m for m in DISTANCE_METHODS if not callable(getattr(distance, m, None))]
    if distance is not None and (missing or not callable(distance)):
        raise ConfigError("a loss's distance must be a distance object (sphr.losses.Euclidean or "
                          f"a pytorch-metric-learning distance), got {distance!r}")
    if reducer is not None and not callable(reducer):
        raise ConfigError(f"a loss's reducer must be a reducer object (sphr.losses.Mean or a "
                          f"pytorch-metric-learning reducer), got {reducer!r}")


def is_pure(part: Any) -> bool:
    """A distance or reducer that is a plain tensor function (marked ``pure``)."""
    return bool(getattr(part, "pure", False))


def pml_batch(anchor: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor,
              labels: Labels | None = None) -> tuple[torch.Tensor, torch.Tensor,
                                                     tuple[torch.Tensor, ...]]:
    """The batch as pytorch-metric-learning sees it: ``(cat(a, p, n), labels, indices_tuple)``,
    the triplets as positions in the concatenation. Without class labels, anchor and positive
    of triplet i share the pseudo-label i and each negative gets its own."""
    b = anchor.shape[0]
    idx = torch.arange(b, device=anchor.device)
    if labels is None:
        lab = torch.cat([idx, idx, idx + b])
    else:
        lab = torch.cat([torch.as_tensor(x, device=anchor.device) for x in labels])
    return torch.cat([anchor, positive, negative]), lab, (idx, idx + b, idx + 2 * b)


class TripletObjective(nn.Module):
    """Base class: subclasses implement :meth:`forward` on one batch of triplets.

    Subclasses built from a formula set ``distance`` and ``reducer`` with :meth:`compose`
    (the pytorch-metric-learning-backed ones read them off their PML loss).
    """

    name: ClassVar[str] = ""
    #: the class labels change the loss (pytorch-metric-learning losses); others ignore them
    #: (a PML reducer that reads labels then sees the pseudo-labels of :func:`pml_batch`)
    uses_labels: ClassVar[bool] = False
    #: the per-triplet formula is a plain tensor function of the three embeddings (no labels,
    #: parameters, running statistics or host reads); see :attr:`pure`
    pure_formula: ClassVar[bool] = False
    distance: Any
    reducer: Any

    @property
    def pure(self) -> bool:
        """A pure formula on a pure distance and reducer: the compiled step can trace the whole
        loss (sphr.train.fused). A PML distance or reducer (records, asserts, masks) is not."""
        return self.pure_formula and is_pure(self.distance) and is_pure(self.reducer)

    def compose(self, distance: Any = None, reducer: Any = None) -> None:
        """Set the loss's distance and reducer; None keeps the paper's (Euclidean, mean)."""
        check_parts(distance, reducer)
        self.distance = Euclidean() if distance is None else distance
        self.reducer = Mean() if reducer is None else reducer

    def reduce(self, losses: torch.Tensor, anchor: torch.Tensor, positive: torch.Tensor,
               negative: torch.Tensor, labels: Labels | None = None) -> torch.Tensor:
        """One number from the per-triplet losses ``(B,)``, by the loss's reducer."""
        if isinstance(self.reducer, TensorReducer):
            # the losses alone: no (3B, D) concatenation or index tensors in the eager step
            return self.reducer.reduce_losses(losses)
        emb, lab, indices = pml_batch(anchor, positive, negative, labels)
        return self.reducer(
            {"loss": {"losses": losses, "indices": indices, "reduction_type": "triplet"}}, emb, lab
        )

    def forward(self, anchor: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor,
                labels: Labels | None = None) -> torch.Tensor:
        raise NotImplementedError

    def extra_repr(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.hparams().items())

    def hparams(self) -> dict[str, object]:
        return {}
