"""Validation on linked outcomes: C-index, td-AUROC, hazard ratio, cumulative incidence.

The estimators themselves are tested in tests/test_survival.py."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sphr.risk.validation.linked import GROUP_COLOURS, linked_validation, plot_cumulative_incidence
from sphr.survival import hazard_ratio

#: lifelines iterated to the maximum (its default stops ~1e-4 short of it in relative
#: terms on some frames; sphr.survival.cox_efron goes to a gradient of ~1e-12)
TIGHT = {"precision": 1e-12, "max_steps": 200}


def _constructed(n=3000, hr=3.0, seed=0):
    """Higher Risk has ``hr`` times the hazard; administrative censoring at 12 years."""
    rng = np.random.default_rng(seed)
    higher = rng.random(n) < 0.2
    age = rng.integers(40, 70, n).astype(float)
    rate = 0.01 * np.where(higher, hr, 1.0) * np.exp(0.03 * (age - 55))
    t = rng.exponential(1 / rate)
    event = t <= 12
    return np.minimum(t, 12), event, higher, age


def test_hazard_ratio_on_a_constructed_example():
    t, e, higher, age = _constructed()
    hr, low, high, p = hazard_ratio(t, e, higher, age)
    assert 2.3 < hr < 3.9 and low > 1.5 and low < hr < high and p < 1e-6
    # the same as lifelines on the full data (the risk-set compression changes nothing)
    from lifelines import CoxPHFitter

    frame = pd.DataFrame({"time": t, "event": e.astype(int), "higher": higher.astype(float),
                          "age": age})
    ref = CoxPHFitter().fit(frame, "time", "event", fit_options=TIGHT).summary.loc["higher"]
    assert hr == pytest.approx(ref["exp(coef)"], rel=1e-6)
    assert low == pytest.approx(ref["exp(coef) lower 95%"], rel=1e-6)
    assert p == pytest.approx(ref["p"], rel=1e-4, abs=1e-300)


def _frames(n=1200, seed=1):
    """Scores of two methods (one informative) and outcomes for two sexes."""
    t_cvd, e_cvd, higher, age = _constructed(n, hr=4.0, seed=seed)
    rng = np.random.default_rng(seed + 100)  # not the stream that drew ``higher``
    # death is an outcome of its own and ends the follow-up of the other
    death = rng.exponential(1 / (0.015 * np.where(higher, 2.0, 1.0)))
    t = np.minimum(t_cvd, death)
    e = e_cvd & (t_cvd <= death)
    death_t = np.minimum(death, 12.0)
    eid = np.arange(1, n + 1)
    sex = np.where(rng.random(n) < 0.5, "female", "male")
    good = higher * 1.5 + rng.standard_normal(n) * 0.5
    noise = rng.standard_normal(n)
    rows = []
    for method, score in (("good", good), ("noise", noise)):
        q80, q95 = np.quantile(score, [0.8, 0.95])
        group = np.where(score > q95, "Higher Risk", np.where(score > q80, "Lower Risk",
                                                              "Normal"))
        if method == "good":  # the grouping that matches the hazard
            group = np.where(higher, "Higher Risk", "Normal")
        rows.append(pd.DataFrame({"eid": eid, "sex": sex, "method": method, "score": score,
                                  "group": group, "age_years": age}))
    rows.append(pd.DataFrame({"eid": eid, "sex": sex, "method": "ungrouped", "score": good,
                              "group": None, "age_years": age}))
    scores = pd.concat(rows, ignore_index=True)
    prevalent = rng.random(n) < 0.05
    outcomes = pd.concat([
        pd.DataFrame({"eid": eid, "outcome": "cardiovascular", "event": e.astype(np.int8),
                      "time_years": t, "prevalent": prevalent}),
        pd.DataFrame({"eid": eid, "outcome": "death", "event": (death_t < 12).astype(np.int8),
                      "time_years": death_t, "prevalent": False}),
    ], ignore_index=True)
    return scores, outcomes, prevalent


@pytest.fixture(scope="module")
def validation():
    scores, outcomes, prevalent = _frames()
    return linked_validation(scores, outcomes, n_bootstrap=100, seed=4), scores, outcomes, \
        prevalent


def test_tables_and_columns(validation):
    res, scores, _, prevalent = validation
    disc, hrs, inc = res["discrimination"], res["hazard_ratio"], res["cumulative_incidence"]
    for col in ("sex", "method", "outcome", "n", "events", "c_index", "c_index_low",
                "c_index_high", "auroc_5y", "auroc_5y_low", "auroc_5y_high", "auroc_10y",
                "auroc_10y_low", "auroc_10y_high"):
        assert col in disc.columns
    assert list(hrs.columns) == ["sex", "method", "outcome", "n", "events_normal", "n_normal",
                                 "events_higher", "n_higher", "hr", "hr_low", "hr_high", "p",
                                 "events_outside", "n_outside", "hr_outside", "hr_outside_low",
                                 "hr_outside_high", "p_outside"]
    for col in ("sex", "method", "outcome", "group", "time_years", "cum_inc", "low", "high"):
        assert col in inc.columns
    assert len(disc) == 2 * 3 * 2  # sexes x methods x outcomes
    # a method without groups is discriminated, never grouped
    assert "ungrouped" in set(disc["method"]) and "ungrouped" not in set(hrs["method"])
    # prevalent cases of an outcome are left out of that outcome only
    female = scores.loc[(scores["method"] == "good") & (scores["sex"] == "female"), "eid"]
    n_cvd = int((~prevalent[female.to_numpy() - 1]).sum())
    row = disc.query("sex == 'female' and method == 'good'").set_index("outcome")
    assert row.loc["cardiovascular", "n"] == n_cvd and row.loc["death", "n"] == len(female)


def test_discrimination_and_intervals(validation):
    res = validation[0]
    disc = res["discrimination"].set_index(["sex", "method", "outcome"])
    for sex in ("female", "male"):
        good, noise = disc.loc[(sex, "good", "cardiovascular")], disc.loc[
            (sex, "noise", "cardiovascular")]
        assert good["c_index"] > 0.56 and abs(noise["c_index"] - 0.5) < 0.06
        for metric in ("c_index", "auroc_5y", "auroc_10y"):
            assert good[f"{metric}_low"] < good[metric] < good[f"{metric}_high"]
        assert good["auroc_5y"] > noise["auroc_5y"] + 0.05


def test_hazard_ratio_and_incidence_by_group(validation):
    res = validation[0]
    hrs = res["hazard_ratio"].set_index(["sex", "method", "outcome"])
    for sex in ("female", "male"):
        row = hrs.loc[(sex, "good", "cardiovascular")]
        assert row["hr"] > 2 and row["hr_low"] > 1 and row["p"] < 1e-3
        assert row["n"] == row["n_normal"] + row["n_higher"]
    inc = res["cumulative_incidence"]
    cvd = inc.query("sex == 'female' and method == 'good' and outcome == 'cardiovascular'")
    at10 = cvd.loc[cvd["time_years"] == 10.0].set_index("group")["cum_inc"]
    assert at10["Higher Risk"] > 2 * at10["Normal"]
    for _, g in cvd.groupby("group"):
        assert (np.diff(g.sort_values("time_years")["cum_inc"]) >= -1e-12).all()
        assert ((g["low"] <= g["cum_inc"] + 1e-12).all()
                and (g["cum_inc"] <= g["high"] + 1e-12).all())
    assert (cvd["time_years"] <= 12).all()  # nothing beyond the last follow-up


def test_same_seed_same_tables():
    scores, outcomes, _ = _frames(400, seed=2)
    a = linked_validation(scores, outcomes, n_bootstrap=30, seed=1)
    b = linked_validation(scores, outcomes, n_bootstrap=30, seed=1)
    c = linked_validation(scores, outcomes, n_bootstrap=30, seed=2)
    for k in a:
        pd.testing.assert_frame_equal(a[k], b[k])
    assert not a["discrimination"]["c_index_low"].equals(c["discrimination"]["c_index_low"])
    # the point estimates do not depend on the resamples
    pd.testing.assert_series_equal(a["discrimination"]["c_index"],
                                   c["discrimination"]["c_index"])


def test_competing_risk_lowers_the_incidence():
    scores, outcomes, _ = _frames(600, seed=3)
    km = linked_validation(scores, outcomes, n_bootstrap=10, horizons=(5.0,))
    aj = linked_validation(scores, outcomes, n_bootstrap=10, horizons=(5.0,),
                           competing_risk=True)
    k = km["cumulative_incidence"].query("outcome == 'cardiovascular'")
    a = aj["cumulative_incidence"].query("outcome == 'cardiovascular'")
    # Aalen-Johansen wherever a group has a death before its event (else the two agree)
    assert "aalen_johansen" in set(a["estimator"]) and set(k["estimator"]) == {"kaplan_meier"}
    merged = k.merge(a, on=["sex", "method", "group", "time_years"], suffixes=("_km", "_aj"))
    assert (merged["cum_inc_aj"] <= merged["cum_inc_km"] + 1e-3).all()
    # death itself has no competing risk
    d = aj["cumulative_incidence"].query("outcome == 'death'")
    assert set(d["estimator"]) == {"kaplan_meier"}


def test_too_few_events_is_not_estimated():
    scores, outcomes, _ = _frames(200, seed=4)
    outcomes = outcomes.assign(event=np.where(outcomes.index % 50 == 0, outcomes["event"], 0))
    res = linked_validation(scores, outcomes, n_bootstrap=10, min_events=5)
    assert res["discrimination"]["c_index"].isna().all()
    assert res["hazard_ratio"]["hr"].isna().all()


def test_missing_columns_are_named():
    from sphr.errors import InputError

    scores, outcomes, _ = _frames(100)
    with pytest.raises(InputError, match="age_years"):
        linked_validation(scores.drop(columns="age_years"), outcomes)


def test_plot(validation):
    import matplotlib

    res = validation[0]
    fig = plot_cumulative_incidence(res["cumulative_incidence"], "female", "cardiovascular",
                                    ["good", "noise"])
    assert isinstance(fig, matplotlib.figure.Figure)
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert len(axes) == 2
    assert axes[0].get_xlabel() == "Years since baseline"
    assert axes[0].get_ylabel() == "Cumulative incidence (%)"
    colours = {matplotlib.colors.to_hex(line.get_color()) for line in axes[0].get_lines()}
    assert colours == {GROUP_COLOURS["Normal"], GROUP_COLOURS["Higher Risk"]}
    from sphr.plots import to_png

    assert to_png(fig)[:4] == b"\x89PNG"
