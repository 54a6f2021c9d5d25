"""Class labels shared by every stage (cohorts, training, evaluation, risk)."""

from __future__ import annotations

import numpy as np

UNHEALTHY = 0
APPARENTLY_HEALTHY = 1  # apparently healthy and not bona fide healthy
BONA_FIDE_HEALTHY = 2
#: an ``unknown`` ingest label: left out of cohorts, scored but never a class
UNKNOWN_CLASS = -1

CLASS_NAMES: tuple[str, ...] = ("unhealthy", "apparently_healthy", "bona_fide_healthy")
SEXES: tuple[str, ...] = ("female", "male")
SEX_CODE: dict[str, int] = {"female": 0, "male": 1}


def to_binary(labels: np.ndarray) -> np.ndarray:
    """Unhealthy (0) vs healthy (1): apparently healthy and bona fide healthy together."""
    return (np.asarray(labels) != UNHEALTHY).astype(np.int8)
