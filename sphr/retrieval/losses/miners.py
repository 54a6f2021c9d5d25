"""In-batch triplet mining (all / semihard / hard), pytorch-metric-learning compatible.

:class:`TripletMiner` has PML's call convention, ``miner(embeddings, labels)
-> (anchor_idx, positive_idx, negative_idx)``, so its output can go to a PML
loss as ``indices_tuple`` and a PML miner's output can go to the losses here.
It runs without pytorch-metric-learning installed; :func:`pml_triplet_miner`
builds the equivalent PML ``TripletMarginMiner`` where PML is available.

Names: ``all`` here is every valid triplet (no margin test); PML's ``"all"``
(triplets that violate the margin) is called ``violating`` here.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from sphr.errors import ConfigError
from sphr.retrieval.losses.base import (
    GEOMETRIES,
    SELECTIONS,
    _check,
    all_triplet_indices,
    select_triplets,
)
from sphr.retrieval.losses.triplet import effective_margins

#: our selection name -> PML's ``type_of_triplets``
_PML_TYPE = {"violating": "all", "semihard": "semihard", "hard": "hard", "easy": "easy"}


class TripletMiner:
    """Select in-batch triplets by their effective margin delta against ``margin``.

    ``semihard``: 0 < delta <= margin; ``hard``: delta <= 0; ``violating``:
    delta <= margin; ``easy``: delta > margin; ``all``: every triplet.
    delta is phi_ap - phi_an (cosine) or d_an - d_ap (Euclidean), swap applied
    when ``swap``. Set ``miner.margin`` between calls to follow a scheduler.
    """

    def __init__(self, type_of_triplets: str = "semihard", margin: float = 0.25, *,
                 geometry: str = "cosine", swap: bool = False, normalize: bool = True) -> None:
        self.type_of_triplets = _check(type_of_triplets, SELECTIONS, "triplet selection")
        self.geometry = _check(geometry, GEOMETRIES, "geometry")
        self.margin = float(margin)
        self.swap = swap
        self.normalize = normalize
        self.num_triplets = 0

    def __call__(self, embeddings: torch.Tensor, labels: torch.Tensor,
                 ref_emb: torch.Tensor | None = None,
                 ref_labels: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if ref_emb is not None or ref_labels is not None:
            raise ConfigError("TripletMiner mines within one batch; ref_emb / ref_labels are not supported")
        with torch.no_grad():
            x = F.normalize(embeddings, dim=1) if self.normalize else embeddings
            labels = labels.to(x.device)
            a, p, n = all_triplet_indices(labels)
            delta = effective_margins(x, a, p, n, self.geometry, self.swap)
            keep = select_triplets(delta, self.margin, self.type_of_triplets)
        self.num_triplets = int(keep.sum())
        return a[keep], p[keep], n[keep]


def pml_triplet_miner(type_of_triplets: str = "semihard", margin: float = 0.25, *,
                      geometry: str = "cosine") -> Any:
    """The pytorch-metric-learning ``TripletMarginMiner`` that selects what :class:`TripletMiner` does.

    Needs pytorch-metric-learning (optional; not installed on every box).
    ``all`` has no PML miner (PML mines every triplet when no miner is given).
    """
    if type_of_triplets not in _PML_TYPE:
        raise ConfigError(f"no pytorch-metric-learning miner for {type_of_triplets!r}; "
                          f"use one of {', '.join(_PML_TYPE)}")
    from pytorch_metric_learning import distances, miners

    distance = (distances.CosineSimilarity() if geometry == "cosine"
                else distances.LpDistance(normalize_embeddings=True))
    return miners.TripletMarginMiner(margin=margin, type_of_triplets=_PML_TYPE[type_of_triplets],
                                     distance=distance)
