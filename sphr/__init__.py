"""sphr: similarity-based patient health-risk modeling.

The library is plain Python + torch and never imports Dagster, so every step
also runs from the ``sphr`` command line or on a bare GPU box.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

__version__ = "0.1.0"


def lazy_exports(package: str, modules: dict[str, tuple[str, ...]]) -> Callable[[str], Any]:
    """A package's module ``__getattr__`` (PEP 562) for ``modules`` (module -> the names it
    exports): each name is imported on first use, so importing the package (``sphr --help``)
    stays light."""
    where = {name: module for module, names in modules.items() for name in names}

    def __getattr__(name: str) -> Any:
        if name in where:
            return getattr(importlib.import_module(where[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
