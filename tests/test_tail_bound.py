"""The parametric fallback of the risk groups' bounds where the calibration BFH are too few for
a conformal one (sphr.risk.calibration.TAIL_BOUNDS), and benchmarks/tail_bound.py's rule."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from benchmark_loader import load_benchmark
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy import stats
from test_risk import _bfh

from sphr.risk.calibration import (
    LOWER_LEVEL,
    TAIL_BOUND,
    TAIL_BOUNDS,
    tail_bound,
    upper_bound,
    yeo_johnson_inverse,
)

tail_benchmark = load_benchmark("tail_bound")


@settings(max_examples=200, deadline=None)
@given(st.floats(-3, 5), st.floats(-20, 20))
@example(1e-12, 1.0)  # the power form loses every digit this near 0
@example(5e-324, 1.0)  # below scipy's cut, where it takes lambda as 0
@example(2 - 1e-17, -1.0)
def test_yeo_johnson_inverse_undoes_scipys_transform(lam, x):
    y = float(stats.yeojohnson(np.array([x]), lmbda=lam)[0])
    assert yeo_johnson_inverse(y, lam) == pytest.approx(x, rel=1e-7, abs=1e-7)


def test_yeo_johnson_inverse_is_infinite_beyond_the_transforms_range():
    # lam < 0 maps [0, inf) onto [0, -1 / lam): nothing maps to -1 / lam or above it
    assert yeo_johnson_inverse(2.0, -0.5) == math.inf
    assert yeo_johnson_inverse(1.9, -0.5) < math.inf
    # lam > 2 maps (-inf, 0) onto (1 / (2 - lam), 0)
    assert yeo_johnson_inverse(-2.0, 2.5) == -math.inf


@pytest.mark.parametrize("n", [20, 61])
def test_the_normal_fallback_is_an_exact_prediction_bound_on_normal_scores(n):
    """For normal scores the t prediction bound leaves exactly 1 - level above it on average:
    the fallbacks' common core, checked against its theory (Monte Carlo SE about 0.0003)."""
    rng = np.random.default_rng(n)
    samples = rng.normal(size=(6000, n))
    bounds = np.array([tail_bound(s, LOWER_LEVEL, "normal") for s in samples])
    assert stats.norm.sf(bounds).mean() == pytest.approx(1 - LOWER_LEVEL, abs=0.0012)


def test_each_fallback_serves_only_where_the_conformal_rank_exceeds_n():
    s = np.random.default_rng(0).normal(size=120)
    # n = 120 >= 99: the 99% bound is conformal whatever the fallback
    assert {upper_bound(s, LOWER_LEVEL, t).method for t in TAIL_BOUNDS} == {"conformal"}
    assert len({upper_bound(s, LOWER_LEVEL, t).value for t in TAIL_BOUNDS}) == 1
    small = s[:40]
    for tail in TAIL_BOUNDS:
        bound = upper_bound(small, LOWER_LEVEL, tail)
        assert bound.method == tail and bound.value > np.quantile(small, 0.9)
    with pytest.raises(ValueError, match="tail bound"):
        upper_bound(small, LOWER_LEVEL, "gumbel")
    assert upper_bound(small, LOWER_LEVEL).method == TAIL_BOUND


def test_the_yeo_johnson_fallback_needs_no_shift_on_centred_scores():
    """On scores centred at 0 (the standardizer's z) the log fallback's shift sits just below
    the smallest score, whose log then swells the spread; Yeo-Johnson takes any sign as it is,
    so it moves with the scores and its bound with them."""
    z = np.random.default_rng(3).normal(size=61)
    shifted = tail_bound(z + 10.0, LOWER_LEVEL, "yeo_johnson") - 10.0
    assert abs(shifted - tail_bound(z, LOWER_LEVEL, "yeo_johnson")) < 0.5
    assert stats.norm.sf(tail_bound(z, LOWER_LEVEL, "yeo_johnson")) > 0.001


def test_the_rule_keeps_the_incumbent_unless_a_candidate_passes_and_takes_the_closest():
    def cand(worst, passes):
        return {"worst_abs_log_ratio": worst, "passes": passes}

    none = {t: cand(0.1, False) for t in TAIL_BOUNDS}
    assert tail_benchmark.choose(none) == tail_benchmark.INCUMBENT
    some = {"lognormal": cand(0.05, False), "yeo_johnson": cand(0.3, True),
            "normal": cand(0.2, True)}
    assert tail_benchmark.choose(some) == "normal"


def test_a_cells_exceedance_is_seeded_and_on_the_robust_z_scale():
    dist = tail_benchmark.DISTRIBUTIONS["chi5"]
    a = tail_benchmark.cell_exceedance(dist, 30, "normal", 300, seed=7)
    assert a == tail_benchmark.cell_exceedance(dist, 30, "normal", 300, seed=7)
    assert a != tail_benchmark.cell_exceedance(dist, 30, "normal", 300, seed=8)
    # the normal distribution on its robust z scale is itself: the exact 1% on average
    normal = tail_benchmark.cell_exceedance(tail_benchmark.DISTRIBUTIONS["normal"], 30,
                                            "normal", 3000, seed=1)
    assert normal == pytest.approx(0.01, abs=0.0012)


# ----------------------------------------------------------------------------- the setting


@pytest.mark.parametrize("tail", TAIL_BOUNDS)
def test_the_setting_reaches_the_bounds_and_survives_save_load_and_reanchoring(tail):
    from sphr.risk.distance import DistanceModel

    rng = np.random.default_rng(0)
    train, cal = _bfh(rng.gamma(3.0, size=60)), _bfh(rng.gamma(3.0, size=40))
    model = DistanceModel("raw_euclidean", "calibrated", ["a"], min_group_size=2,
                          standardize_min_group=2, tail_bound=tail).fit(train, cal)
    # n = 40: the 95% bound is conformal, the 99% bound the chosen fallback
    assert (model.bounds_.normal.method, model.bounds_.lower.method) == ("conformal", tail)
    assert model.bounds_.lower.value == pytest.approx(
        upper_bound(model.score_samples(cal), LOWER_LEVEL, tail).value)
    loaded = DistanceModel.from_dict(model.to_dict(), model.space_)
    assert loaded.tail_bound == tail and loaded.bounds_ == model.bounds_
    moved = model.reanchored(train, _bfh(rng.gamma(3.0, size=40) + 1.0), references=False,
                             standardizer=False)
    assert moved.bounds_.lower.method == tail and moved.bounds_.tail == tail


def test_a_saved_bound_keeps_its_fallback_and_an_unsaved_one_is_refused():
    from sphr.risk.calibration import CalibratedBounds
    from sphr.risk.comparators import ScoreModel

    bounds = CalibratedBounds.fit(np.random.default_rng(1).normal(size=40), "yeo_johnson")
    assert CalibratedBounds.from_dict(bounds.as_dict()).tail == "yeo_johnson"
    # an older model folder, saved before the setting, is refused by its layout stamp
    # (tests/test_old_layouts.py); a bound without its fallback is never guessed
    with pytest.raises(KeyError):
        CalibratedBounds.from_dict({k: v for k, v in bounds.as_dict().items() if k != "tail"})
    score = ScoreModel("phenoage", ((36, 45), (46, 50)), standardize_min_group=2,
                       tail_bound="yeo_johnson")
    assert score.tail_bound == "yeo_johnson"


def test_an_unknown_fallback_is_refused_where_it_is_set():
    from sphr.errors import ConfigError
    from sphr.risk.config import RiskConfig
    from sphr.risk.distance import DistanceModel

    with pytest.raises(ConfigError, match="tail_bound"):
        RiskConfig(tail_bound="gumbel").check()
    with pytest.raises(ConfigError, match="tail bound"):
        DistanceModel("raw_euclidean", "calibrated", ["a"], tail_bound="gumbel").fit(
            _bfh(np.arange(10.0)), _bfh(np.arange(10.0)))


def _rows(n_calibration: int, n_higher: int) -> pd.DataFrame:
    from sphr.risk.intervals import HIGHER_RISK, LOWER_RISK, NORMAL

    test = [NORMAL] * 50 + [LOWER_RISK] * 8 + [HIGHER_RISK] * n_higher
    return pd.DataFrame({
        "sex": "female", "method": "sphr_joint", "mode": "calibrated",
        "partition": ["calibration"] * n_calibration + ["test"] * len(test),
        "label": np.int8(2), "group": [NORMAL] * n_calibration + test})


def test_the_verdict_says_why_higher_risk_is_nearly_empty_only_where_it_is():
    from sphr.risk.report import verdict as vd

    def said(n_calibration: int, n_higher: int, method: str = "sphr_joint") -> str | None:
        rows = _rows(n_calibration, n_higher)
        return vd.higher_risk_sentence(vd.in_higher_risk(rows, method, "test"),
                                       vd.calibration_bfh(rows, method), "lognormal")

    text = said(61, 0)
    assert "holds 0 women" in text and "61 calibration BFH" in text and "log-normal" in text
    assert "holds 1 woman " in said(61, 1)
    assert said(61, 12) is None  # enough people in Higher Risk
    assert said(120, 0) is None  # a conformal bound
    assert said(61, 0, "raw_euclidean") is None  # no such score


def test_the_score_report_says_it_from_the_models_bounds_with_or_without_outcomes():
    from sphr.risk.report.verdict_page import verdict_blocks

    scored = _rows(0, 0).assign(partition="scored")
    bounds = {"female": {"sphr_joint": {"n": 61, "method": "lognormal", "tail": "yeo_johnson"}}}
    blocks = verdict_blocks(None, scored, None, people="the people scored", why_not="none",
                            bounds=bounds)
    texts = [b[1] for b in blocks if b[0] == "p"]
    assert any("cannot be judged" in t for t in texts)
    assert any("Higher Risk holds 0 women among the people scored" in t and "Yeo-Johnson" in t
               for t in texts)
    # a model whose bounds are conformal says nothing
    bounds["female"]["sphr_joint"]["n"] = 120
    blocks = verdict_blocks(None, scored, None, people="the people scored", why_not="none",
                            bounds=bounds)
    assert not any("Higher Risk holds" in str(b[1]) for b in blocks)
