"""Rejection-sampling augmentation of a class (NPLB Algorithm 1, Appendix L).

For each feature, draw from N(mean, sd) of that class until the draw falls
inside the class's bounds [L, U]: the P0 normal ranges for bona fide healthy,
the class's observed min/max for everything else (SPEC 1.4 Decision). Draws
are made in blocks: every rejected cell is redrawn in the next round, so the
work is a handful of vectorized rounds, never a per-sample loop. Features are
drawn independently, as in the paper.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import ndtr

from sphr.errors import InputError

MAX_ROUNDS = 200
#: below this acceptance rate a bound is (nearly) out of the class's reach: fail early
MIN_ACCEPTANCE = 1e-4


@dataclass(frozen=True)
class AugmentationResult:
    samples: np.ndarray  # (n_new, n_features), raw units
    rounds: int
    acceptance: np.ndarray  # per feature, expected acceptance rate
    mean: np.ndarray
    sd: np.ndarray
    low: np.ndarray
    high: np.ndarray


def rejection_sample(X: np.ndarray, n_new: int, low: np.ndarray, high: np.ndarray,
                     rng: np.random.Generator, features: list[str] | None = None,
                     integer: np.ndarray | None = None, label: str = "class") -> AugmentationResult:
    """Draw ``n_new`` rows from N(mean, sd) of ``X`` per feature, each inside [low, high].

    ``integer`` marks features whose values are whole numbers (age, sleep hours):
    draws are rounded before the bound check, so they look like real values.
    """
    X = np.asarray(X, dtype=np.float64)
    d = X.shape[1]
    features = features or [f"x{j}" for j in range(d)]
    integer = np.zeros(d, dtype=bool) if integer is None else np.asarray(integer, dtype=bool)
    if X.shape[0] < 2:
        raise InputError(f"cannot augment {label}: it has {X.shape[0]} member(s), need 2 to "
                         "estimate a mean and SD")
    mean, sd = X.mean(axis=0), X.std(axis=0, ddof=1)
    low = np.where(np.isfinite(low), low, -np.inf)
    high = np.where(np.isfinite(high), high, np.inf)
    with np.errstate(divide="ignore", invalid="ignore"):
        acceptance = np.where(sd > 0, ndtr((high - mean) / sd) - ndtr((low - mean) / sd),
                              ((mean >= low) & (mean <= high)).astype(float))
    hopeless = np.flatnonzero(acceptance < MIN_ACCEPTANCE)
    if hopeless.size:
        j = hopeless[0]
        raise InputError(
            f"cannot augment {label}: feature {features[j]!r} has mean {mean[j]:.4g} and SD "
            f"{sd[j]:.4g}, so a draw lands in [{low[j]:.4g}, {high[j]:.4g}] with probability "
            f"{acceptance[j]:.2g}; check the bound and its unit", field=features[j])
    out = np.empty((n_new, d))
    todo = np.ones((n_new, d), dtype=bool)
    rounds = 0
    while todo.any():
        rounds += 1
        if rounds > MAX_ROUNDS:
            j = int(np.argmax(todo.sum(axis=0)))
            raise InputError(f"cannot augment {label}: feature {features[j]!r} still has "
                             f"{int(todo[:, j].sum())} rejected draws after {MAX_ROUNDS} rounds",
                             field=features[j])
        rows, cols = np.nonzero(todo)
        draw = rng.normal(mean[cols], sd[cols])
        draw = np.where(integer[cols], np.round(draw), draw)
        ok = (draw >= low[cols]) & (draw <= high[cols])
        out[rows[ok], cols[ok]] = draw[ok]
        todo[rows[ok], cols[ok]] = False
    return AugmentationResult(out, rounds, acceptance, mean, sd, low, high)
