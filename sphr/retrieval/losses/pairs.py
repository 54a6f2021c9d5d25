"""OCAM, NPLB and Contrastive: losses that use the positive-negative pair too, or pairs only."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from sphr.errors import ConfigError
from sphr.retrieval.losses.base import (
    REDUCTIONS,
    SELECTIONS,
    RetrievalLoss,
    _check,
    all_pair_indices,
    all_triplet_indices,
    pairwise_euclidean,
    pairwise_similarity,
    reduce_losses,
    select_triplets,
)
from sphr.retrieval.losses.schedulers import MarginScheduler
from sphr.retrieval.losses.triplet import batch_stats


def cosine_distance01(cos: torch.Tensor) -> torch.Tensor:
    """OCAM's f(Ei, Ej) = (1 - cos(Ei, Ej)) / 2, in [0, 1]."""
    return (1.0 - cos) / 2.0


def ocam_violation(cos_ap: torch.Tensor, cos_an: torch.Tensor, cos_pn: torch.Tensor) -> torch.Tensor:
    """The argument of OCAM's hinge: f_ap - (f_an + f_pn)/2 + (1 - f_pn)/2."""
    f_ap, f_an, f_pn = cosine_distance01(cos_ap), cosine_distance01(cos_an), cosine_distance01(cos_pn)
    return f_ap - (f_an + f_pn) / 2.0 + (1.0 - f_pn) / 2.0


def ocam_per_triplet(cos_ap: torch.Tensor, cos_an: torch.Tensor, cos_pn: torch.Tensor) -> torch.Tensor:
    """OCAM Eq. (4): max(0, f_ap - (f_an + f_pn)/2 + (1 - f_pn)/2); values lie in [0, 1.5]."""
    return F.relu(ocam_violation(cos_ap, cos_an, cos_pn))


class OCAMLoss(RetrievalLoss):
    """Opponent Class Adaptive Margin loss (Information Sciences 2023), over in-batch triplets.

    The margin is built in, (1 - f_pn)/2, so there is no scheduler. The paper
    samples random triplets and averages; here every in-batch triplet enters
    and the reduction is the mean (``reduction`` and ``selection`` can change it).
    """

    geometry = "cosine"

    def __init__(self, *, selection: str = "all", reduction: str = "mean", normalize: bool = True) -> None:
        super().__init__(normalize=normalize)
        self.selection = _check(selection, SELECTIONS, "triplet selection")
        self.reduction = _check(reduction, REDUCTIONS, "reduction")

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor,
                indices_tuple: tuple[torch.Tensor, ...] | None = None) -> torch.Tensor:
        x = self.prepare(embeddings)
        s = pairwise_similarity(x)
        a, p, n = indices_tuple[:3] if indices_tuple is not None else all_triplet_indices(labels)
        raw = ocam_violation(s[a, p], s[a, n], s[p, n])
        if indices_tuple is None and self.selection != "all":
            # OCAM's adaptive margin is inside the hinge, so "easy" means raw < 0:
            # select on delta = -raw against a zero margin.
            raw = raw[select_triplets(-raw.detach(), 0.0, self.selection)]
        losses = F.relu(raw)
        self.last_batch = {"triplets": float(len(a)), "active": float((losses > 0).sum())}
        return reduce_losses(losses, self.reduction, x)


class NPLBLoss(RetrievalLoss):
    """No Pairs Left Behind (Eq. 2-3): [d_ap - d_an + m]_+ + (d_pn - d_an)^p, p even.

    Euclidean distance on L2-normalized embeddings (``normalize=False`` for the
    raw form), mean over all in-batch triplets (Eq. 2's 1/N sum). p must be a
    positive even integer: with odd p the regularizer is unbounded below.
    """

    geometry = "euclidean"

    def __init__(self, margin: float = 0.3, p: int = 2, *, selection: str = "all",
                 reduction: str = "mean", scheduler: MarginScheduler | None = None,
                 normalize: bool = True) -> None:
        super().__init__(normalize=normalize, scheduler=scheduler)
        if int(p) != p or p <= 0 or int(p) % 2:
            raise ConfigError(f"NPLB needs an even power p (2, 4, ...), got {p}: odd p is unbounded below")
        self.margin = float(margin)
        self.p = int(p)
        self.selection = _check(selection, SELECTIONS, "triplet selection")
        self.reduction = _check(reduction, REDUCTIONS, "reduction")

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor,
                indices_tuple: tuple[torch.Tensor, ...] | None = None) -> torch.Tensor:
        x = self.prepare(embeddings)
        d = pairwise_euclidean(x)
        a, p, n = all_triplet_indices(labels)
        delta_all = d[a, n] - d[a, p]
        self.observe(batch_stats(x, labels, delta_all))
        margin = float(self.margins().get("margin", self.margin))
        if indices_tuple is not None:
            a, p, n = indices_tuple[:3]
        elif self.selection != "all":
            keep = select_triplets(delta_all.detach(), margin, self.selection)
            a, p, n = a[keep], p[keep], n[keep]
        d_ap, d_an, d_pn = d[a, p], d[a, n], d[p, n]
        losses = F.relu(d_ap - d_an + margin) + (d_pn - d_an) ** self.p
        self.last_batch = {"triplets": float(delta_all.numel()), "used": float(len(a)), "margin": margin}
        return reduce_losses(losses, self.reduction, x)


class ContrastiveLoss(RetrievalLoss):
    """Contrastive loss over all in-batch pairs, pytorch-metric-learning's form and defaults.

    Positive pairs: [d - pos_margin]_+; negative pairs: [neg_margin - d]_+; d the
    Euclidean distance of L2-normalized embeddings; each part averaged over its
    non-zero terms, then summed (pos_margin 0, neg_margin 1).
    """

    geometry = "euclidean"

    def __init__(self, pos_margin: float = 0.0, neg_margin: float = 1.0, *,
                 reduction: str = "nonzero", normalize: bool = True) -> None:
        super().__init__(normalize=normalize)
        self.pos_margin = float(pos_margin)
        self.neg_margin = float(neg_margin)
        self.reduction = _check(reduction, REDUCTIONS, "reduction")

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor,
                indices_tuple: tuple[torch.Tensor, ...] | None = None) -> torch.Tensor:
        x = self.prepare(embeddings)
        d = pairwise_euclidean(x)
        if indices_tuple is not None and len(indices_tuple) == 4:
            pi, pj, ni, nj = indices_tuple
        else:
            pi, pj, ni, nj = all_pair_indices(labels)
        pos = F.relu(d[pi, pj] - self.pos_margin)
        neg = F.relu(self.neg_margin - d[ni, nj])
        self.last_batch = {"pos_pairs": float(len(pi)), "neg_pairs": float(len(ni))}
        return reduce_losses(pos, self.reduction, x) + reduce_losses(neg, self.reduction, x)
