"""Triplet loss (cosine and Euclidean forms, optional distance swap) and AdaTriplet.

Cosine form (AdaTriplet paper, Eq. 3): ``[phi_an - phi_ap + eps]_+`` on
L2-normalized embeddings, eps in [0, 2). Euclidean form (FaceNet / NPLB
Eq. 1 / DAMS paper): ``[d_ap - d_an + mu]_+`` with d the (unsquared) Euclidean
distance. In-triplet hard negative mining (Balntas et al. 2016, "distance
swap"): the negative distance is ``min(d_an, d_pn)`` (cosine:
``max(phi_an, phi_pn)``), the harder of the two negative pairs. Both are
pytorch-metric-learning losses (:mod:`sphr.retrieval.losses.base`).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from pytorch_metric_learning.reducers import AvgNonZeroReducer, BaseReducer

from sphr.retrieval.losses.base import (
    RetrievalLoss,
    batch_stats,
    triplet_margins,
    triplet_negative_pairs,
)
from sphr.retrieval.losses.formulas import adatriplet_per_triplet
from sphr.retrieval.losses.miners import selection_miner
from sphr.retrieval.losses.schedulers import MarginScheduler

__all__ = ["AdaTripletLoss", "TripletLoss", "adatriplet_per_triplet"]


class TripletLoss(RetrievalLoss):
    """Triplet margin loss over in-batch triplets: ``[margin - delta]_+`` per triplet.

    ``distance``: ``CosineSimilarity`` (Triplet*, margin eps; the default) or
    :class:`~sphr.retrieval.losses.base.EuclideanDistance` (margin mu); ``geometry``
    is the shorthand. ``selection``: which in-batch triplets enter (``all``,
    ``semihard``, ``hard``, ``violating``, ``easy``; the AdaTriplet protocol uses
    ``semihard``), through a :class:`TripletMiner`; or pass ``miner=``.
    ``reducer``: ``AvgNonZeroReducer`` by default (pytorch-metric-learning's
    ``TripletMarginLoss`` default), ``reduction`` the shorthand. ``scheduler``
    overrides ``margin`` each epoch (Linear, DAMS, AutoMargin, constant).
    """

    def __init__(self, margin: float = 0.25, *, swap: bool = False, selection: str = "all",
                 miner: Any = None, scheduler: MarginScheduler | None = None,
                 **kwargs: Any) -> None:
        super().__init__(scheduler=scheduler, **kwargs)
        self.margin = float(margin)
        self.swap = bool(swap)
        self.selection = selection
        self.miner = selection_miner(selection, miner, margin=self.margin, distance=self.distance,
                                     swap=self.swap)
        self.add_to_recordable_attributes(list_of_names=["margin"], is_stat=False)

    def get_default_reducer(self) -> BaseReducer:
        return AvgNonZeroReducer()

    def current_margin(self) -> float:
        return float(self.margins().get("margin", self.margin))

    def compute_loss(self, embeddings: torch.Tensor, labels: torch.Tensor, indices_tuple: Any,
                     ref_emb: torch.Tensor, ref_labels: torch.Tensor) -> dict[str, Any]:
        mat, (a, p, n), delta_all = self.batch_triplets(embeddings, labels, ref_emb, swap=self.swap)
        self.observe(batch_stats(embeddings, labels, delta_all))
        margin = self.current_margin()
        if indices_tuple is None and self.miner is not None:
            indices_tuple = self.run_miner(self.miner, embeddings, labels, margin)
        if indices_tuple is not None:
            a, p, n = indices_tuple[:3]
            delta = triplet_margins(mat, a, p, n, self.distance, self.swap)
        else:
            delta = delta_all
        losses = F.relu(margin - delta)
        self.last_batch = {"triplets": float(delta_all.numel()), "used": float(delta.numel()),
                           "active": float((losses > 0).sum()), "margin": margin}
        if delta.numel() == 0:
            return self.zero_losses()
        return {"loss": {"losses": losses, "indices": (a, p, n), "reduction_type": "triplet"}}


class AdaTripletLoss(RetrievalLoss):
    """AdaTriplet (Eq. 5) with the batch reduction of the authors' code.

    Triplet term: ``[phi_an - phi_ap + eps]_+`` over the mined triplets
    (semihard by default: 0 < delta <= eps), reduced by ``reducer`` (the mean
    over its non-zero terms by default). Negative-pair term: ``[phi_an - beta]_+``
    over the de-duplicated in-batch negative pairs with phi_an >= beta,
    averaged over those pairs (the authors' code), weighted by lambda: a
    second, already-reduced sub-loss, so loss = triplet term + lambda * pair
    term. With :class:`AutoMargin` as scheduler eps and beta follow Eq. 7-8;
    otherwise they stay at ``eps`` / ``beta`` (the authors' defaults 0.25 and 0).
    Defined on ``CosineSimilarity``; with a distance, ``beta`` bounds distances
    from below instead (``distance.margin(beta, d)``).
    """

    def __init__(self, eps: float = 0.25, beta: float = 0.0, lam: float = 1.0, *,
                 selection: str = "semihard", miner: Any = None,
                 scheduler: MarginScheduler | None = None, **kwargs: Any) -> None:
        super().__init__(scheduler=scheduler, **kwargs)
        self.eps = float(eps)
        self.beta = float(beta)
        self.lam = float(lam)
        self.selection = selection
        self.miner = selection_miner(selection, miner, margin=self.eps, distance=self.distance)
        self.add_to_recordable_attributes(list_of_names=["eps", "beta", "lam"], is_stat=False)

    def get_default_reducer(self) -> BaseReducer:
        return AvgNonZeroReducer()

    def _sub_loss_names(self) -> list[str]:
        return ["loss", "pair_loss"]

    def compute_loss(self, embeddings: torch.Tensor, labels: torch.Tensor, indices_tuple: Any,
                     ref_emb: torch.Tensor, ref_labels: torch.Tensor) -> dict[str, Any]:
        mat, (a, p, n), delta_all = self.batch_triplets(embeddings, labels, ref_emb)
        i, j = triplet_negative_pairs(labels)
        d_neg = mat[i, j]
        # the statistics read the negative pairs' cosines off the matrix when it holds them
        self.observe(batch_stats(embeddings, labels, delta_all,
                                 d_neg.detach() if self.distance.is_inverted else None))
        m = self.margins()
        eps = float(m.get("margin", self.eps))
        beta = float(m.get("beta", self.beta))
        if indices_tuple is None and self.miner is not None:
            indices_tuple = self.run_miner(self.miner, embeddings, labels, eps)
        if indices_tuple is not None:
            a, p, n = indices_tuple[:3]
            delta = triplet_margins(mat, a, p, n, self.distance)
        else:
            delta = delta_all
        gap = self.distance.margin(beta, d_neg)  # phi_an - beta
        hard_pairs = gap.detach() >= 0
        self.last_batch = {"triplets": float(delta_all.numel()), "used": float(delta.numel()),
                           "hard_pairs": float(hard_pairs.sum()), "margin": eps, "beta": beta}
        out = self.zero_losses()
        if delta.numel():
            out["loss"] = {"losses": F.relu(eps - delta), "indices": (a, p, n),
                           "reduction_type": "triplet"}
        if bool(hard_pairs.any()):
            out["pair_loss"] = {"losses": self.lam * gap[hard_pairs].mean(), "indices": None,
                                "reduction_type": "already_reduced"}
        return out
