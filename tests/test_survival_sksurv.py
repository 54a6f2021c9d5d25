"""sphr.survival against scikit-survival (a test-only dependency, the ``dev`` extra): the
IPCW Brier score, the cumulative/dynamic AUROC and Harrell's C on untied data to 1e-9, and
the censoring distribution G, ties included (docs/OUTCOMES.md, "Validation on linked
outcomes").

scikit-survival evaluates G at T_i and at the horizon where sphr takes G(T_i-) and G(t-):
the same numbers when no censoring falls on an event's time or on the horizon, so the
statistics are compared on untied times and horizons between the times."""

from __future__ import annotations

import numpy as np
import pytest
from sksurv.metrics import brier_score, concordance_index_censored, cumulative_dynamic_auc
from sksurv.nonparametric import kaplan_meier_estimator
from sksurv.util import Surv

from sphr.survival import (
    CensoringKM,
    auroc_td_weighted,
    brier_weighted,
    c_index_weighted,
)


def _untied(seed: int, n: int = 400):
    """Continuous (untied) times, about half censored, a score and a risk related to them."""
    rng = np.random.default_rng(seed)
    event_time, censor_time = rng.exponential(6, n), rng.exponential(8, n)
    t, e = np.minimum(event_time, censor_time), event_time <= censor_time
    score = rng.standard_normal(n) - 0.2 * t
    risk = 1 / (1 + np.exp(-score))
    assert np.unique(t).size == n and np.unique(score).size == n
    return t, e, score, risk


def _horizons(t: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Midpoints between neighbouring times near the 20th, 50th and 80th percentiles of the
    event times, so no time, and no censoring, falls on a horizon."""
    times = np.sort(t)
    k = np.searchsorted(times, np.quantile(t[e], [0.2, 0.5, 0.8]))
    return (times[k - 1] + times[k]) / 2


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_brier_is_scikit_survivals(seed):
    t, e, _, risk = _untied(seed)
    y = Surv.from_arrays(e, t)
    horizons = _horizons(t, e)
    # scikit-survival scores the predicted probability of staying event-free
    _, ref = brier_score(y, y, np.tile(1 - risk[:, None], (1, horizons.size)), horizons)
    ours = [brier_weighted(t, e, risk, h, np.ones((1, t.size)))[0] for h in horizons]
    np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-9)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_td_auroc_is_scikit_survivals(seed):
    t, e, score, _ = _untied(seed)
    y = Surv.from_arrays(e, t)
    horizons = _horizons(t, e)
    ref, _ = cumulative_dynamic_auc(y, y, score, horizons)
    ours = [auroc_td_weighted(t, e, score, h, np.ones((1, t.size)))[0] for h in horizons]
    np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-9)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_harrells_c_is_scikit_survivals(seed):
    """The project has no IPCW (Uno) C, so scikit-survival's Harrell's C is the reference."""
    t, e, score, _ = _untied(seed)
    ref = concordance_index_censored(e, t, score)[0]
    assert c_index_weighted(t, e, score, np.ones((1, t.size)))[0] == pytest.approx(
        ref, rel=0, abs=1e-9)


@pytest.mark.parametrize("seed", [0, 1])
def test_censoring_km_is_scikit_survivals_reverse_km_with_ties(seed):
    """G at every distinct time, on times rounded to one decimal (events and censorings tie):
    scikit-survival takes the events first at a tie, as prodlim does."""
    rng = np.random.default_rng(seed)
    t = np.round(rng.exponential(5, 500), 1) + 0.1
    e = rng.random(500) < 0.5
    times, ref = kaplan_meier_estimator(e, t, reverse=True)
    # G(u) is G just before the next distinct time
    after = np.append(times[1:], times[-1] + 1.0)
    ours = CensoringKM(t, e, np.ones((1, t.size))).before(after)[0]
    np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-12)
