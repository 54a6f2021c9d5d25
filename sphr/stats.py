"""Rank statistics: the project's one AUROC, one Spearman correlation (of two variables,
and of every pair of columns) and one rank-normal transform (beside :mod:`sphr.survival`,
which holds the survival estimators).

Every stage, the synthetic worlds' summaries and the benchmarks use these; each is checked
against scipy or scikit-learn in ``tests/test_stats.py``. Written here rather than called
from scikit-learn directly for two reasons: ``roc_auc_score`` raises where a sample has one
class (a bootstrap resample or a small age group has), and the bootstrap needs the AUROC of
many resamples at once (:func:`auroc_rows`, one ``rankdata`` for all of them).
"""

from __future__ import annotations

import numpy as np
from scipy.special import ndtri
from scipy.stats import rankdata, spearmanr

#: the plotting positions of :func:`rank_normal`: rank / (n + 1) (van der Waerden's) and
#: (rank - 1/2) / n (Hazen's)
PLOTTING_POSITIONS: tuple[str, ...] = ("van_der_waerden", "hazen")


def auroc_rows(scores: np.ndarray, y: np.ndarray) -> np.ndarray:
    """AUROC of each row of ``scores`` (B, n) for labels ``y`` (B, n): Mann-Whitney with
    ties at their mid-rank (counted one half), scikit-learn's ``roc_auc_score`` row by row;
    NaN where a row has one class only."""
    scores, y = np.atleast_2d(np.asarray(scores, float)), np.atleast_2d(y).astype(bool)
    ranks = rankdata(scores, axis=1)
    n1 = y.sum(axis=1)
    n0 = y.shape[1] - n1
    with np.errstate(invalid="ignore", divide="ignore"):
        auc = ((ranks * y).sum(axis=1) - n1 * (n1 + 1) / 2) / (n1 * n0)
    return np.where((n1 > 0) & (n0 > 0), auc, np.nan)


def auroc(y: np.ndarray, score: np.ndarray) -> float:
    """AUROC of ``score`` for the positives of ``y`` (:func:`auroc_rows` of one row); NaN
    without both classes."""
    y, score = np.asarray(y, bool).ravel(), np.asarray(score, float).ravel()
    if y.size == 0:
        return float("nan")
    return float(auroc_rows(score[None, :], y[None, :])[0])


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rho over the pairs where both are finite; NaN under three such pairs or
    where a side is constant among them."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    ok = np.isfinite(x) & np.isfinite(y)
    if ok.sum() < 3 or np.ptp(x[ok]) == 0 or np.ptp(y[ok]) == 0:
        return float("nan")
    return float(spearmanr(x[ok], y[ok]).statistic)


def spearman_matrix(X: np.ndarray) -> np.ndarray:
    """Spearman's rho of every pair of columns of ``X`` (complete rows): the correlation of
    the columns' mid-ranks, scipy's ``spearmanr(X).statistic`` as a matrix always (NaN for a
    constant column)."""
    X = np.asarray(X, float)
    ranks = rankdata(X, axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.atleast_2d(np.corrcoef(ranks, rowvar=False))


def rank_normal(x: np.ndarray, *, axis: int = 0, plotting: str = "van_der_waerden"
                ) -> np.ndarray:
    """Rank-based normal scores Phi^-1(p) along ``axis``, ties at their mid-rank, NaN kept
    (and left out of the ranks): p = rank / (n + 1) (``van_der_waerden``, the copula
    augmentation's) or (rank - 1/2) / n (``hazen``, the age-structure study's)."""
    if plotting not in PLOTTING_POSITIONS:
        raise ValueError(f"plotting {plotting!r}: choose from {', '.join(PLOTTING_POSITIONS)}")
    x = np.asarray(x, float)
    ranks = rankdata(x, axis=axis, nan_policy="omit")
    n = np.sum(~np.isnan(x), axis=axis, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = ranks / (n + 1) if plotting == "van_der_waerden" else (ranks - 0.5) / n
    return np.where(np.isnan(x), np.nan, ndtri(p))
