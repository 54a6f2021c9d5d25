"""In-batch triplet miners: pytorch-metric-learning ``BaseMiner`` subclasses.

``miner(embeddings, labels) -> (anchor_idx, positive_idx, negative_idx)``, so
their output goes to any PML loss as ``indices_tuple``, and a PML miner's
output goes to the losses here. The losses build one from their
``selection=`` option (and set its ``margin`` to the scheduled margin before
each batch).

:class:`TripletMiner` is PML's ``TripletMarginMiner`` with two differences
the papers need: ``all`` keeps every valid triplet (PML's ``"all"``, the
triplets that violate the margin, is called ``violating`` here), and the
distance swap (``swap=True``) enters the effective margin as it does in the
DAMS protocol's loss. :class:`OCAMMiner` selects on OCAM's own hinge, whose
margin is built in.
"""

from __future__ import annotations

from typing import Any

import torch
from pytorch_metric_learning.distances import BaseDistance, CosineSimilarity
from pytorch_metric_learning.miners import BaseMiner

from sphr.errors import ConfigError
from sphr.retrieval.losses.base import (
    SELECTIONS,
    Triplets,
    _check,
    all_triplet_indices,
    distance_for,
    in_batch,
    select_triplets,
    triplet_margins,
)
from sphr.retrieval.losses.formulas import ocam_violations


class TripletMiner(BaseMiner):
    """Select in-batch triplets by their effective margin delta against ``margin``.

    ``semihard``: 0 < delta <= margin; ``hard``: delta <= 0; ``violating``:
    delta <= margin; ``easy``: delta > margin; ``all``: every triplet.
    delta = ``distance.margin(an, ap)`` (phi_ap - phi_an for ``CosineSimilarity``,
    the default; d_an - d_ap for a distance), swap applied when ``swap``.
    ``geometry`` is the string shorthand for ``distance``. Set ``miner.margin``
    between calls to follow a scheduler.
    """

    def __init__(self, type_of_triplets: str = "semihard", margin: float = 0.25, *,
                 swap: bool = False, geometry: str | None = None,
                 distance: BaseDistance | None = None, **kwargs: Any) -> None:
        if geometry is not None:
            if distance is not None:
                raise ConfigError("give a miner a distance or a geometry, not both")
            distance = distance_for(geometry)
        super().__init__(distance=distance, **kwargs)
        self.type_of_triplets = _check(type_of_triplets, SELECTIONS, "triplet selection")
        self.margin = float(margin)
        self.swap = bool(swap)
        self.add_to_recordable_attributes(list_of_names=["margin"], is_stat=False)

    def get_default_distance(self) -> BaseDistance:
        return CosineSimilarity()

    def triplet_deltas(self, embeddings: torch.Tensor, a: torch.Tensor, p: torch.Tensor,
                       n: torch.Tensor) -> torch.Tensor:
        """Effective margin per triplet (larger is easier)."""
        return triplet_margins(self.distance(embeddings), a, p, n, self.distance, self.swap)

    def mine(self, embeddings: torch.Tensor, labels: torch.Tensor, ref_emb: torch.Tensor,
             ref_labels: torch.Tensor) -> Triplets:
        in_batch(embeddings, ref_emb, type(self).__name__)
        a, p, n = all_triplet_indices(labels)
        keep = select_triplets(self.triplet_deltas(embeddings, a, p, n), self.margin,
                               self.type_of_triplets)
        return a[keep], p[keep], n[keep]


class OCAMMiner(TripletMiner):
    """Select triplets on OCAM's hinge: its adaptive margin (1 - f_pn)/2 is inside the hinge, so
    delta = -(OCAM's hinge argument) against a zero margin (``easy``: the triplet has zero loss)."""

    def __init__(self, type_of_triplets: str = "violating", **kwargs: Any) -> None:
        super().__init__(type_of_triplets, 0.0, **kwargs)

    def triplet_deltas(self, embeddings: torch.Tensor, a: torch.Tensor, p: torch.Tensor,
                       n: torch.Tensor) -> torch.Tensor:
        return -ocam_violations(self.distance(embeddings), a, p, n, self.distance)


def selection_miner(selection: str, miner: Any = None, *, margin: float = 0.0,
                    distance: BaseDistance | None = None, swap: bool = False,
                    cls: type[TripletMiner] = TripletMiner) -> Any:
    """A loss's miner: ``miner`` as given, else a ``cls`` for ``selection`` on the loss's
    ``distance`` (none for ``all``: every in-batch triplet enters)."""
    _check(selection, SELECTIONS, "triplet selection")
    if miner is not None:
        if selection != "all":
            raise ConfigError("give a loss a miner or a selection, not both")
        return miner
    if selection == "all":
        return None
    if cls is TripletMiner:
        return TripletMiner(selection, margin, swap=swap, distance=distance)
    return cls(selection, distance=distance)
