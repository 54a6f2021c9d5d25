"""Offline random triplets (anchor, positive of its class, negative of another class).

Triplets are integer row indices into the training matrix, never copies of
rows. Sampling is vectorized per class: a positive is drawn from the anchor's
class without the anchor itself (draw from n_c - 1 slots and skip the
anchor's), a negative from the concatenation of the other classes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from sphr.cohorts.config import CohortConfig
from sphr.errors import InputError


def mine_triplets(labels: np.ndarray, n: int = CohortConfig.n_triplets, *, seed: int = 0,
                  balanced: bool = CohortConfig.balanced_triplets,
                  strata: np.ndarray | None = None) -> np.ndarray:
    """``(n, 3)`` int64 indices. ``balanced`` draws anchor classes uniformly, else rows uniformly.

    A class with a single member cannot give a positive: it never anchors, but its
    member still serves as a negative (documented fallback).

    ``strata`` (one integer per row, e.g. the age group): the positive and the negative come
    from the anchor's stratum, so no triplet contrasts people of different ages. Each
    stratum gets triplets in proportion to its rows (a multinomial draw); a stratum
    without two classes, or without a class of 2+ members, gives none.
    """
    labels = np.asarray(labels)
    rng = np.random.default_rng(seed)
    if strata is None:
        return _mine(labels, n, rng, balanced)
    strata = np.asarray(strata)
    if strata.shape != labels.shape:
        raise InputError(f"strata: {strata.shape} values for {labels.shape} rows")
    rows = [np.flatnonzero(strata == s) for s in np.unique(strata)]
    rows = [r for r in rows if _can_mine(labels[r])]
    if not rows:
        raise InputError("no stratum has two classes and a class with 2+ members")
    sizes = rng.multinomial(n, np.array([len(r) for r in rows]) / sum(len(r) for r in rows))
    out = np.concatenate(
        [r[_mine(labels[r], k, rng, balanced)] for r, k in zip(rows, sizes, strict=True) if k]
    )
    return out[rng.permutation(len(out))]  # batches mix the strata


def _can_mine(labels: np.ndarray) -> bool:
    _, counts = np.unique(labels, return_counts=True)
    return counts.size >= 2 and bool((counts >= 2).any())


def _mine(labels: np.ndarray, n: int, rng: np.random.Generator, balanced: bool) -> np.ndarray:
    classes, counts = np.unique(labels, return_counts=True)
    can_anchor = counts >= 2
    if can_anchor.sum() < 1 or classes.size < 2:
        raise InputError(f"triplets need two classes and one with 2+ members; got counts "
                         f"{dict(zip(classes.tolist(), counts.tolist(), strict=True))}")
    order = np.argsort(labels, kind="stable")  # rows grouped by class
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    anchor_classes = np.flatnonzero(can_anchor)
    if balanced:
        cls = rng.choice(anchor_classes, size=n)
    else:
        weights = counts[anchor_classes] / counts[anchor_classes].sum()
        cls = rng.choice(anchor_classes, size=n, p=weights)
    a_pos = rng.integers(0, counts[cls])
    p_pos = rng.integers(0, counts[cls] - 1)
    p_pos = p_pos + (p_pos >= a_pos)  # skip the anchor's own slot
    n_other = labels.size - counts[cls]
    q = rng.integers(0, n_other)
    # other classes' rows are the grouped array minus this class's block
    q = q + (q >= starts[cls]) * counts[cls]
    triplets = np.stack([order[starts[cls] + a_pos], order[starts[cls] + p_pos], order[q]], axis=1)
    return triplets.astype(np.int64)


def read_triplets(path: str | Path, n_rows: int) -> np.ndarray:
    """``triplets.npz`` as written by ``sphr cohorts``, checked against the training rows."""
    path = Path(path)
    if not path.exists():
        raise InputError("missing triplets.npz (run `sphr cohorts` first)", file=path)
    with np.load(path) as z:
        if "triplets" not in z:
            raise InputError("no array named 'triplets'", file=path)
        t = np.asarray(z["triplets"], dtype=np.int64)
    if t.ndim != 2 or t.shape[1] != 3 or len(t) == 0 or t.min() < 0 or t.max() >= n_rows:
        raise InputError(f"triplets must be (m, 3) row indices into train.parquet ({n_rows} rows), "
                         f"got shape {t.shape}", file=path)
    return t
