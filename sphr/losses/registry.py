"""One registry of every loss the project trains with, tabular and image retrieval.

Each :class:`RegisteredLoss` says its name, the domain it serves and how to build it:

* ``tabular``: the SPHR embedding's triplet training (``sphr train``, ``TrainConfig.loss``,
  ``sphr.train.trainer.make_loss``); registered by :mod:`sphr.losses`.
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

Domain = Literal["tabular", "retrieval"]
#: the SPHR embedding's triplet training on tabular participant data
TABULAR: Domain = "tabular"
#: the image-retrieval loss comparison
RETRIEVAL: Domain = "retrieval"
DOMAINS: tuple[Domain, ...] = (TABULAR, RETRIEVAL)


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
