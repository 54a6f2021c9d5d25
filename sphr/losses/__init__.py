"""SPHR's losses behind one call: ``loss(anchor, positive, negative, labels=None) -> scalar``.

``LOSSES`` names them as the evaluation tables do (``sphr.evaluate.paper.LOSSES``); each is
registered in the project's one loss registry (:data:`sphr.losses.registry.REGISTRY`) under
the ``tabular`` domain, beside the image-retrieval losses. :func:`build_loss` (the registry's
one, re-exported) makes one from its name and parameters. Each takes ``distance=`` and
``reducer=`` (a pytorch-metric-learning distance and reducer, or :class:`Euclidean` /
:class:`Mean`, the paper's and the defaults): a loss is a distance, a reducer and a per-triplet
formula, composed (:mod:`sphr.losses.base`, docs/METHODS.md#losses).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from functools import partial
from typing import Any

from sphr.errors import ConfigError
from sphr.losses.anchor import GeometryTerm
from sphr.losses.base import TripletObjective
from sphr.losses.distances import Euclidean, distance, gram_distances, pairwise_distances
from sphr.losses.mdr import MDR
from sphr.losses.objective import BatchObjective
from sphr.losses.pml import InfoNCE, LiftedStruct, NPair
from sphr.losses.reducers import Mean, TensorReducer
from sphr.losses.registry import (
    REGISTRY,
    TABULAR,
    RegisteredLoss,
    build_loss,
    loss_parameters,
)
from sphr.losses.triplet import (
    NPLB,
    DistanceSwap,
    Triplet,
    nplb_per_triplet,
    nplb_power,
    triplet_hinge,
)

#: the classes of the tabular losses, in the paper's column order (Table 3 / A2)
_CLASSES: dict[str, type[TripletObjective]] = {
    "triplet": Triplet,
    "npair": NPair,
    "lifted_struct": LiftedStruct,
    "mdr": MDR,
    "infonce": InfoNCE,
    "distance_swap": DistanceSwap,
    "nplb": NPLB,
}


def _checked(name: str, cls: type[TripletObjective], accepted: frozenset[str],
             **params: Any) -> TripletObjective:
    bad = sorted(set(params) - accepted)
    if bad:
        raise ConfigError(f"loss {name!r} takes no parameter(s) {bad}; it takes "
                          f"{sorted(accepted)}")
    return cls(**params)


def _register(name: str, cls: type[TripletObjective]) -> None:
    accepted = frozenset(inspect.signature(cls.__init__).parameters) - {"self"}
    doc = (cls.__doc__ or "").strip().split("\n", 1)[0]
    REGISTRY.register(RegisteredLoss(name, TABULAR, partial(_checked, name, cls, accepted),
                                     accepted, description=doc, origin=__name__))


for _name, _cls in _CLASSES.items():
    _register(_name, _cls)


#: the tabular losses of the registry, by name, in the paper's column order
LOSSES: Mapping[str, RegisteredLoss] = REGISTRY.entries(TABULAR)

__all__ = ["LOSSES", "MDR", "NPLB", "REGISTRY", "BatchObjective", "DistanceSwap", "Euclidean",
           "GeometryTerm", "InfoNCE",
           "LiftedStruct", "Mean", "NPair", "TensorReducer", "Triplet", "TripletObjective",
           "build_loss", "distance", "gram_distances", "loss_parameters", "nplb_per_triplet",
           "nplb_power", "pairwise_distances", "triplet_hinge"]
