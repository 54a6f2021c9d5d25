"""One registry of every loss the project trains with, tabular and image retrieval.

Each :class:`RegisteredLoss` says its name, the domain it serves and how to build it:

* ``tabular``: the SPHR embedding's triplet training (``sphr train``, ``TrainConfig.loss``,
  ``sphr.train.trainer.make_loss``); registered by :mod:`sphr.losses`.
* ``term``: a term of the training objective beside the tabular loss, weighted
  (:mod:`sphr.losses.objective`): ``geometry``, the marker-geometry stress
  (:mod:`sphr.losses.anchor`, ``TrainConfig.anchor`` its weight).
* ``retrieval``: the image-retrieval comparison (``sphr retrieval --losses``,
  ``run_comparison``); registered by :mod:`sphr.retrieval.losses.registry` when the retrieval
  branch is imported, since the retrieval branch sits downstream of ``sphr.losses`` in the
  import direction (docs/ARCHITECTURE.md) and this module may not import it.

A name is unique within a domain, not across them: ``triplet`` and ``nplb`` are each a tabular
loss (anchor, positive, negative) and a retrieval loss (a batch of embeddings and labels), with
different defaults. A loss that served both domains would be registered once per domain.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from sphr.errors import ConfigError
from sphr.options import parse_value

Domain = Literal["tabular", "retrieval", "term"]
#: the SPHR embedding's triplet training on tabular participant data
TABULAR: Domain = "tabular"
#: the image-retrieval loss comparison
RETRIEVAL: Domain = "retrieval"
#: terms added to a tabular loss in every training path and in model selection's validation
#: loss (sphr.losses.objective): the marker-geometry stress (sphr.losses.anchor)
TERM: Domain = "term"
DOMAINS: tuple[Domain, ...] = (TABULAR, RETRIEVAL, TERM)


@dataclass(frozen=True)
class RegisteredLoss:
    """A loss as the registry knows it."""

    name: str
    domain: Domain
    #: ``build(**params)`` -> a fresh loss module; checks ``params`` (``ConfigError``)
    build: Callable[..., Any]
    #: the keyword parameters ``build`` accepts
    parameters: frozenset[str]
    description: str = ""
    #: the option defaults (retrieval losses; a tabular loss's live in its constructor)
    defaults: Mapping[str, Any] = field(default_factory=dict)
    #: the margin scheduler family, for grouping margin curves ("" when the loss has none)
    scheduler: str = ""
    #: the module that registered it
    origin: str = ""


class LossRegistry:
    """Losses by domain and name, in registration order (the order tables and ``--help``
    list them in)."""

    def __init__(self) -> None:
        self._entries: dict[tuple[Domain, str], RegisteredLoss] = {}

    def register(self, entry: RegisteredLoss) -> RegisteredLoss:
        """Add ``entry``; the same name in the same domain from another module is an error
        (a reload of the registering module replaces its own entries)."""
        if entry.domain not in DOMAINS:
            raise ConfigError(f"loss {entry.name!r}: domain must be one of {DOMAINS}, "
                              f"got {entry.domain!r}")
        old = self._entries.get((entry.domain, entry.name))
        if old is not None and old.origin != entry.origin:
            raise ConfigError(f"{entry.domain} loss {entry.name!r} is registered twice: by "
                              f"{old.origin} and by {entry.origin}")
        self._entries[(entry.domain, entry.name)] = entry
        return entry

    def names(self, domain: Domain) -> tuple[str, ...]:
        """The loss names of ``domain``, in registration order."""
        return tuple(name for (d, name) in self._entries if d == domain)

    def entries(self, domain: Domain) -> Mapping[str, RegisteredLoss]:
        """A read-only name -> entry view of ``domain`` (taken now)."""
        return MappingProxyType({name: e for (d, name), e in self._entries.items()
                                 if d == domain})

    def domains_of(self, name: str) -> tuple[Domain, ...]:
        """The domains a loss of this name serves (none: an unknown name)."""
        return tuple(d for (d, n) in self._entries if n == name)

    def get(self, name: str, domain: Domain) -> RegisteredLoss:
        try:
            return self._entries[(domain, name)]
        except KeyError:
            raise ConfigError(f"unknown {domain} loss {name!r}: choose from "
                              f"{', '.join(self.names(domain))}") from None

    def build(self, name: str, domain: Domain, **params: Any) -> Any:
        """A fresh loss ``name`` of ``domain``; unknown names or parameters raise
        :class:`ConfigError`."""
        return self.get(name, domain).build(**params)


#: the project's one loss registry
REGISTRY = LossRegistry()


def parse_loss_spec(spec: str, domain: Domain = TABULAR) -> tuple[str, dict[str, Any]]:
    """``"name:key=value,key=value"`` -> (name, overrides); the name must be one of
    ``domain``'s."""
    name, _, rest = spec.partition(":")
    name = name.strip()
    if name not in REGISTRY.names(domain):
        raise ConfigError(f"unknown loss {name!r} ({domain}): choose from "
                          f"{', '.join(REGISTRY.names(domain))}")
    overrides: dict[str, Any] = {}
    for item in filter(None, (x.strip() for x in rest.split(","))):
        key, eq, value = item.partition("=")
        if not eq:
            raise ConfigError(f"loss option {item!r} in {spec!r} is not key=value")
        overrides[key.strip()] = parse_value(value)
    return name, overrides


def build_loss(spec: str, domain: Domain = TABULAR, **params: Any) -> Any:
    """The project's one way to make a loss: a fresh loss ``spec`` of ``domain`` (a name,
    optionally with ``:key=value,...`` overrides; keyword ``params`` win over them). Unknown
    names or parameters raise :class:`ConfigError`."""
    name, opts = parse_loss_spec(spec, domain)
    return REGISTRY.build(name, domain, **{**opts, **params})


def loss_parameters(name: str, domain: Domain = TABULAR) -> set[str]:
    """The keyword parameters loss ``name`` of ``domain`` accepts."""
    return set(REGISTRY.get(name, domain).parameters)
