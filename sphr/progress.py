"""Progress bars for long steps; ``SPHR_PROGRESS=0`` (or ``sphr -q``) turns them off."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

from tqdm.auto import tqdm

from sphr.options import env_switch

T = TypeVar("T")


def enabled() -> bool:
    return env_switch("SPHR_PROGRESS")


def progress(iterable: Iterable[T] | None = None, *, desc: str, total: int | None = None,
             unit: str = "it", **kwargs: Any) -> tqdm:
    """A tqdm bar on stderr, refreshed at most twice a second."""
    return tqdm(iterable, desc=desc, total=total, unit=unit, disable=not enabled(),
                mininterval=0.5, dynamic_ncols=True, leave=False, **kwargs)
