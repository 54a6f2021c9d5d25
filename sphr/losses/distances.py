"""The tabular losses' default distance, with pytorch-metric-learning's distance interface.

A loss is a distance, a reducer and a per-triplet formula (docs/METHODS.md#losses), as in
pytorch-metric-learning (PML) and the retrieval losses (``sphr.retrieval.losses``). A
distance object answers what the formulas ask of it: the ``(N, M)`` matrix
(``distance(query, ref)``), row-wise distances (``pairwise_distance``), which of two values
is the harder negative (``smallest_dist``) and which way a difference points (``margin``:
``x - y`` for a distance, ``y - x`` for a similarity). Any PML distance answers them too
(``LpDistance``, ``CosineSimilarity``, ...), and goes where :class:`Euclidean` goes.

:class:`Euclidean` is the paper's: unnormalized embeddings, row-wise through
``F.pairwise_distance`` (its 1e-6, as ``nn.TripletMarginLoss``), the matrix through the Gram
matrix with squared distances clamped at ``_D2_EPS``. It imports no PML (``sphr.losses``
imports without it) and is a plain tensor function, so the compiled training step traces
it (``sphr.train.fused``). ``sphr.retrieval.losses.EuclideanDistance`` makes its matrix
with :func:`gram_distances` too.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

#: squared distances are clamped here before the square root: its slope is
#: infinite at 0, and clamp's zero gradient keeps coinciding points from giving NaN
_D2_EPS = 1e-12


def gram_distances(x: torch.Tensor, y: torch.Tensor | None = None) -> torch.Tensor:
    """Euclidean distances ``(..., N, M)`` via the Gram matrix (one matmul, no (N, M, D)
    tensor); ``y`` None or ``x`` itself: the ``(N, N)`` distances within ``x``."""
    sq_x = (x * x).sum(-1)
    if y is None or y is x:
        y, sq_y = x, sq_x
    else:
        sq_y = (y * y).sum(-1)
    d2 = sq_x[..., :, None] + sq_y[..., None, :] - 2.0 * (x @ y.transpose(-1, -2))
    return torch.sqrt(torch.clamp(d2, min=_D2_EPS))


def distance(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Row-wise Euclidean distance, as the paper's listing computes it.

    ``F.pairwise_distance`` (what ``nn.TripletMarginLoss`` uses) adds 1e-6 to
    the difference, which keeps the gradient finite when two rows coincide.
    """
    return F.pairwise_distance(x, y)


def pairwise_distances(e: torch.Tensor) -> torch.Tensor:
    """All ``(N, N)`` Euclidean distances via the Gram matrix (one matmul)."""
    return gram_distances(e)


class Euclidean(nn.Module):
    """Euclidean distance on raw embeddings: PML's ``LpDistance(normalize_embeddings=False)``
    interface (p 2, power 1, not inverted), computed as the paper's listing does.

    ``distance(query, ref=None)``: the matrix, :func:`gram_distances` (``torch.cdist``, what
    ``LpDistance`` uses, has no clamp: coinciding rows give a NaN gradient).
    ``pairwise_distance(x, y)``: row i of x to row i of y, :func:`distance`.
    ``condensed(e)``: the i < j distances within ``e``, ``torch.pdist`` (MDR's pairs).
    """

    #: a plain tensor function (no parameters, statistics or host reads): the fused step traces it
    pure = True
    normalize_embeddings = False
    p = 2
    power = 1
    is_inverted = False

    def forward(self, query_emb: torch.Tensor, ref_emb: torch.Tensor | None = None) -> torch.Tensor:
        return gram_distances(query_emb, ref_emb)

    def pairwise_distance(self, query_emb: torch.Tensor, ref_emb: torch.Tensor) -> torch.Tensor:
        return distance(query_emb, ref_emb)

    def condensed(self, embeddings: torch.Tensor) -> torch.Tensor:
        # the condensed i < j distances directly: ~30% faster forward + backward than the
        # (N, N) matrix and a triu gather, whose backward is a scatter
        return torch.pdist(embeddings)

    def maybe_normalize(self, embeddings: torch.Tensor, dim: int = 1,
                        **kwargs: Any) -> torch.Tensor:
        return embeddings

    def smallest_dist(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        return torch.min(*args, **kwargs)

    def largest_dist(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        return torch.max(*args, **kwargs)

    def margin(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x - y


def rowwise(distance: Any, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """d(x_i, y_i) per row, as ``distance``'s matrix would hold it: rows normalized when it
    normalizes (PML's ``pairwise_distance`` takes them as they come), raised to its power."""
    d = distance.pairwise_distance(distance.maybe_normalize(x), distance.maybe_normalize(y))
    return d if distance.power == 1 else d**distance.power


def condensed(distance: Any, embeddings: torch.Tensor) -> torch.Tensor:
    """The distances of every pair i < j of ``embeddings``' rows, in ``torch.pdist``'s order;
    from the distance's own ``condensed`` where it has one, else from its matrix."""
    own = getattr(distance, "condensed", None)
    if own is not None:
        return own(embeddings)
    n = embeddings.shape[0]
    i, j = torch.triu_indices(n, n, 1, device=embeddings.device)
    return distance(embeddings)[i, j]
