"""What every retrieval loss shares: distances, reducers, in-batch triplets, the scheduler hooks.

The losses are pytorch-metric-learning losses (``BaseMetricLossFunction``
subclasses): ``loss(embeddings, labels, indices_tuple=None)`` on a batch of
embeddings ``(N, D)`` and integer labels ``(N,)`` (subject or class ids), with
a ``distance=`` (a PML distance object: it normalizes the embeddings and makes
the ``(N, N)`` matrix) and a ``reducer=`` (a PML reducer: how per-triplet or
per-pair losses become one number). Triplets and pairs are built inside the
batch from the labels, so a sampler that puts several images of each subject
in a batch (m-per-class) is what makes positives exist. Which triplets enter
is a miner's job (:mod:`sphr.retrieval.losses.miners`, or any PML miner's
output passed as ``indices_tuple``).

Geometry. Embeddings are L2-normalized (the papers all do, and both default
distances do), so the cosine similarity is a dot product and the Euclidean
distance is ``sqrt(2 - 2 cos)``. Each triplet loss reduces a triplet to an
*effective margin* ``delta`` (bigger is easier: ``phi_ap - phi_an`` for a
similarity, ``d_an - d_ap`` for a distance: ``distance.margin(an, ap)``) and a
hinge ``[margin - delta]_+``; miners and margin schedulers look at the same
``delta``. ``geometry="cosine"`` / ``"euclidean"`` and ``reduction="mean"`` /
``"nonzero"`` / ``"sum"`` are shorthands for the distance and reducer objects
(the command line's loss options).
"""

from __future__ import annotations

from typing import Any, Literal

import torch
import torch.nn.functional as F
from pytorch_metric_learning.distances import BaseDistance, CosineSimilarity, LpDistance
from pytorch_metric_learning.losses import BaseMetricLossFunction
from pytorch_metric_learning.reducers import AvgNonZeroReducer, BaseReducer, MeanReducer, SumReducer

from sphr.errors import ConfigError
from sphr.losses.distances import gram_distances
from sphr.retrieval.losses.schedulers import MarginScheduler
from sphr.retrieval.losses.stats import BatchStats

Geometry = Literal["cosine", "euclidean"]
TripletSelection = Literal["all", "semihard", "hard", "violating", "easy"]
Reduction = Literal["mean", "nonzero", "sum"]

GEOMETRIES: tuple[str, ...] = ("cosine", "euclidean")
SELECTIONS: tuple[str, ...] = ("all", "semihard", "hard", "violating", "easy")
REDUCTIONS: tuple[str, ...] = ("mean", "nonzero", "sum")

Triplets = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


def _check(value: str, allowed: tuple[str, ...], what: str) -> str:
    if value not in allowed:
        raise ConfigError(f"unknown {what} {value!r}: use one of {', '.join(allowed)}")
    return value


def pairwise_similarity(embeddings: torch.Tensor) -> torch.Tensor:
    """Dot products ``(N, N)``; the cosine similarity when rows are unit vectors."""
    return embeddings @ embeddings.T


def pairwise_euclidean(embeddings: torch.Tensor) -> torch.Tensor:
    """Euclidean distances ``(N, N)`` through the Gram matrix (one matmul, no (N, N, D) tensor),
    squared distances clamped at 1e-12: the tabular losses' :func:`sphr.losses.gram_distances`."""
    return gram_distances(embeddings)


class EuclideanDistance(LpDistance):
    """PML's ``LpDistance`` (p 2, L2-normalized by default) through the Gram matrix.

    ``torch.cdist`` (what ``LpDistance`` uses) has no clamp: identical
    embeddings (a collapsed batch) give a NaN gradient through the square
    root. Here squared distances are clamped at 1e-12 first, as the retrieval
    losses always did (:func:`sphr.losses.gram_distances`, the tabular losses' matrix).
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(p=2, **kwargs)

    def compute_mat(self, query_emb: torch.Tensor, ref_emb: torch.Tensor | None) -> torch.Tensor:
        return gram_distances(query_emb, ref_emb)


def distance_for(geometry: str) -> BaseDistance:
    """``cosine`` -> PML's ``CosineSimilarity``; ``euclidean`` -> :class:`EuclideanDistance`."""
    _check(geometry, GEOMETRIES, "geometry")
    return CosineSimilarity() if geometry == "cosine" else EuclideanDistance()


def reducer_for(reduction: str) -> BaseReducer:
    """``mean`` -> ``MeanReducer``; ``nonzero`` -> ``AvgNonZeroReducer`` (the mean over terms > 0:
    the AdaTriplet authors' ``ThresholdReducer(low=0)``); ``sum`` -> ``SumReducer``."""
    _check(reduction, REDUCTIONS, "reduction")
    return {"mean": MeanReducer, "nonzero": AvgNonZeroReducer, "sum": SumReducer}[reduction]()


def all_triplet_indices(labels: torch.Tensor) -> Triplets:
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


def all_pair_indices(
        labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
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


def triplet_margins(mat: torch.Tensor, a: torch.Tensor, p: torch.Tensor, n: torch.Tensor,
                    distance: BaseDistance, swap: bool = False) -> torch.Tensor:
    """delta per triplet from a distance matrix, larger is easier: ``distance.margin(an, ap)``
    (phi_ap - phi_an for a similarity, d_an - d_ap for a distance).

    ``swap`` (Balntas et al. 2016): the negative side is the harder of (a, n)
    and (p, n), ``distance.smallest_dist`` (min distance, max similarity).
    """
    an = mat[a, n]
    if swap:
        an = distance.smallest_dist(an, mat[p, n])
    return distance.margin(an, mat[a, p])


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


def in_batch(embeddings: torch.Tensor, ref_emb: torch.Tensor | None, who: str) -> None:
    """The retrieval losses and miners work inside one batch: no separate reference set."""
    if ref_emb is not None and ref_emb is not embeddings:
        raise ConfigError(f"{who} works within one batch; ref_emb / ref_labels are not supported")


def batch_stats(embeddings: torch.Tensor, labels: torch.Tensor, delta_all: torch.Tensor,
                negative_similarities: torch.Tensor | None = None) -> BatchStats:
    """Statistics for the schedulers: every triplet's delta and the cosine similarities of the
    de-duplicated negative pairs (computed from the L2-normalized embeddings unless given)."""
    with torch.no_grad():
        if negative_similarities is None:
            x = F.normalize(embeddings.detach(), dim=1)
            i, j = triplet_negative_pairs(labels)
            negative_similarities = (x[i] * x[j]).sum(1)
    return BatchStats(effective_margins=delta_all.detach(),
                      negative_similarities=negative_similarities.detach())


class RetrievalLoss(BaseMetricLossFunction):
    """Base class: a PML loss, ``loss(embeddings, labels, indices_tuple=None) -> scalar``.

    ``distance`` / ``reducer``: PML objects (``geometry`` / ``reduction``: their
    string shorthands, :func:`distance_for` / :func:`reducer_for`).
    ``scheduler`` (optional) is consulted for the margin(s) of the current
    epoch; it observes every in-batch triplet before the loss is computed, and
    the training loop calls :meth:`on_epoch_end` once per epoch. ``miner``
    (optional) picks the triplets when no ``indices_tuple`` is given; a miner
    with a ``margin`` gets the margin in force before each batch, so the
    schedule reaches the mining. ``indices_tuple`` (from any PML-compatible
    miner) replaces both.
    """

    def __init__(self, *, distance: BaseDistance | None = None, reducer: BaseReducer | None = None,
                 geometry: str | None = None, reduction: str | None = None,
                 scheduler: MarginScheduler | None = None, **kwargs: Any) -> None:
        if geometry is not None:
            if distance is not None:
                raise ConfigError("give a loss a distance or a geometry, not both")
            distance = distance_for(geometry)
        if reduction is not None:
            if reducer is not None:
                raise ConfigError("give a loss a reducer or a reduction, not both")
            reducer = reducer_for(reduction)
        super().__init__(distance=distance, reducer=reducer, **kwargs)
        self.scheduler = scheduler
        #: a few numbers about the last batch (triplets used, ...), for logging
        self.last_batch: dict[str, float] = {}

    def get_default_distance(self) -> BaseDistance:
        return CosineSimilarity()

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

    def batch_triplets(self, embeddings: torch.Tensor, labels: torch.Tensor,
                       ref_emb: torch.Tensor | None, *, swap: bool = False,
                       ) -> tuple[torch.Tensor, Triplets, torch.Tensor]:
        """(distance matrix, every in-batch triplet, their deltas): the deltas of all triplets,
        not only the mined ones, are what a margin scheduler observes."""
        in_batch(embeddings, ref_emb, type(self).__name__)
        mat = self.distance(embeddings)
        a, p, n = all_triplet_indices(labels)
        return mat, (a, p, n), triplet_margins(mat, a, p, n, self.distance, swap)

    def run_miner(self, miner: Any, embeddings: torch.Tensor, labels: torch.Tensor,
                  margin: float) -> Triplets:
        """Run ``miner`` at the margin in force (when it has one)."""
        if hasattr(miner, "margin"):
            miner.margin = margin
        return miner(embeddings, labels)[:3]
