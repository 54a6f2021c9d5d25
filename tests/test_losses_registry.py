"""The one loss registry (sphr.losses.registry): it lists every tabular and every retrieval
loss under the names configs use, and builds each as the loss's own constructor would with
the documented parameters (written out here by hand, not read from the registry)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from pytorch_metric_learning.distances import CosineSimilarity
from pytorch_metric_learning.reducers import AvgNonZeroReducer, MeanReducer

import sphr.retrieval.losses as rl
from sphr import losses as tl
from sphr.errors import ConfigError
from sphr.losses.registry import (
    DOMAINS,
    REGISTRY,
    RETRIEVAL,
    TABULAR,
    TERM,
    LossRegistry,
    RegisteredLoss,
    build_loss,
)
from sphr.retrieval.catalog import LOSS_CATALOG
from sphr.train.config import COMPARISON_LOSSES

_AT = {"selection": "semihard", "reducer": AvgNonZeroReducer}
_DAMS = {"swap": True, "selection": "all", "reducer": MeanReducer}


def _am(k_an: float = 2.0, beta0: float = 0.0) -> rl.AutoMargin:
    return rl.AutoMargin(2.0, k_an, 0.25, beta0, False, warmup_epochs=0, warmup_until_delta=False)


def _trip(margin: float, dist: Any, sched: Any, *, swap: bool = False, selection: str = "all",
          reducer: Any = MeanReducer) -> rl.TripletLoss:
    return rl.TripletLoss(margin, distance=dist, swap=swap, selection=selection,
                          reducer=reducer(), scheduler=sched)


#: every retrieval loss as its constructor builds it with the catalog's defaults
RETRIEVAL_EXPECTED: dict[str, Callable[[], Any]] = {
    "triplet": lambda: _trip(0.25, CosineSimilarity(), rl.ConstantMargin(0.25),
                             selection="semihard", reducer=AvgNonZeroReducer),
    "triplet_euclidean": lambda: _trip(0.3, rl.EuclideanDistance(), rl.ConstantMargin(0.3)),
    "triplet_automargin": lambda: _trip(0.25, CosineSimilarity(), _am(), selection="semihard",
                                        reducer=AvgNonZeroReducer),
    "adatriplet": lambda: rl.AdaTripletLoss(0.25, 0.0, 1.0, distance=CosineSimilarity(),
                                            selection="semihard", reducer=AvgNonZeroReducer(),
                                            scheduler=rl.ConstantMargin(0.25)),
    "adatriplet_automargin": lambda: rl.AdaTripletLoss(
        0.25, 0.0, 1.0, distance=CosineSimilarity(), selection="semihard",
        reducer=AvgNonZeroReducer(), scheduler=_am()),
    "triplet_constant": lambda: _trip(0.3, rl.EuclideanDistance(), rl.ConstantMargin(0.3),
                                      swap=True),
    "triplet_linear": lambda: _trip(0.0, rl.EuclideanDistance(),
                                    rl.LinearMargin(0.0, 0.01, paper_epochs=100), swap=True),
    "triplet_dams": lambda: _trip(0.0, rl.EuclideanDistance(),
                                  rl.DAMSMargin(0.0, 0.01, 0.95, paper_epochs=100), swap=True),
    "ocam": lambda: rl.OCAMLoss(distance=CosineSimilarity(), selection="all",
                                reducer=MeanReducer()),
    "nplb": lambda: rl.NPLBLoss(0.3, 2, distance=rl.EuclideanDistance(), selection="all",
                                reducer=MeanReducer(), scheduler=rl.ConstantMargin(0.3)),
    "contrastive": lambda: rl.ContrastiveLoss(0.0, 1.0, distance=rl.EuclideanDistance(),
                                              reducer=AvgNonZeroReducer()),
}


def _shape(obj: Any, depth: int = 0) -> Any:
    """Types and plain values of an object's attributes, nested: two losses with the same
    shape were built the same way."""
    if isinstance(obj, (bool, int, float, str, type(None))):
        return obj
    if isinstance(obj, torch.Tensor):
        return obj.tolist()
    if isinstance(obj, (list, tuple)):
        return [_shape(x, depth + 1) for x in obj]
    if isinstance(obj, dict):
        return {str(k): _shape(v, depth + 1) for k, v in obj.items()}
    if depth > 3 or not hasattr(obj, "__dict__"):
        return type(obj).__qualname__
    return {"type": type(obj).__qualname__,
            **{k: _shape(v, depth + 1) for k, v in vars(obj).items()
               if not k.startswith("_") or k == "_modules"}}


def test_the_registry_lists_every_loss_of_both_domains():
    assert set(DOMAINS) == {TABULAR, RETRIEVAL, TERM}
    assert REGISTRY.names(TERM) == ("geometry",)  # the marker-geometry term
    assert REGISTRY.names(TABULAR) == tuple(tl.LOSSES) == COMPARISON_LOSSES
    assert REGISTRY.names(RETRIEVAL) == tuple(LOSS_CATALOG) == tuple(rl.LOSSES)
    assert set(RETRIEVAL_EXPECTED) == set(LOSS_CATALOG)
    assert REGISTRY.domains_of("triplet") == (TABULAR, RETRIEVAL)  # one name, two losses
    assert REGISTRY.domains_of("mdr") == (TABULAR,)
    assert REGISTRY.domains_of("ocam") == (RETRIEVAL,)
    assert REGISTRY.domains_of("no_such_loss") == ()


@pytest.mark.parametrize("name", COMPARISON_LOSSES)
def test_each_tabular_loss_is_built_as_its_class_builds_it(name):
    want = tl._CLASSES[name]()
    for got in (REGISTRY.build(name, TABULAR), tl.build_loss(name)):
        assert type(got) is type(want)
        assert _shape(got) == _shape(want)
    entry = REGISTRY.get(name, TABULAR)
    assert entry.parameters == tl.loss_parameters(name) >= {"distance", "reducer"}
    if "margin" in entry.parameters:
        assert _shape(REGISTRY.build(name, TABULAR, margin=0.7)) == _shape(
            tl._CLASSES[name](margin=0.7))


@pytest.mark.parametrize("name", list(LOSS_CATALOG))
def test_each_retrieval_loss_is_built_as_its_constructor_builds_it(name):
    want = RETRIEVAL_EXPECTED[name]()
    x = F.normalize(torch.randn(9, 6, generator=torch.Generator().manual_seed(1),
                                dtype=torch.float64), dim=1)
    y = torch.arange(3).repeat_interleave(3)
    built = (REGISTRY.build(name, RETRIEVAL), build_loss(name, RETRIEVAL))
    for got in built:  # before any call: a call records its batch's statistics
        assert type(got) is type(want)
        assert _shape(got) == _shape(want)
    value = float(want(x, y))
    for got in built:
        assert float(got(x, y)) == pytest.approx(value, abs=1e-12)
    entry = REGISTRY.get(name, RETRIEVAL)
    assert entry.defaults == LOSS_CATALOG[name].defaults
    assert entry.parameters == set(LOSS_CATALOG[name].defaults)
    assert entry.scheduler == LOSS_CATALOG[name].scheduler


def test_unknown_names_and_parameters_are_config_errors():
    with pytest.raises(ConfigError, match="unknown tabular loss 'ocam'"):
        REGISTRY.build("ocam", TABULAR)
    with pytest.raises(ConfigError, match="unknown retrieval loss 'mdr'"):
        REGISTRY.build("mdr", RETRIEVAL)
    with pytest.raises(ConfigError, match="takes no parameter"):
        REGISTRY.build("triplet", TABULAR, swap=True)
    with pytest.raises(ConfigError, match="has no option"):
        REGISTRY.build("ocam", RETRIEVAL, margin=0.2)


def test_a_name_registered_twice_in_a_domain_by_two_modules_is_an_error():
    reg = LossRegistry()
    entry = RegisteredLoss("x", TABULAR, dict, frozenset(), origin="a")
    reg.register(entry)
    reg.register(entry)  # the same module again (a reload) replaces its own entry
    reg.register(RegisteredLoss("x", RETRIEVAL, dict, frozenset(), origin="b"))
    with pytest.raises(ConfigError, match="registered twice"):
        reg.register(RegisteredLoss("x", TABULAR, dict, frozenset(), origin="b"))
    with pytest.raises(ConfigError, match="domain must be one of"):
        reg.register(RegisteredLoss("y", "audio", dict, frozenset(), origin="a"))  # type: ignore[arg-type]
