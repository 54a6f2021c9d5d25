"""The beyond-age yardstick (sphr.beyond_age) and the age standardizations
(sphr.risk.calibration.calibrate): what a score adds to age, measured out of sample."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sphr.beyond_age import beyond_age, beyond_age_table, group_ordering, ordering_table
from sphr.risk.calibration import STANDARDIZATIONS, Healthy, calibrate

#: lifelines iterated to the maximum (its default stops ~1e-4 short of it in relative
#: terms on some frames; sphr.survival.cox_efron goes to a gradient of ~1e-12)
TIGHT = {"precision": 1e-12, "max_steps": 200}


def _cohort(n: int = 1500, effect: float = 0.5, seed: int = 0) -> dict[str, np.ndarray]:
    """Exponential times whose hazard rises with age and with a marker x."""
    rng = np.random.default_rng(seed)
    age = rng.uniform(40, 73, n)
    x = rng.normal(size=n)
    hazard = 0.01 * np.exp(0.07 * (age - 55) + effect * x)
    t_event, t_cens = rng.exponential(1 / hazard), rng.uniform(5, 15, n)
    return {"time": np.minimum(t_event, t_cens), "event": t_event <= t_cens, "age": age,
            "x": x, "noise": rng.normal(size=n)}


def test_a_score_equal_to_age_adds_nothing():
    c = _cohort()
    fig, draws = beyond_age(c["time"], c["event"], c["age"], c["age"], n_bootstrap=50)
    assert fig.dc == 0.0 and np.all(draws == 0.0)
    assert fig.spearman_age == pytest.approx(1.0)


def test_a_score_independent_of_the_outcome_adds_about_nothing():
    c = _cohort()
    fig, _ = beyond_age(c["time"], c["event"], c["age"], c["noise"], n_bootstrap=200)
    assert abs(fig.dc) < 0.01
    assert fig.dc_low <= 0.0025  # its interval reaches (about) zero
    assert 0.85 < fig.hr_per_sd < 1.15


def test_a_marker_of_risk_adds_to_age_and_age_mixed_in_does_not_change_it():
    c = _cohort()
    pure, _ = beyond_age(c["time"], c["event"], c["age"], c["x"], n_bootstrap=200)
    mixed, _ = beyond_age(c["time"], c["event"], c["age"], c["x"] + 0.1 * c["age"],
                          n_bootstrap=200)
    assert pure.dc > 0.02 and pure.dc_low > 0
    # what it adds beyond age does not depend on how much age the score carries
    assert mixed.dc == pytest.approx(pure.dc, abs=0.005)
    assert mixed.spearman_age > 0.5 > abs(pure.spearman_age)


def test_hazard_ratio_per_sd_matches_lifelines():
    from lifelines import CoxPHFitter

    c = _cohort(n=600, seed=3)
    s = c["x"] * 2.0 + 1.0
    fig, _ = beyond_age(c["time"], c["event"], c["age"], s, n_bootstrap=20)
    frame = pd.DataFrame({"time": c["time"], "event": c["event"].astype(int), "age": c["age"],
                          "z": (s - s.mean()) / s.std()})
    ref = CoxPHFitter().fit(frame, "time", "event", fit_options=TIGHT)
    assert fig.hr_per_sd == pytest.approx(float(np.exp(ref.params_["z"])), rel=1e-5)
    lo, hi = np.exp(ref.confidence_intervals_.loc["z"].to_numpy())
    assert (fig.hr_low, fig.hr_high) == pytest.approx((lo, hi), rel=1e-4)


def test_draws_are_paired_across_scores_of_one_table():
    c = _cohort(n=800)
    frame = pd.DataFrame({"time_years": c["time"], "event": c["event"], "age": c["age"],
                          "x": c["x"], "x2": c["x"] * 3 - 1, "sex": "female"})
    table, draws = beyond_age_table(frame, ["x", "x2"], n_bootstrap=30)
    # a monotone transform of the same score: identical figures on identical resamples
    np.testing.assert_allclose(draws[("female", "x")], draws[("female", "x2")])
    assert table["dc"].nunique() == 1


def _groups(c: dict, higher_is_worse: bool) -> np.ndarray:
    s = c["x"] if higher_is_worse else -c["x"]
    return np.where(s > 1.6, "Higher Risk", np.where(s > 1.0, "Lower Risk", "Normal"))


def test_ordering_flag_on_constructed_groups():
    c = _cohort(n=3000)
    table, verdict = group_ordering(c["time"], c["event"], c["age"], _groups(c, True))
    assert verdict == {"status": "ordered", "basis": "Lower and Higher Risk"}
    hr = table.set_index("group")["hr"]
    assert hr["Higher Risk"] > hr["Lower Risk"] > 1
    inverted, verdict = group_ordering(c["time"], c["event"], c["age"], _groups(c, False))
    assert verdict["status"] == "not ordered"
    assert inverted.set_index("group").loc["Higher Risk", "hr"] < 1


def test_ordering_suppresses_small_groups():
    c = _cohort(n=400)
    g = np.full(400, "Normal", dtype=object)
    g[:4], g[4:8] = "Lower Risk", "Higher Risk"  # 4 people each: too few for any estimate
    table, verdict = group_ordering(c["time"], c["event"], c["age"], g)
    assert verdict == {"status": "too few", "basis": "none"}
    assert table.set_index("group").loc[["Lower Risk", "Higher Risk"], "hr"].isna().all()
    # one group large enough: the verdict rests on it and says so
    g[8:200] = "Higher Risk"
    _, verdict = group_ordering(c["time"], c["event"], c["age"], g)
    assert verdict["basis"] == "Higher Risk"


def test_ordering_table_keys_every_combination():
    c = _cohort(n=2000)
    frame = pd.DataFrame({"time_years": c["time"], "event": c["event"], "age": c["age"],
                          "group": _groups(c, True), "method": "x",
                          "sex": np.where(np.arange(2000) % 2, "male", "female")})
    out = ordering_table(frame, keys=["sex", "method"])
    assert set(out["sex"]) == {"female", "male"} and len(out) == 8
    assert list(out.columns[:2]) == ["sex", "method"]


def _healthy(n: int, seed: int) -> Healthy:
    """Healthy people whose raw score rises with age, and spreads with it."""
    rng = np.random.default_rng(seed)
    age = rng.uniform(40, 73, n)
    score = 1 + 0.05 * (age - 40) + (0.2 + 0.01 * (age - 40)) * rng.gamma(4, 0.25, n)
    groups = np.array([f"{lo}-{lo + 5}" for lo in (40 + 5 * ((age - 40) // 5).astype(int))],
                      object)
    return Healthy(score, groups, age)


NAMES = [f"{lo}-{lo + 5}" for lo in range(40, 75, 5)]


@pytest.mark.parametrize("standardization", [s for s in STANDARDIZATIONS
                                             if s != "calibration_groups"])
def test_standardization_leaves_healthy_people_uncorrelated_with_age(standardization):
    from sphr.beyond_age import spearman

    # enough people that the fits' own noise stays well inside the 0.10 of the rule
    train, cal, new = _healthy(3000, 1), _healthy(600, 2), _healthy(3000, 3)
    assert spearman(new.scores, new.ages) > 0.5  # the raw score tracks age
    std, bounds = calibrate(standardization, NAMES, train, cal)
    z = std.transform(new.scores, new.groups, new.ages)
    assert abs(spearman(z, new.ages)) < 0.10
    inside = (z <= bounds.normal.value).mean()
    assert 0.90 <= inside <= 0.99  # about 95% of new healthy people in Normal


def test_groups_pooled_across_an_age_trend_keep_age_in_the_score():
    """150 calibration people in 7 groups: each group borrows its neighbours to reach 30, and
    where the score rises with age that pulls the edge groups' medians inward, so the young
    score low and the old high. The line does not."""
    from sphr.beyond_age import spearman

    train, cal, new = _healthy(600, 1), _healthy(150, 2), _healthy(3000, 3)
    rho = {}
    for name in ("calibration_groups", "calibration_line"):
        std, _ = calibrate(name, NAMES, train, cal)
        rho[name] = spearman(std.transform(new.scores, new.groups, new.ages), new.ages)
    assert rho["calibration_groups"] > 0.2 > 0.1 > abs(rho["calibration_line"])


def test_calibration_source_reads_no_training_row():
    train, cal = _healthy(600, 1), _healthy(150, 2)
    other = Healthy(train.scores * 5 + 3, train.groups, train.ages)
    for name in ("calibration_groups", "calibration_line", "calibration_shift"):
        a, ba = calibrate(name, NAMES, train, cal)
        b, bb = calibrate(name, NAMES, other, cal)
        assert a.to_dict() == b.to_dict() and ba == bb
    a, _ = calibrate("training_line", NAMES, train, cal)
    b, _ = calibrate("training_line", NAMES, other, cal)
    assert a.to_dict() != b.to_dict()


def test_calibration_source_bounds_rest_on_crossfitted_z():
    """The bounds of a calibration-source standardization come from each calibration person's
    z under a standardizer fitted without them: an in-sample z would be pulled in."""
    from sphr.risk.calibration import AgeStandardizer, CalibratedBounds

    train, cal = _healthy(600, 1), _healthy(60, 2)
    std, bounds = calibrate("calibration_line", NAMES, train, cal)
    in_sample = CalibratedBounds.fit(std.transform(cal.scores, cal.groups, cal.ages))
    assert bounds.normal.value != in_sample.normal.value
    refit = AgeStandardizer(NAMES, 30, "line").fit(cal.scores, cal.groups, cal.ages)
    assert refit.to_dict() == std.to_dict()


def test_one_scale_for_every_age_keeps_the_scores_gain_over_age():
    """``calibration_shift``: z = (s - a - b age) / c, so a Cox model of age + z ranks as
    age + s does, and dC is the score's own; a scale line in age (``calibration_line``)
    bends z, and its dC moves."""
    c = _cohort(n=1500, seed=7)
    # a raw score that rises with age and spreads with it, carrying the marker x
    score = 1 + 0.05 * (c["age"] - 40) + (0.2 + 0.02 * (c["age"] - 40)) * np.exp(0.5 * c["x"])
    groups = np.array([f"{lo}-{lo + 5}" for lo in (40 + 5 * ((c["age"] - 40) // 5).astype(int))],
                      object)
    healthy = _healthy(300, 2)
    raw, _ = beyond_age(c["time"], c["event"], c["age"], score, n_bootstrap=20)
    dc = {}
    for name in ("calibration_shift", "calibration_line"):
        std, _ = calibrate(name, NAMES, healthy, healthy)
        z = std.transform(score, groups, c["age"])
        dc[name] = beyond_age(c["time"], c["event"], c["age"], z, n_bootstrap=20)[0].dc
    assert raw.dc > 0.02
    assert dc["calibration_shift"] == pytest.approx(raw.dc, abs=1e-12)
    assert abs(dc["calibration_line"] - raw.dc) > 1e-4


@pytest.mark.parametrize("ties", [False, True])
def test_cox_efron_matches_lifelines(ties):
    """The numpy Newton fit of the yardstick (and of every Wald hazard ratio) is lifelines'
    model: Efron's ties, the same estimates and standard errors."""
    from lifelines import CoxPHFitter

    from sphr.survival import cox_efron

    c = _cohort(n=700, seed=5)
    t = np.round(c["time"], 0) + 1 if ties else c["time"]  # whole years: many tied times
    X = np.column_stack([c["age"], c["x"], c["noise"]])
    frame = pd.DataFrame({"time": t, "event": c["event"].astype(int), "age": X[:, 0],
                          "x": X[:, 1], "noise": X[:, 2]})
    ref = CoxPHFitter().fit(frame, "time", "event", fit_options=TIGHT)
    coef, se = cox_efron(t, c["event"], X)
    np.testing.assert_allclose(coef, ref.params_.to_numpy(), rtol=2e-4, atol=1e-6)
    np.testing.assert_allclose(se, ref.standard_errors_.to_numpy(), rtol=2e-4)


def test_cox_efron_gives_up_where_a_column_is_constant():
    from sphr.survival import cox_efron

    c = _cohort(n=200)
    assert cox_efron(c["time"], c["event"], np.column_stack([c["x"], np.ones(200)])) is None


def test_a_rows_crossfitted_predictor_never_reads_its_own_outcome():
    """Leakage: each fold's linear predictors come from Cox models fitted on the other folds,
    so rewriting one fold's follow-up times (the folds are drawn within events and non-events,
    so they stay) leaves that fold's predictors exactly as they were, and moves the others'."""
    from sphr.beyond_age import crossfit_predictors

    c = _cohort(n=600)
    lp_age, lp_both, fold = crossfit_predictors(c["time"], c["event"], c["age"], c["x"])
    held = fold == 0
    rng = np.random.default_rng(9)
    t = np.where(held, rng.uniform(0.1, 20, held.size), c["time"])
    lp_age2, lp_both2, fold2 = crossfit_predictors(t, c["event"], c["age"], c["x"])
    np.testing.assert_array_equal(fold2, fold)
    np.testing.assert_array_equal(lp_age2[held], lp_age[held])
    np.testing.assert_array_equal(lp_both2[held], lp_both[held])
    assert not np.allclose(lp_both2[~held], lp_both[~held])


def test_an_unknown_standardization_is_refused_by_name():
    from sphr.errors import ConfigError
    from sphr.risk.config import RiskConfig

    with pytest.raises(ConfigError, match="standardization 'median'"):
        RiskConfig(standardization="median").check()


def test_the_report_says_which_standardization_made_its_scores():
    from sphr.risk.calibration import STANDARDIZATION_TEXT
    from sphr.risk.report.tables import definitions

    assert set(STANDARDIZATION_TEXT) == set(STANDARDIZATIONS)
    for name in STANDARDIZATIONS:
        text = " ".join(definitions({"standardization": name,
                                     "tail_bound": "lognormal"}).split())
        assert STANDARDIZATION_TEXT[name] in text and f'standardization = "{name}"' in text
    # a summary without the setting comes from an older layout, refused before (no guess)
    with pytest.raises(KeyError):
        definitions({})


def test_age_standardized_risk_compares_groups_at_the_same_ages():
    """A young Lower Risk group at twice Normal's hazard has the lower crude risk, but the
    higher age-standardized one, as its age-adjusted hazard ratio says."""
    rng = np.random.default_rng(3)
    n = 4000
    age = rng.uniform(40, 73, n)
    young = age < 50
    group = np.where(young & (rng.uniform(size=n) < 0.5), "Lower Risk", "Normal")
    hazard = 0.004 * np.exp(0.09 * (age - 55)) * np.where(group == "Lower Risk", 2.0, 1.0)
    t_event, t_cens = rng.exponential(1 / hazard), rng.uniform(8, 15, n)
    time, event = np.minimum(t_event, t_cens), t_event <= t_cens
    table, _ = group_ordering(time, event, age, group.astype(object))
    by = table.set_index("group")
    assert by.loc["Lower Risk", "risk"] < by.loc["Normal", "risk"]
    assert by.loc["Lower Risk", "hr"] > 1
    assert by.loc["Lower Risk", "risk_age_standardized"] > by.loc["Normal",
                                                                  "risk_age_standardized"]
    # too few in Higher Risk: no standardized risk either
    assert np.isnan(by.loc["Higher Risk", "risk_age_standardized"])
    # everyone in one group: the standardized risk is that group's own, close to Kaplan-Meier
    one = np.full(n, "Normal", dtype=object)
    alone, _ = group_ordering(time, event, age, one)
    row = alone.set_index("group").loc["Normal"]
    assert row["risk_age_standardized"] == pytest.approx(row["risk"], abs=0.01)
