"""The one implementation of each rank statistic (sphr.stats) against scipy and
scikit-learn, and that no other module of the library computes its own."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from scipy.special import ndtri
from scipy.stats import rankdata, spearmanr
from sklearn.metrics import roc_auc_score

from sphr.stats import auroc, auroc_rows, rank_normal, spearman, spearman_matrix

SPHR = Path(__file__).resolve().parents[1] / "sphr"
BENCHMARKS = SPHR.parent / "benchmarks"


@pytest.mark.parametrize("seed", range(5))
def test_auroc_is_scikit_learns_with_ties(seed):
    rng = np.random.default_rng(seed)
    y = rng.uniform(size=200) < 0.3
    score = np.round(rng.normal(size=200) + y, 1)  # rounded: many ties
    assert auroc(y, score) == pytest.approx(roc_auc_score(y, score), abs=1e-12)
    rows = auroc_rows(np.stack([score, -score]), np.stack([y, y]))
    assert rows == pytest.approx([roc_auc_score(y, score), roc_auc_score(y, -score)], abs=1e-12)


def test_auroc_without_both_classes_is_nan():
    assert np.isnan(auroc(np.zeros(5, bool), np.arange(5.0)))
    assert np.isnan(auroc(np.array([], bool), np.array([])))
    assert auroc(np.array([True, False]), np.array([0.5, 0.5])) == 0.5  # a tie counts half


def test_spearman_is_scipys_over_finite_pairs():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=100), rng.normal(size=100)
    y[:10] = np.nan
    assert spearman(x, y) == pytest.approx(spearmanr(x[10:], y[10:]).statistic, abs=1e-12)
    assert np.isnan(spearman([1.0, 2.0], [2.0, 1.0]))  # under three pairs
    assert np.isnan(spearman(np.ones(5), np.arange(5.0)))  # a constant side


def test_spearman_matrix_is_scipys():
    X = np.random.default_rng(1).normal(size=(50, 4))
    np.testing.assert_allclose(spearman_matrix(X), spearmanr(X).statistic, atol=1e-12)
    assert spearman_matrix(X[:, :2])[0, 1] == pytest.approx(spearman(X[:, 0], X[:, 1]))


def test_rank_normal_positions_and_missing_values():
    x = np.array([3.0, np.nan, 1.0, 2.0, 2.0])
    r = rankdata([3.0, 1.0, 2.0, 2.0])
    np.testing.assert_allclose(rank_normal(x, plotting="hazen")[[0, 2, 3, 4]],
                               ndtri((r - 0.5) / 4))
    np.testing.assert_allclose(rank_normal(x)[[0, 2, 3, 4]], ndtri(r / 5))
    assert np.isnan(rank_normal(x)[1])
    X = np.random.default_rng(2).normal(size=(30, 3))
    np.testing.assert_allclose(rank_normal(X, axis=0)[:, 1], rank_normal(X[:, 1]))
    with pytest.raises(ValueError):
        rank_normal(x, plotting="blom")


def test_no_other_module_computes_a_rank_statistic_of_its_own():
    """scikit-learn's and scipy's rank statistics are called from sphr/stats.py only (the
    benchmarks may rank for a permutation test's vectorized null, not compute a statistic)."""
    library = re.compile(r"\b(roc_auc_score|spearmanr|rankdata)\b")
    studies = re.compile(r"\b(roc_auc_score|spearmanr)\b")
    offenders = [str(p.relative_to(SPHR.parent))
                 for root, pattern in ((SPHR, library), (BENCHMARKS, studies))
                 for p in root.rglob("*.py")
                 if p.name != "stats.py" and pattern.search(p.read_text())]
    assert offenders == []
