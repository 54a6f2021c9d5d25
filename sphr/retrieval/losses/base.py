"""What every retrieval loss shares: in-batch geometry, triplet enumeration, selection, reduction.

All losses here work on a batch of embeddings ``(N, D)`` and integer labels
``(N,)`` (subject or class ids), pytorch-metric-learning style: ``loss(embeddings,
labels)``. Triplets and pairs are built inside the batch from the labels, so a
sampler that puts several images of each subject in a batch (m-per-class) is
what makes positives exist.

Geometry. Embeddings are L2-normalized (the papers all do), so the cosine
similarity is a dot product and the Euclidean distance is
``sqrt(2 - 2 cos)``. Each triplet loss reduces a triplet to an *effective
margin* ``delta`` (bigger is better: ``phi_ap - phi_an`` for cosine,
``d_an - d_ap`` for Euclidean) and a hinge ``[margin - delta]_+``; miners and
margin schedulers look at the same ``delta``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import torch
import torch.nn.functional as F

from sphr.errors import ConfigError

if TYPE_CHECKING:
    from sphr.retrieval.losses.schedulers import MarginScheduler

Geometry = Literal["cosine", "euclidean"]
TripletSelection = Literal["all", "semihard", "hard", "violating", "easy"]
Reduction = Literal["mean", "nonzero", "sum"]

GEOMETRIES: tuple[str, ...] = ("cosine", "euclidean")
SELECTIONS: tuple[str, ...] = ("all", "semihard", "hard", "violating", "easy")
REDUCTIONS: tuple[str, ...] = ("mean", "nonzero", "sum")

#: squared distances below this are clamped: sqrt has an infinite slope at 0,
#: and clamp's zero gradient there keeps identical embeddings from giving NaN
_DIST_EPS = 1e-12


def _check(value: str, allowed: tuple[str, ...], what: str) -> str:
    if value not in allowed:
        raise ConfigError(f"unknown {what} {value!r}: use one of {', '.join(allowed)}")
    return value


def pairwise_similarity(embeddings: torch.Tensor) -> torch.Tensor:
    """Dot products ``(N, N)``; the cosine similarity when rows are unit vectors."""
    return embeddings @ embeddings.T


def pairwise_euclidean(embeddings: torch.Tensor) -> torch.Tensor:
    """Euclidean distances ``(N, N)`` through the Gram matrix (one matmul, no (N, N, D) tensor)."""
    sq = (embeddings * embeddings).sum(1)
    d2 = sq[:, None] + sq[None, :] - 2.0 * (embeddings @ embeddings.T)
    return torch.sqrt(torch.clamp(d2, min=_DIST_EPS))


def all_triplet_indices(labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Every in-batch triplet (a, p, n): y_a == y_p, a != p, y_a != y_n.

    Same set and order as pytorch-metric-learning's ``get_all_triplets_indices``.
    """
    labels = labels.reshape(-1)
    same = labels[:, None] == labels[None, :]
    eye = torch.eye(len(labels), dtype=torch.bool, device=labels.device)
    pos = same & ~eye
    mask = pos[:, :, None] & (~same)[:, None, :]
    a, p, n = torch.where(mask)
    return a, p, n


def all_pair_indices(labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Unordered positive pairs (i < j, same label) and negative pairs (i < j, different labels)."""
    labels = labels.reshape(-1)
    same = labels[:, None] == labels[None, :]
    upper = torch.ones_like(same).triu(diagonal=1)
    pi, pj = torch.where(same & upper)
    ni, nj = torch.where(~same & upper)
    return pi, pj, ni, nj


def triplet_negative_pairs(labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The de-duplicated (anchor, negative) pairs of all in-batch triplets, as i < j.

    The AdaTriplet authors collect (a, n) from every triplet and keep each
    unordered pair once; an anchor needs a positive to be in a triplet, so a
    pair appears when either end has a positive in the batch.
    """
    labels = labels.reshape(-1)
    same = labels[:, None] == labels[None, :]
    eye = torch.eye(len(labels), dtype=torch.bool, device=labels.device)
    has_pos = (same & ~eye).any(1)
    m = ~same & has_pos[:, None]
    m = (m | m.T).triu(diagonal=1)
    i, j = torch.where(m)
    return i, j


def select_triplets(delta: torch.Tensor, margin: float | torch.Tensor, kind: str) -> torch.Tensor:
    """Boolean mask of the triplets a miner keeps, from their effective margins.

    ``all``: every triplet. The others follow pytorch-metric-learning's
    ``TripletMarginMiner``: ``violating`` (PML's "all") delta <= margin,
    ``semihard`` 0 < delta <= margin, ``hard`` delta <= 0 (and <= margin),
    ``easy`` delta > margin.
    """
    if kind == "all":
        return torch.ones_like(delta, dtype=torch.bool)
    if kind == "easy":
        return delta > margin
    keep = delta <= margin
    if kind == "semihard":
        keep &= delta > 0
    elif kind == "hard":
        keep &= delta <= 0
    elif kind != "violating":
        _check(kind, SELECTIONS, "triplet selection")
    return keep


def reduce_losses(losses: torch.Tensor, reduction: str, anchor: torch.Tensor) -> torch.Tensor:
    """Reduce per-triplet (or per-pair) losses; an empty set gives a zero that keeps the graph.

    ``nonzero`` averages over the terms > 0 only (pytorch-metric-learning's
    ``AvgNonZeroReducer``, the AdaTriplet authors' ``ThresholdReducer(low=0)``):
    the loss does not shrink as triplets become easy.
    """
    if losses.numel() == 0:
        return anchor.sum() * 0.0
    if reduction == "mean":
        return losses.mean()
    if reduction == "sum":
        return losses.sum()
    if reduction == "nonzero":
        pos = losses > 0
        if not bool(pos.any()):
            return losses.sum() * 0.0
        return losses[pos].sum() / pos.sum()
    raise ConfigError(f"unknown reduction {reduction!r}: use one of {', '.join(REDUCTIONS)}")


@dataclass
class BatchStats:
    """Detached statistics of one batch, handed to a margin scheduler before the loss is computed.

    ``effective_margins``: delta of every in-batch triplet (not only the mined
    ones), in the loss's geometry, swap applied when the loss swaps.
    ``negative_similarities``: cosine similarity of the de-duplicated negative pairs.
    """

    effective_margins: torch.Tensor
    negative_similarities: torch.Tensor


class RetrievalLoss(torch.nn.Module):
    """Base class: ``loss(embeddings, labels, indices_tuple=None) -> scalar``.

    ``scheduler`` (optional) is consulted for the margin(s) of the current
    epoch; the training loop calls :meth:`on_epoch_end` once per epoch.
    ``indices_tuple`` is an (a, p, n) triple from any pytorch-metric-learning
    compatible miner; when given it replaces the loss's own triplet selection.
    """

    #: the geometry that ``delta`` is measured in (used by schedulers' statistics)
    geometry: Geometry = "cosine"

    def __init__(self, *, normalize: bool = True, scheduler: MarginScheduler | None = None) -> None:
        super().__init__()
        self.normalize = normalize
        self.scheduler = scheduler
        #: a few numbers about the last batch (triplets used, ...), for logging
        self.last_batch: dict[str, float] = {}

    def prepare(self, embeddings: torch.Tensor) -> torch.Tensor:
        # The embedding head already normalizes; normalizing again is a no-op on
        # the forward pass and projects the gradient the same way (idempotent).
        return F.normalize(embeddings, dim=1) if self.normalize else embeddings

    def margins(self) -> dict[str, float]:
        """The margin values in force now: the scheduler's, else the loss's own."""
        return dict(self.scheduler.current()) if self.scheduler is not None else {}

    def observe(self, stats: BatchStats) -> None:
        if self.scheduler is not None:
            self.scheduler.observe(stats)

    def set_budget(self, epochs: int, batches_per_epoch: int = 1, *, scale: bool = False) -> None:
        """Tell the scheduler the training budget (see ``MarginScheduler.set_budget``)."""
        if self.scheduler is not None:
            self.scheduler.set_budget(epochs, batches_per_epoch, scale=scale)

    def on_epoch_end(self) -> dict[str, float]:
        """Advance the scheduler; returns the margins that the next epoch will use."""
        if self.scheduler is not None:
            self.scheduler.step_epoch()
        return self.margins()

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor,
                indices_tuple: tuple[torch.Tensor, ...] | None = None) -> torch.Tensor:
        raise NotImplementedError
