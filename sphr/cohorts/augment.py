"""Rejection-sampling augmentation of a class (NPLB Algorithm 1, Appendix L).

For each feature, draw from N(mean, sd) of that class until the draw falls
inside the class's bounds [L, U]: the P0 normal ranges for bona fide healthy,
the class's observed min/max for everything else (docs/METHODS.md#augmentation). Draws
are made in blocks: every rejected cell is redrawn in the next round, so the
work is a handful of vectorized rounds, never a per-sample loop. Features are
drawn independently, as in the paper.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import ndtr

from sphr.errors import InputError
from sphr.stats import rank_normal, spearman_matrix

#: rounds before giving up, at least; more where a feature's acceptance rate is low (but
#: above MIN_ACCEPTANCE), as many as its draws need
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
    # enough rounds for every cell to land with probability 1 - 1e-9 at the lowest acceptance
    # rate ((1 - p)^R * cells < 1e-9); the draws, and so the samples, are those of a fixed cap
    p_min = float(acceptance.min())
    max_rounds = MAX_ROUNDS if p_min >= 1 else max(MAX_ROUNDS, int(np.ceil(
        np.log(1e-9 / todo.size) / np.log1p(-p_min))))
    rounds = 0
    while todo.any():
        rounds += 1
        if rounds > max_rounds:
            j = int(np.argmax(todo.sum(axis=0)))
            raise InputError(f"cannot augment {label}: feature {features[j]!r} still has "
                             f"{int(todo[:, j].sum())} rejected draws after {max_rounds} rounds",
                             field=features[j])
        rows, cols = np.nonzero(todo)
        draw = rng.normal(mean[cols], sd[cols])
        draw = np.where(integer[cols], np.round(draw), draw)
        ok = (draw >= low[cols]) & (draw <= high[cols])
        out[rows[ok], cols[ok]] = draw[ok]
        todo[rows[ok], cols[ok]] = False
    return AugmentationResult(out, rounds, acceptance, mean, sd, low, high)


def copula_sample(X: np.ndarray, n_new: int, low: np.ndarray, high: np.ndarray,
                  rng: np.random.Generator, features: list[str] | None = None,
                  label: str = "class", shrinkage: float | None = None) -> AugmentationResult:
    """Draw ``n_new`` rows jointly: a Gaussian copula fitted to the class's real rows.

    Each feature is mapped to normal scores through the class's own ranks; the
    correlation of those scores (Ledoit-Wolf shrunk: a few hundred rows, 60
    features) is the copula. Draws from N(0, R) go back through each feature's
    empirical quantile function with the ``inverted_cdf`` rule, so every value is
    one the class really has: skew, integer values and point masses (e.g. zero
    vigorous activity) survive, and so do the correlations the paper's
    feature-by-feature draws lose (docs/METHODS.md, "Augmentation"). Rows
    outside [low, high] (the P0 box for BFH) are redrawn, whole rows at a time.

    **Decision (shrinkage)**: the empirical correlation of the normal scores when the
    class has at least twice as many rows as features; Ledoit-Wolf only below that,
    where the empirical matrix is unstable. Ledoit-Wolf at 190 rows x 60 features
    shrinks LDL-ApoB from 0.89 to 0.58, which is the very loss this method exists to
    avoid. ``shrinkage`` (0-1, towards the diagonal) overrides the rule.
    """
    from sklearn.covariance import LedoitWolf

    X = np.asarray(X, dtype=np.float64)
    n, d = X.shape
    features = features or [f"x{j}" for j in range(d)]
    if n < 3:
        raise InputError(f"cannot augment {label}: it has {n} member(s), need 3 for a copula")
    low = np.where(np.isfinite(low), low, -np.inf)
    high = np.where(np.isfinite(high), high, np.inf)
    scores = rank_normal(X, axis=0)  # rank / (n + 1), mid-ranks: ties share one score
    spread = scores.std(axis=0)
    scores = np.where(spread > 0, scores / np.where(spread > 0, spread, 1), 0.0)
    if shrinkage is None and n < 2 * d:
        cov = LedoitWolf().fit(scores).covariance_
    else:
        emp = np.cov(scores, rowvar=False)
        lam = shrinkage or 0.0
        cov = (1 - lam) * emp + lam * np.diag(np.diag(emp))
    sd = np.sqrt(np.clip(np.diag(cov), 1e-12, None))
    corr = cov / np.outer(sd, sd)
    chol = np.linalg.cholesky(corr + 1e-9 * np.eye(d))
    sorted_x = np.sort(X, axis=0)
    out = np.empty((n_new, d))
    todo = np.arange(n_new)
    rounds = 0
    accepted_total = drawn_total = 0
    while todo.size:
        rounds += 1
        if rounds > MAX_ROUNDS:
            raise InputError(f"cannot augment {label}: {todo.size} joint draws still outside the "
                             f"bounds after {MAX_ROUNDS} rounds")
        z = rng.standard_normal((todo.size, d)) @ chol.T
        u = ndtr(z)
        # inverted_cdf: the smallest observed value whose empirical CDF reaches u
        idx = np.clip(np.ceil(u * n).astype(np.int64) - 1, 0, n - 1)
        draw = np.take_along_axis(sorted_x, idx, axis=0)
        ok = ((draw >= low) & (draw <= high)).all(axis=1)
        out[todo[ok]] = draw[ok]
        accepted_total += int(ok.sum())
        drawn_total += todo.size
        if rounds == 5 and accepted_total < MIN_ACCEPTANCE * drawn_total:
            bad = int(np.argmax(((draw < low) | (draw > high)).mean(axis=0)))
            raise InputError(f"cannot augment {label}: joint draws almost never fall inside the "
                             f"bounds (feature {features[bad]!r} most often outside); check the "
                             "bound and its unit", field=features[bad])
        todo = todo[~ok]
    acceptance = np.full(d, accepted_total / max(drawn_total, 1))
    return AugmentationResult(out, rounds, acceptance, X.mean(axis=0), X.std(axis=0, ddof=1),
                              low, high)


def augmentation_check(real: np.ndarray, augmented: np.ndarray, features: list[str],
                       pairs: tuple[tuple[str, str], ...] = (
                           ("ldl", "apob"), ("cholesterol", "ldl"),
                           ("neutrophil_pct", "lymphocyte_pct"), ("cystatin_c", "creatinine"))
                       ) -> dict:
    """Do augmented rows look like real ones? Spearman correlations of named pairs, the
    largest correlation difference over all pairs, and each feature's most common value share
    (point masses), real vs augmented."""
    if len(augmented) < 3 or len(real) < 3:
        return {}
    r_real, r_aug = spearman_matrix(real), spearman_matrix(augmented)
    diff = np.nan_to_num(np.abs(r_real - r_aug))
    out: dict = {"max_abs_correlation_difference": round(float(diff.max()), 4),
                 "mean_abs_correlation_difference": round(float(
                     diff[np.triu_indices_from(diff, 1)].mean()), 4), "pairs": {}}
    for a, b in pairs:
        if a in features and b in features:
            i, j = features.index(a), features.index(b)
            out["pairs"][f"{a}~{b}"] = {"real": round(float(r_real[i, j]), 4),
                                        "augmented": round(float(r_aug[i, j]), 4)}

    def mode_share(M: np.ndarray) -> np.ndarray:
        return np.array([np.unique(c, return_counts=True)[1].max() / len(c) for c in M.T])

    real_mass, aug_mass = mode_share(real), mode_share(augmented)
    masses = np.flatnonzero(real_mass >= 0.1)  # features with a real point mass
    out["point_masses"] = {features[j]: {"real": round(float(real_mass[j]), 4),
                                         "augmented": round(float(aug_mass[j]), 4)}
                           for j in masses}
    return out
