"""The marker-geometry anchor: how far a triplet's embedded distances moved from the
distances of the markers they came from (docs/METHODS.md, "SPHR's stability from fit to
fit", R3).

NPLB orders the training classes within the first epoch of the ``paper`` profile and keeps
moving the embedding after that, away from the marker geometry that ranks death on real
people. ``[train] anchor = w`` adds ``w`` times :func:`geometry_stress` to the loss of every
batch, in training and in model selection's validation loss, so a distance leaves the
markers' only where the triplets pay for it. It is a plain tensor function of embeddings and
inputs: the compiled step (:mod:`sphr.train.fused`) traces it.

It is registered once, as the term ``geometry`` of the loss registry (domain ``term``), and
added to the loss in one place, :class:`sphr.losses.objective.BatchObjective`, which every
training path and the validation loss call. ("Anchor" here is the weight's setting name,
``[train] anchor``; the triplet's anchor row is another thing.)
"""

from __future__ import annotations

import torch

from sphr.losses.distances import distance
from sphr.losses.registry import REGISTRY, TERM, RegisteredLoss

#: keeps a batch of coinciding rows (all input distances 0) from dividing by zero
_EPS = 1e-12


def geometry_stress(za: torch.Tensor, zp: torch.Tensor, zn: torch.Tensor,
                    xa: torch.Tensor, xp: torch.Tensor, xn: torch.Tensor) -> torch.Tensor:
    """Normalized stress over each triplet's three pairs (anchor-positive, anchor-negative,
    positive-negative): sum of (d_z - d_x)^2 over sum of d_x^2, Euclidean both.

    Rows are triplets (the second-to-last axis); leading axes (a stack of models) are kept,
    so ``(b, d)`` gives a scalar and ``(K, b, d)`` one value per model. 0 when the embedding
    keeps every pair's input distance; 1 when it collapses every pair to a point.
    Scale-free in the inputs (both sums scale alike), so one weight serves any marker set."""
    num = den = None
    for (z1, x1), (z2, x2) in (((za, xa), (zp, xp)), ((za, xa), (zn, xn)),
                               ((zp, xp), (zn, xn))):
        dx = distance(x1.float(), x2.float())
        part, norm = ((distance(z1, z2) - dx) ** 2).sum(-1), (dx * dx).sum(-1)
        num, den = (part, norm) if num is None else (num + part, den + norm)
    return num / den.clamp_min(_EPS)


def anchored_stress(z: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """:func:`geometry_stress` of a training batch laid out as the trainer gathers it:
    ``z`` (..., 3b, d) embeddings and ``x`` (..., 3b, n) inputs, anchors then positives
    then negatives along the rows."""
    b = z.shape[-2] // 3
    return geometry_stress(z[..., :b, :], z[..., b:2 * b, :], z[..., 2 * b:, :],
                           x[..., :b, :], x[..., b:2 * b, :], x[..., 2 * b:, :])


class GeometryTerm:
    """``weight`` times :func:`anchored_stress`: the registry's ``geometry`` term."""

    def __init__(self, weight: float = 1.0) -> None:
        self.weight = float(weight)

    def __call__(self, z: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return self.weight * anchored_stress(z, x)


REGISTRY.register(RegisteredLoss("geometry", TERM, GeometryTerm, frozenset({"weight"}),
                                 description="marker-geometry stress (TrainConfig.anchor)",
                                 origin=__name__))
