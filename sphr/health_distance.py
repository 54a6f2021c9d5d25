"""The health distance: the one place that measures how far a person's embedded profile lies
from the bona fide healthy (BFH) reference (docs/METHODS.md, "The health distance").

Every stage that needs it calls these two functions, with the reference spelled out:

* :func:`health_reference` builds one reference from BFH rows, either as the **embedding
  of the median profile** (``embedded_median_profile``: the risk stage's r_g = G(P_50(B)),
  Appendix B; ``rows`` are raw profiles and ``embed`` maps them into the space) or as the
  **median of the embedded BFH** (``median_of_embedded``: ``rows`` are already embedded;
  training's per-epoch tracking and the benchmarks use it, since they have embeddings only).
* :func:`health_distance` is the Euclidean distance of each row to one reference, or, given
  each row's age group, to its age group's reference.

Lives in a shared module (importable by every stage, imports none) because training's
``selection = "severity"`` (sphr.train.tracking) reads it and training may not import the
risk stage. The formulas are those each caller had before they were unified, bit for bit:
the median profile is ``np.percentile(..., 50)`` (what the risk stage's percentile profiles
always used), the median of embedded rows ``np.median``, and the distance keeps a float32
embedding in float32 (training's tracking) while the risk stage hands float64.
``tests/test_health_distance.py`` checks both against the three old definitions and that no
other module computes a distance of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

#: how a reference is taken from the BFH rows (see the module docstring)
REFERENCES: tuple[str, ...] = ("embedded_median_profile", "median_of_embedded")


def health_reference(rows: np.ndarray, *, reference: str,
                     embed: Callable[[np.ndarray], np.ndarray] | None = None) -> np.ndarray:
    """One reference point from the BFH ``rows`` (n, p). ``reference``: one of
    :data:`REFERENCES`; ``embed`` (profiles (m, p) -> embedded (m, k)) is required for
    ``embedded_median_profile`` and unused otherwise. No rows: a NaN reference (of the
    rows' width; every distance to it is NaN, which a caller's statistics read as unknown)."""
    if reference not in REFERENCES:
        raise ValueError(f"unknown reference {reference!r}: choose from {', '.join(REFERENCES)}")
    rows = np.asarray(rows)
    if reference == "embedded_median_profile":
        if embed is None:
            raise ValueError("reference 'embedded_median_profile' needs the embedding (embed)")
        return embed(np.percentile(rows, 50.0, axis=0)[None, :])[0]
    if len(rows) == 0:
        return np.full(rows.shape[1] if rows.ndim == 2 else 0, np.nan)
    return np.median(rows, axis=0)


def health_distance(z: np.ndarray, reference: np.ndarray | Mapping[str, np.ndarray],
                    groups: np.ndarray | None = None) -> np.ndarray:
    """Euclidean distance of each row of ``z`` (n, k) to ``reference``: one point (k,), or
    per age group (a mapping age group -> point, with ``groups`` the rows' age groups).
    Integer input is measured in float64; float input keeps its precision."""
    z = np.asarray(z)
    if not np.issubdtype(z.dtype, np.inexact):
        z = z.astype(np.float64)
    if groups is None:
        if isinstance(reference, Mapping):
            raise ValueError("references per age group need the rows' age groups (groups)")
        return _euclidean(z, np.asarray(reference))
    if not isinstance(reference, Mapping):
        raise ValueError("rows' age groups (groups) need references per age group")
    groups = np.asarray(groups)
    present = np.unique(groups)
    out = np.empty(len(z), dtype=np.result_type(
        z.dtype, *(np.asarray(reference[g]).dtype for g in present)))
    for g in present:
        rows = groups == g
        out[rows] = _euclidean(z[rows], np.asarray(reference[g]))
    return out


def _euclidean(z: np.ndarray, point: np.ndarray) -> np.ndarray:
    """sqrt(sum of squared differences) per row: numpy's ``linalg.norm(z - point, axis=1)``
    and the risk stage's old ``sqrt(((z - r) ** 2).sum(axis=1))``, which compute the same."""
    return np.sqrt(np.square(z - point).sum(axis=1))
