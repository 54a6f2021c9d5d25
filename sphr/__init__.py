"""sphr: similarity-based patient health-risk modeling.

The library is plain Python + torch and never imports Dagster, so every step
also runs from the ``sphr`` command line or on a bare GPU box.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

__version__ = "0.1.0"


def lazy_exports(package: str, names: dict[str, str]) -> Callable[[str], Any]:
    """A package's module ``__getattr__`` (PEP 562) for ``names`` (name -> module): each is
    imported on first use, so importing the package (``sphr --help``) stays light."""

    def __getattr__(name: str) -> Any:
        if name in names:
            return getattr(importlib.import_module(names[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
