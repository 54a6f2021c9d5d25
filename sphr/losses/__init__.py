"""SPHR's losses behind one call: ``loss(anchor, positive, negative, labels=None) -> scalar``.

``LOSSES`` names them as the evaluation tables do (``sphr.evaluate.paper.LOSSES``);
:func:`build_loss` makes one from its name and parameters. Each takes ``distance=`` and
``reducer=`` (a pytorch-metric-learning distance and reducer, or :class:`Euclidean` /
:class:`Mean`, the paper's and the defaults): a loss is a distance, a reducer and a
per-triplet formula, composed (:mod:`sphr.losses.base`, docs/METHODS.md#losses).
"""

from __future__ import annotations

import inspect
from typing import Any

from sphr.errors import ConfigError
from sphr.losses.base import TripletObjective
from sphr.losses.distances import Euclidean, distance, gram_distances, pairwise_distances
from sphr.losses.mdr import MDR
from sphr.losses.pml import InfoNCE, LiftedStruct, NPair
from sphr.losses.reducers import Mean, TensorReducer
from sphr.losses.triplet import (
    NPLB,
    DistanceSwap,
    Triplet,
    nplb_per_triplet,
    nplb_power,
    triplet_hinge,
)

#: in the paper's column order (Table 3 / A2)
LOSSES: dict[str, type[TripletObjective]] = {
    "triplet": Triplet,
    "npair": NPair,
    "lifted_struct": LiftedStruct,
    "mdr": MDR,
    "infonce": InfoNCE,
    "distance_swap": DistanceSwap,
    "nplb": NPLB,
}


def loss_parameters(name: str) -> set[str]:
    """The keyword arguments loss ``name`` accepts."""
    return set(inspect.signature(_class(name).__init__).parameters) - {"self"}


def _class(name: str) -> type[TripletObjective]:
    try:
        return LOSSES[name]
    except KeyError:
        raise ConfigError(f"unknown loss {name!r}: choose from {', '.join(LOSSES)}") from None


def build_loss(name: str, **params: Any) -> TripletObjective:
    """A fresh loss module; unknown names or parameters raise :class:`ConfigError`."""
    cls = _class(name)
    bad = sorted(set(params) - loss_parameters(name))
    if bad:
        raise ConfigError(f"loss {name!r} takes no parameter(s) {bad}; it takes "
                          f"{sorted(loss_parameters(name))}")
    return cls(**params)


__all__ = ["LOSSES", "MDR", "NPLB", "DistanceSwap", "Euclidean", "InfoNCE", "LiftedStruct", "Mean",
           "NPair", "TensorReducer", "Triplet", "TripletObjective", "build_loss", "distance",
           "gram_distances", "loss_parameters", "nplb_per_triplet", "nplb_power", "pairwise_distances",
           "triplet_hinge"]
