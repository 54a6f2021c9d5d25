"""How each loss named in :mod:`sphr.retrieval.catalog` (``--losses``, ``run_comparison``) is
built, registered in the project's one loss registry (:mod:`sphr.losses.registry`, domain
``retrieval``); the registry's one ``build_loss(spec, RETRIEVAL)`` makes them.

A spec is a name, optionally with overrides: ``triplet_dams:threshold=0.9,swap=false``.
Every default is an option; unknown options are an error.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from pytorch_metric_learning.distances import CosineSimilarity

from sphr.errors import ConfigError
from sphr.losses.registry import REGISTRY, RETRIEVAL, RegisteredLoss
from sphr.retrieval.catalog import DEFAULT_LOSSES, LOSS_CATALOG, loss_help
from sphr.retrieval.losses.base import EuclideanDistance, RetrievalLoss, distance_for, reducer_for
from sphr.retrieval.losses.pairs import ContrastiveLoss, NPLBLoss, OCAMLoss
from sphr.retrieval.losses.schedulers import AutoMargin, ConstantMargin, DAMSMargin, LinearMargin
from sphr.retrieval.losses.triplet import AdaTripletLoss, TripletLoss

__all__ = ["DEFAULT_LOSSES", "LOSSES", "loss_help"]


def _triplet_const(o: dict[str, Any], geometry: str) -> RetrievalLoss:
    return TripletLoss(o["margin"], distance=distance_for(geometry), swap=o["swap"],
                       selection=o["selection"], reducer=reducer_for(o["reduction"]),
                       scheduler=ConstantMargin(o["margin"]))


def _dams_family(o: dict[str, Any], scheduler: Any) -> RetrievalLoss:
    return TripletLoss(scheduler.margin, distance=EuclideanDistance(), swap=o["swap"],
                       selection=o["selection"], reducer=reducer_for(o["reduction"]),
                       scheduler=scheduler)


def _automargin(o: dict[str, Any], k_an: float, beta0: float) -> AutoMargin:
    return AutoMargin(o["k_delta"], k_an, o["eps0"], beta0, o["per_batch"],
                      warmup_epochs=o["warmup_epochs"],
                      warmup_until_delta=o["warmup_until_delta"])


_BUILDERS: dict[str, Callable[[dict[str, Any]], RetrievalLoss]] = {
    "triplet": lambda o: _triplet_const(o, "cosine"),
    "triplet_euclidean": lambda o: _triplet_const(o, "euclidean"),
    "triplet_automargin": lambda o: TripletLoss(
        o["eps0"], distance=CosineSimilarity(), selection=o["selection"],
        reducer=reducer_for(o["reduction"]), scheduler=_automargin(o, 2.0, 0.0)),
    "adatriplet": lambda o: AdaTripletLoss(
        o["eps"], o["beta"], o["lam"], distance=CosineSimilarity(), selection=o["selection"],
        reducer=reducer_for(o["reduction"]), scheduler=ConstantMargin(o["eps"])),
    "adatriplet_automargin": lambda o: AdaTripletLoss(
        o["eps0"], o["beta0"], o["lam"], distance=CosineSimilarity(), selection=o["selection"],
        reducer=reducer_for(o["reduction"]), scheduler=_automargin(o, o["k_an"], o["beta0"])),
    "triplet_constant": lambda o: _triplet_const(o, "euclidean"),
    "triplet_linear": lambda o: _dams_family(
        o, LinearMargin(o["mu0"], o["step"], paper_epochs=o["paper_epochs"])),
    "triplet_dams": lambda o: _dams_family(
        o, DAMSMargin(o["mu0"], o["step"], o["threshold"], paper_epochs=o["paper_epochs"])),
    "ocam": lambda o: OCAMLoss(distance=CosineSimilarity(), selection=o["selection"],
                               reducer=reducer_for(o["reduction"])),
    "nplb": lambda o: NPLBLoss(o["margin"], o["p"], distance=EuclideanDistance(),
                               selection=o["selection"], reducer=reducer_for(o["reduction"]),
                               scheduler=ConstantMargin(o["margin"])),
    "contrastive": lambda o: ContrastiveLoss(o["pos_margin"], o["neg_margin"],
                                             distance=EuclideanDistance(),
                                             reducer=reducer_for(o["reduction"])),
}


def _checked(name: str, **opts: Any) -> RetrievalLoss:
    """Loss ``name`` from its catalog defaults overridden by ``opts``: unknown options, a
    non-boolean for a boolean and a non-number for a number are errors."""
    defaults = LOSS_CATALOG[name].defaults
    unknown = set(opts) - set(defaults)
    if unknown:
        raise ConfigError(f"loss {name!r} has no option(s) {', '.join(sorted(unknown))}; "
                          f"options: {', '.join(defaults)}")
    merged = {**defaults, **opts}
    for key, default in defaults.items():
        value = merged[key]
        if isinstance(default, bool) and not isinstance(value, bool):
            raise ConfigError(f"loss {name!r} option {key} must be true or false, got {value!r}")
        if isinstance(default, float) and isinstance(value, int) and not isinstance(value, bool):
            merged[key] = float(value)
        elif isinstance(default, (int, float)) and not isinstance(merged[key], (int, float)):
            raise ConfigError(f"loss {name!r} option {key} must be a number, got {value!r}")
    return _BUILDERS[name](merged)


for _name, _e in LOSS_CATALOG.items():
    REGISTRY.register(RegisteredLoss(_name, RETRIEVAL, partial(_checked, _name),
                                     frozenset(_e.defaults), _e.description, _e.defaults,
                                     _e.scheduler, origin=__name__))

#: the retrieval losses of :data:`sphr.losses.registry.REGISTRY`, by ``--losses`` name
LOSSES: Mapping[str, RegisteredLoss] = REGISTRY.entries(RETRIEVAL)
