"""benchmarks/ is a folder of scripts, not a package: the tests load a benchmark by its path."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def load_benchmark(name: str, *, register: bool = False) -> ModuleType:
    """``benchmarks/<name>.py`` as a module named ``name``; ``register`` puts it in
    ``sys.modules`` first, for a benchmark whose dataclasses look their module up by name."""
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    if register:
        sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
