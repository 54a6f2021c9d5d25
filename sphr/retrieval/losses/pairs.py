"""OCAM, NPLB and Contrastive: losses that use the positive-negative pair too, or pairs only."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from pytorch_metric_learning import losses as pml_losses
from pytorch_metric_learning.distances import BaseDistance
from pytorch_metric_learning.reducers import BaseReducer, MeanReducer
from pytorch_metric_learning.utils import loss_and_miner_utils as lmu

from sphr.losses.triplet import nplb_per_triplet, nplb_power
from sphr.retrieval.losses.base import (
    EuclideanDistance,
    RetrievalLoss,
    all_pair_indices,
    all_triplet_indices,
    batch_stats,
    in_batch,
)
from sphr.retrieval.losses.formulas import (
    cosine_distance01,
    ocam_per_triplet,
    ocam_violation,
    ocam_violations,
)
from sphr.retrieval.losses.miners import OCAMMiner, selection_miner
from sphr.retrieval.losses.schedulers import MarginScheduler

__all__ = ["ContrastiveLoss", "NPLBLoss", "OCAMLoss", "cosine_distance01", "ocam_per_triplet",
           "ocam_violation"]


class OCAMLoss(RetrievalLoss):
    """Opponent Class Adaptive Margin loss (Information Sciences 2023), over in-batch triplets.

    The margin is built in, (1 - f_pn)/2, so there is no scheduler. f = (1 - cos)/2
    with ``CosineSimilarity`` (the default and the paper); a distance enters as
    f = d / 2. The paper samples random triplets and averages; here every
    in-batch triplet enters and the reducer is the mean (``reducer`` /
    ``reduction`` and ``selection``, through an :class:`OCAMMiner`, change it).
    """

    def __init__(self, *, selection: str = "all", miner: Any = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.selection = selection
        self.miner = selection_miner(selection, miner, distance=self.distance, cls=OCAMMiner)

    def get_default_reducer(self) -> BaseReducer:
        return MeanReducer()

    def compute_loss(self, embeddings: torch.Tensor, labels: torch.Tensor, indices_tuple: Any,
                     ref_emb: torch.Tensor, ref_labels: torch.Tensor) -> dict[str, Any]:
        in_batch(embeddings, ref_emb, type(self).__name__)
        mat = self.distance(embeddings)
        if indices_tuple is None:
            a, p, n = all_triplet_indices(labels)
            n_triplets = len(a)
            if self.miner is not None:
                a, p, n = self.run_miner(self.miner, embeddings, labels, 0.0)
        else:
            a, p, n = indices_tuple[:3]
            n_triplets = len(a)
        losses = F.relu(ocam_violations(mat, a, p, n, self.distance))
        self.last_batch = {"triplets": float(n_triplets), "active": float((losses > 0).sum())}
        if losses.numel() == 0:
            return self.zero_losses()
        return {"loss": {"losses": losses, "indices": (a, p, n), "reduction_type": "triplet"}}


class NPLBLoss(RetrievalLoss):
    """No Pairs Left Behind (Eq. 2-3): [d_ap - d_an + m]_+ + (d_pn - d_an)^p, p even.

    The formula is :func:`sphr.losses.nplb_per_triplet`, the one the tabular
    NPLB uses. Default distance: Euclidean on L2-normalized embeddings
    (:class:`~sphr.retrieval.losses.base.EuclideanDistance`;
    ``EuclideanDistance(normalize_embeddings=False)`` for the raw form; a
    similarity flips each difference through ``distance.margin``). Mean over
    all in-batch triplets (Eq. 2's 1/N sum). p must be a positive even integer:
    with odd p the regularizer is unbounded below.
    """

    # margin 0.3 on the unit sphere (distances in [0, 2]), the retrieval papers'
    # constant margin; the tabular NPLB keeps the paper's 1.0 on raw embeddings:
    # the same formula at two scales, on purpose (docs/notes/RETRIEVAL.md, docs/METHODS.md#losses)
    def __init__(self, margin: float = 0.3, p: int = 2, *, selection: str = "all",
                 miner: Any = None, scheduler: MarginScheduler | None = None,
                 **kwargs: Any) -> None:
        p = nplb_power(p)
        super().__init__(scheduler=scheduler, **kwargs)
        self.margin = float(margin)
        self.p = p
        self.selection = selection
        self.miner = selection_miner(selection, miner, margin=self.margin, distance=self.distance)
        self.add_to_recordable_attributes(list_of_names=["margin", "p"], is_stat=False)

    def get_default_distance(self) -> BaseDistance:
        return EuclideanDistance()

    def get_default_reducer(self) -> BaseReducer:
        return MeanReducer()

    def compute_loss(self, embeddings: torch.Tensor, labels: torch.Tensor, indices_tuple: Any,
                     ref_emb: torch.Tensor, ref_labels: torch.Tensor) -> dict[str, Any]:
        d, (a, p, n), delta_all = self.batch_triplets(embeddings, labels, ref_emb)
        self.observe(batch_stats(embeddings, labels, delta_all))
        margin = float(self.margins().get("margin", self.margin))
        if indices_tuple is None and self.miner is not None:
            indices_tuple = self.run_miner(self.miner, embeddings, labels, margin)
        if indices_tuple is not None:
            a, p, n = indices_tuple[:3]
        losses = nplb_per_triplet(d[a, p], d[a, n], d[p, n], margin, self.p, self.distance)
        self.last_batch = {"triplets": float(delta_all.numel()), "used": float(len(a)),
                           "margin": margin}
        if losses.numel() == 0:
            return self.zero_losses()
        return {"loss": {"losses": losses, "indices": (a, p, n), "reduction_type": "triplet"}}


class ContrastiveLoss(RetrievalLoss, pml_losses.ContrastiveLoss):
    """pytorch-metric-learning's ``ContrastiveLoss`` over the unordered in-batch pairs.

    Positive pairs: [d - pos_margin]_+; negative pairs: [neg_margin - d]_+; d the
    Euclidean distance of L2-normalized embeddings (``EuclideanDistance``); each
    part averaged over its non-zero terms (``AvgNonZeroReducer``), then summed
    (pos_margin 0, neg_margin 1). PML counts every pair twice, (i, j) and (j, i);
    here each once (i < j), which gives the same means.
    """

    def __init__(self, pos_margin: float = 0.0, neg_margin: float = 1.0, **kwargs: Any) -> None:
        super().__init__(pos_margin=float(pos_margin), neg_margin=float(neg_margin), **kwargs)

    def get_default_distance(self) -> BaseDistance:
        return EuclideanDistance()

    def compute_loss(self, embeddings: torch.Tensor, labels: torch.Tensor, indices_tuple: Any,
                     ref_emb: torch.Tensor, ref_labels: torch.Tensor) -> dict[str, Any]:
        in_batch(embeddings, ref_emb, type(self).__name__)
        if indices_tuple is None:
            indices_tuple = all_pair_indices(labels)
        else:
            indices_tuple = lmu.convert_to_pairs(indices_tuple, labels)
        self.last_batch = {"pos_pairs": float(len(indices_tuple[0])),
                           "neg_pairs": float(len(indices_tuple[2]))}
        return self.pair_based_loss(self.distance(embeddings), indices_tuple)
