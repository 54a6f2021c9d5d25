"""Triplet loss (cosine and Euclidean forms, optional distance swap) and AdaTriplet.

Cosine form (AdaTriplet paper, Eq. 3): ``[phi_an - phi_ap + eps]_+`` on
L2-normalized embeddings, eps in [0, 2). Euclidean form (FaceNet / NPLB
Eq. 1 / DAMS paper): ``[d_ap - d_an + mu]_+`` with d the (unsquared) Euclidean
distance. In-triplet hard negative mining (Balntas et al. 2016, "distance
swap"): the negative distance is ``min(d_an, d_pn)`` (cosine:
``max(phi_an, phi_pn)``), the harder of the two negative pairs.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from sphr.retrieval.losses.base import (
    GEOMETRIES,
    REDUCTIONS,
    SELECTIONS,
    BatchStats,
    RetrievalLoss,
    _check,
    all_triplet_indices,
    pairwise_euclidean,
    pairwise_similarity,
    reduce_losses,
    select_triplets,
    triplet_negative_pairs,
)
from sphr.retrieval.losses.schedulers import MarginScheduler


def effective_margins(x: torch.Tensor, a: torch.Tensor, p: torch.Tensor, n: torch.Tensor,
                      geometry: str, swap: bool = False) -> torch.Tensor:
    """delta per triplet, larger is easier: phi_ap - phi_an (cosine) or d_an - d_ap (Euclidean)."""
    if geometry == "cosine":
        s = pairwise_similarity(x)
        an = s[a, n]
        if swap:
            an = torch.maximum(an, s[p, n])
        return s[a, p] - an
    d = pairwise_euclidean(x)
    an = d[a, n]
    if swap:
        an = torch.minimum(an, d[p, n])
    return an - d[a, p]


def batch_stats(x: torch.Tensor, labels: torch.Tensor, delta_all: torch.Tensor) -> BatchStats:
    """Statistics for the schedulers: every triplet's delta and the de-duplicated negative pairs."""
    with torch.no_grad():
        i, j = triplet_negative_pairs(labels)
        neg = (x[i] * x[j]).sum(1)
    return BatchStats(effective_margins=delta_all.detach(), negative_similarities=neg)


class TripletLoss(RetrievalLoss):
    """Triplet margin loss over in-batch triplets.

    ``geometry``: ``cosine`` (Triplet*, margin eps) or ``euclidean`` (margin mu).
    ``selection``: which in-batch triplets enter the loss (``all``, ``semihard``,
    ``hard``, ``violating``, ``easy``; the AdaTriplet protocol uses
    ``semihard``). ``reduction``: ``nonzero`` (average over non-zero terms,
    pytorch-metric-learning's default), ``mean`` or ``sum``. ``scheduler``
    overrides ``margin`` each epoch (Linear, DAMS, AutoMargin, constant).
    """

    def __init__(self, margin: float = 0.25, *, geometry: str = "cosine", swap: bool = False,
                 selection: str = "all", reduction: str = "nonzero",
                 scheduler: MarginScheduler | None = None, normalize: bool = True) -> None:
        super().__init__(normalize=normalize, scheduler=scheduler)
        self.margin = float(margin)
        self.geometry = _check(geometry, GEOMETRIES, "geometry")  # type: ignore[assignment]
        self.swap = bool(swap)
        self.selection = _check(selection, SELECTIONS, "triplet selection")
        self.reduction = _check(reduction, REDUCTIONS, "reduction")

    def current_margin(self) -> float:
        return float(self.margins().get("margin", self.margin))

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor,
                indices_tuple: tuple[torch.Tensor, ...] | None = None) -> torch.Tensor:
        x = self.prepare(embeddings)
        a, p, n = all_triplet_indices(labels)
        delta_all = effective_margins(x, a, p, n, self.geometry, self.swap)
        self.observe(batch_stats(x, labels, delta_all))
        margin = self.current_margin()
        if indices_tuple is not None:
            a, p, n = indices_tuple[:3]
            delta = effective_margins(x, a, p, n, self.geometry, self.swap)
        else:
            delta = delta_all[select_triplets(delta_all.detach(), margin, self.selection)]
        losses = F.relu(margin - delta)
        self.last_batch = {"triplets": float(delta_all.numel()), "used": float(delta.numel()),
                           "active": float((losses > 0).sum()), "margin": margin}
        return reduce_losses(losses, self.reduction, x)


def adatriplet_per_triplet(phi_ap: torch.Tensor, phi_an: torch.Tensor, eps: float, beta: float,
                           lam: float = 1.0) -> torch.Tensor:
    """AdaTriplet Eq. (5) per triplet: [phi_an - phi_ap + eps]_+ + lambda [phi_an - beta]_+."""
    return F.relu(phi_an - phi_ap + eps) + lam * F.relu(phi_an - beta)


class AdaTripletLoss(RetrievalLoss):
    """AdaTriplet (Eq. 5) with the batch reduction of the authors' code.

    Triplet term: ``[phi_an - phi_ap + eps]_+`` over the selected triplets
    (semihard by default: 0 < delta <= eps), averaged over its non-zero terms.
    Negative-pair term: ``[phi_an - beta]_+`` over the de-duplicated in-batch
    negative pairs with phi_an >= beta, averaged over those pairs. Loss =
    triplet term + lambda * pair term. With :class:`AutoMargin` as scheduler
    eps and beta follow Eq. 7-8; otherwise they stay at ``eps`` / ``beta``
    (the authors' defaults 0.25 and 0).
    """

    geometry = "cosine"

    def __init__(self, eps: float = 0.25, beta: float = 0.0, lam: float = 1.0, *,
                 selection: str = "semihard", reduction: str = "nonzero",
                 scheduler: MarginScheduler | None = None, normalize: bool = True) -> None:
        super().__init__(normalize=normalize, scheduler=scheduler)
        self.eps = float(eps)
        self.beta = float(beta)
        self.lam = float(lam)
        self.selection = _check(selection, SELECTIONS, "triplet selection")
        self.reduction = _check(reduction, REDUCTIONS, "reduction")

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor,
                indices_tuple: tuple[torch.Tensor, ...] | None = None) -> torch.Tensor:
        x = self.prepare(embeddings)
        s = pairwise_similarity(x)
        a, p, n = all_triplet_indices(labels)
        delta_all = s[a, p] - s[a, n]
        i, j = triplet_negative_pairs(labels)
        phi_neg = s[i, j]
        self.observe(BatchStats(delta_all.detach(), phi_neg.detach()))
        m = self.margins()
        eps = float(m.get("margin", self.eps))
        beta = float(m.get("beta", self.beta))
        if indices_tuple is not None:
            a, p, n = indices_tuple[:3]
            delta = s[a, p] - s[a, n]
        else:
            delta = delta_all[select_triplets(delta_all.detach(), eps, self.selection)]
        triplet_term = reduce_losses(F.relu(eps - delta), self.reduction, x)
        hard_pairs = phi_neg.detach() >= beta
        pair_term = (phi_neg[hard_pairs] - beta).mean() if bool(hard_pairs.any()) else x.sum() * 0.0
        self.last_batch = {"triplets": float(delta_all.numel()), "used": float(delta.numel()),
                           "hard_pairs": float(hard_pairs.sum()), "margin": eps, "beta": beta}
        return triplet_term + self.lam * pair_term
