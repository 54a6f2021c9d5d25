"""sphr.survival: each estimator against lifelines, by hand, and its invariants (hypothesis)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sphr.survival import (
    CensoringKM,
    auroc_td_weighted,
    brier_weighted,
    c_index,
    c_index_weighted,
    cox_wald,
    cumulative_incidence,
    hazard_ratio,
    kaplan_meier,
    km_cumulative,
    km_curve,
    resample_counts,
)

# six people: events at 1, 3, 4; censored at 2, 5, 6
T = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
E = np.array([1, 0, 1, 1, 0, 0], bool)
S = np.array([0.9, 0.5, 0.3, 0.2, 0.4, 0.1])

#: lifelines iterated to the maximum (its default stops ~1e-4 short of it in relative
#: terms on some frames; sphr.survival.cox_efron goes to a gradient of ~1e-12)
TIGHT = {"precision": 1e-12, "max_steps": 200}


def test_c_index_by_hand():
    # comparable pairs start at an event and reach everyone still at risk after it:
    # t=1 (0.9) beats all 5; t=3 (0.3) beats 0.2 and 0.1, not 0.4; t=4 (0.2) beats 0.1, not 0.4
    assert c_index_weighted(T, E, S, np.ones(6))[0] == pytest.approx(8 / 10)
    from lifelines.utils import concordance_index

    assert concordance_index(T, -S, E) == pytest.approx(0.8)


def test_td_auroc_by_hand():
    # horizon 3.5: cases t=1 and t=3, controls t=4, 5, 6. The censoring at t=2 leaves
    # G(3-) = 4/5, so the case at t=3 weighs 1/G = 1.25; it beats 2 of 3 controls, t=1 all 3
    auc = auroc_td_weighted(T, E, S, 3.5, np.ones(6))[0]
    assert auc == pytest.approx((1 * 3 + 1.25 * 2) / ((1 + 1.25) * 3))
    # without weights it would be 5/6: the weighting is what the test checks
    assert auc != pytest.approx(5 / 6)
    # a horizon with no case, or no control, is not estimated
    assert np.isnan(auroc_td_weighted(T, E, S, 0.5, np.ones(6))[0])
    assert np.isnan(auroc_td_weighted(T, E, S, 6.0, np.ones(6))[0])


def test_weights_are_resamples():
    """A row of multiplicities gives what lifelines / the unweighted formula give on the
    resampled rows themselves (ties in time and score included)."""
    from lifelines.utils import concordance_index

    rng = np.random.default_rng(3)
    n = 300
    t = np.round(rng.exponential(5, n), 1)
    e = rng.random(n) < 0.4
    s = np.round(rng.standard_normal(n), 1) - 0.2 * t
    counts = resample_counts(rng, n, 5)
    c = c_index_weighted(t, e, s, counts)
    auc = auroc_td_weighted(t, e, s, 4.0, counts)
    assert c_index_weighted(t, e, s, np.ones(n))[0] == pytest.approx(
        concordance_index(t, -s, e))
    for b in range(5):
        idx = np.repeat(np.arange(n), counts[b].astype(int))
        assert c[b] == pytest.approx(concordance_index(t[idx], -s[idx], e[idx]))
        assert auc[b] == pytest.approx(
            auroc_td_weighted(t[idx], e[idx], s[idx], 4.0, np.ones(idx.size))[0])


def test_kaplan_meier_matches_lifelines():
    from lifelines import KaplanMeierFitter

    rng = np.random.default_rng(5)
    t = np.round(rng.exponential(8, 400), 1)
    e = rng.random(400) < 0.5
    grid = np.arange(0, 10.5, 0.5)
    est, low, high = kaplan_meier(t, e, grid)
    fit = KaplanMeierFitter().fit(t, e)
    surv = fit.survival_function_at_times(grid).to_numpy()
    ci = fit.confidence_interval_survival_function_
    k = np.searchsorted(ci.index.to_numpy(), grid, side="right") - 1
    np.testing.assert_allclose(est, 1 - surv, atol=1e-12)
    np.testing.assert_allclose(low, 1 - ci.iloc[k, 1].to_numpy(), atol=1e-9)
    np.testing.assert_allclose(high, 1 - ci.iloc[k, 0].to_numpy(), atol=1e-9)




def test_cumulative_incidence_beyond_follow_up_is_nan():
    est, low, high, name = cumulative_incidence(T, E, np.array([0.0, 3.0, 7.0]))
    assert name == "kaplan_meier" and np.isnan(est[2]) and est[0] == 0
    assert est[1] == pytest.approx(1 - (5 / 6) * (3 / 4))
    assert np.isnan(low[2]) and np.isnan(high[2]) and low[1] < est[1] < high[1]


def _data(n: int = 400, seed: int = 7, ties: bool = True):
    """Times (rounded: tied), events, a score related to the time, ages."""
    rng = np.random.default_rng(seed)
    t = rng.exponential(8, n)
    t = np.round(t, 1) + 0.1 if ties else t  # + 0.1: no time 0 unless a test wants one
    e = rng.random(n) < 0.5
    s = rng.standard_normal(n) - 0.15 * t
    return t, e, s, rng.uniform(40, 70, n)


def test_km_curve_is_lifelines_at_the_event_times():
    from lifelines import KaplanMeierFitter

    t, e, _, _ = _data()
    curve = km_curve(t, e, min_at_risk=1)
    fit = KaplanMeierFitter().fit(t, e)
    at = curve["time_years"].to_numpy()
    np.testing.assert_allclose(curve["cum_inc"], 1 - fit.survival_function_at_times(at),
                               atol=1e-12)
    ci = fit.confidence_interval_survival_function_
    k = np.searchsorted(ci.index.to_numpy(), at, side="right") - 1
    band = curve["low"].notna().to_numpy()  # NaN where S is 1 (a band of width 0)
    np.testing.assert_allclose(curve["low"][band], 1 - ci.iloc[k[band], 1], atol=1e-9)
    np.testing.assert_allclose(curve["high"][band], 1 - ci.iloc[k[band], 0], atol=1e-9)
    assert at[0] == 0 and at[-1] == t.max()  # from 0 to the end of follow-up


def test_km_curve_stops_where_few_are_followed():
    t, e, _, _ = _data(60)
    curve = km_curve(t, e, min_at_risk=5)
    assert curve["time_years"].max() == np.sort(t)[-5]
    assert km_curve(t[:0], e[:0])["cum_inc"].tolist() == [0.0]


def test_km_cumulative_is_kaplan_meier_at_one_time():
    t, e, _, _ = _data()
    for h in (0.0, 1.0, 5.0, 100.0):
        assert km_cumulative(t, e, h) == kaplan_meier(t, e, np.array([h]))[0][0]
    assert np.isnan(km_cumulative(t[:0], e[:0], 10.0))


def test_aalen_johansen_matches_lifelines():
    """With a competing event: lifelines' AalenJohansenFitter's estimate and interval at the
    grid; below Kaplan-Meier, which counts the competing events as censorings."""
    from lifelines import AalenJohansenFitter

    t, e, _, _ = _data(500, ties=False)  # no tied times: lifelines does not jitter
    competing = ~e & (np.random.default_rng(1).random(t.size) < 0.4)
    grid = np.arange(0.0, 20.0, 1.0)
    est, low, high, name = cumulative_incidence(t, e, grid, competing=competing)
    assert name == "aalen_johansen"
    code = np.where(e, 1, np.where(competing, 2, 0))
    fit = AalenJohansenFitter(seed=0).fit(t, code, event_of_interest=1)
    ref = fit.cumulative_density_.iloc[:, 0]
    k = np.searchsorted(ref.index.to_numpy(), grid, side="right") - 1
    np.testing.assert_allclose(est, ref.to_numpy()[k], atol=1e-12)
    ci = fit.confidence_interval_.to_numpy()[k]
    np.testing.assert_allclose(low, np.nan_to_num(ci.min(axis=1)), atol=1e-12)
    np.testing.assert_allclose(high, np.nan_to_num(ci.max(axis=1)), atol=1e-12)
    km, _, _, km_name = cumulative_incidence(t, e, grid)
    assert km_name == "kaplan_meier" and (est <= km + 1e-12).all() and est[-1] < km[-1]


def test_censoring_km_is_lifelines_on_the_censorings():
    """G(t-): the Kaplan-Meier of the censorings just before t, for each row of weights."""
    from lifelines import KaplanMeierFitter

    t, e, _, _ = _data(300, ties=False)
    q = np.quantile(t, [0.1, 0.5, 0.9])
    g = CensoringKM(t, e, np.ones((1, t.size))).before(q)[0]
    ref = KaplanMeierFitter().fit(t, ~e).survival_function_at_times(q - 1e-9).to_numpy()
    np.testing.assert_allclose(g, ref, atol=1e-12)
    counts = resample_counts(np.random.default_rng(2), t.size, 3)
    for b in range(3):
        idx = np.repeat(np.arange(t.size), counts[b])
        expected = KaplanMeierFitter().fit(t[idx], ~e[idx]).survival_function_at_times(q - 1e-9)
        np.testing.assert_allclose(CensoringKM(t, e, counts).before(q)[b], expected, atol=1e-12)


def test_td_auroc_by_hand_with_a_tie():
    # as test_td_auroc_by_hand, but the control at t=4 has the score of the case at t=3:
    # that pair counts 1/2, so the case at t=3 (weight 1.25) scores 1.5 of 3
    s = S.copy()
    s[3] = 0.3
    auc = auroc_td_weighted(T, E, s, 3.5, np.ones(6))[0]
    assert auc == pytest.approx((1 * 3 + 1.25 * 1.5) / ((1 + 1.25) * 3))


def test_c_index_is_c_index_weighted_with_unit_weights():
    t, e, s, _ = _data()
    assert c_index(t, e, s) == pytest.approx(c_index_weighted(t, e, s, np.ones(t.size))[0],
                                             abs=1e-12)
    assert np.isnan(c_index(t, np.zeros(t.size, bool), s))
    assert np.isnan(c_index_weighted(t, np.zeros(t.size, bool), s, np.ones(t.size))[0])


def test_resample_counts():
    counts = resample_counts(np.random.default_rng(0), 50, 20)
    assert counts.shape == (20, 50) and (counts.sum(axis=1) == 50).all() and counts.min() >= 0
    np.testing.assert_array_equal(counts, resample_counts(np.random.default_rng(0), 50, 20))


def test_cox_wald_is_lifelines_summary():
    from lifelines import CoxPHFitter

    t, e, s, age = _data(600)
    x = (s > 0).astype(float)
    got = cox_wald(t, e, {"x": x, "age": age})
    ref = CoxPHFitter().fit(pd.DataFrame({"time": t, "event": e.astype(int), "x": x,
                                          "age": age}), "time", "event",
                                         fit_options=TIGHT).summary
    # cox_efron iterates to the maximum (gradient ~1e-12); lifelines stops a little before it,
    # so the two agree to about 1e-7 here, not to the last digit
    for name in ("x", "age"):
        hr, low, high, p = got[name]
        assert hr == pytest.approx(ref.loc[name, "exp(coef)"], rel=1e-6)
        assert low == pytest.approx(ref.loc[name, "exp(coef) lower 95%"], rel=1e-6)
        assert high == pytest.approx(ref.loc[name, "exp(coef) upper 95%"], rel=1e-6)
        assert p == pytest.approx(ref.loc[name, "p"], rel=1e-5, abs=1e-12)


def test_hazard_ratio_keeps_an_event_at_time_zero():
    """The risk-set compression is the full-data fit, an event at time 0 included."""
    from lifelines import CoxPHFitter

    t, e, s, age = _data(300)
    t[:3], e[:3] = 0.0, True
    x = (s > 0.5).astype(float)
    ref = CoxPHFitter().fit(pd.DataFrame({"time": t, "event": e.astype(int), "exposure": x,
                                          "age": age}), "time", "event",
                                         fit_options=TIGHT).summary
    assert hazard_ratio(t, e, x, age)[0] == pytest.approx(ref.loc["exposure", "exp(coef)"],
                                                          rel=1e-7)


def test_cox_without_contrast_is_nan():
    t, e, _, age = _data(200)
    assert np.isnan(hazard_ratio(t, e, np.zeros(t.size), age)).all()
    assert np.isnan(cox_wald(t, e, {"x": np.ones(t.size)})["x"]).all()
    # constant age: the unadjusted hazard ratio (age cannot be estimated)
    x = (np.arange(t.size) % 3 == 0).astype(float)
    assert hazard_ratio(t, e, x, np.full(t.size, 50.0))[0] == pytest.approx(
        cox_wald(t, e, {"x": x})["x"][0])


# --------------------------------------------------------------------------- invariants
def _survival_data(draw, n_min: int = 2, n_max: int = 40):
    n = draw(st.integers(n_min, n_max))
    t = np.array(draw(st.lists(st.integers(0, 12), min_size=n, max_size=n)), float)
    e = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    return t, e


@st.composite
def survival_with_distinct_scores(draw):
    t, e = _survival_data(draw)
    s = np.array(draw(st.permutations(range(t.size))), float)  # no score ties
    w = np.array(draw(st.lists(st.integers(0, 3), min_size=t.size, max_size=t.size)), float)
    return t, e, s, w


@settings(max_examples=80, deadline=None)
@given(survival_with_distinct_scores())
def test_c_of_the_negated_score_is_one_minus_c(data):
    t, e, s, w = data
    weights = np.vstack([np.ones(t.size), w])
    c, c_neg = c_index_weighted(t, e, s, weights), c_index_weighted(t, e, -s, weights)
    both = np.isfinite(c)
    np.testing.assert_array_equal(both, np.isfinite(c_neg))  # the same comparable pairs
    np.testing.assert_allclose(c[both] + c_neg[both], 1.0, atol=1e-12)
    # and C depends on the order of the scores only
    np.testing.assert_array_equal(c, c_index_weighted(t, e, np.exp(s / t.size), weights))
    for h in (3.0, 8.0):
        a, a_neg = (auroc_td_weighted(t, e, s, h, weights),
                    auroc_td_weighted(t, e, -s, h, weights))
        ok = np.isfinite(a)
        np.testing.assert_allclose(a[ok] + a_neg[ok], 1.0, atol=1e-12)
        # in [0, 1] up to rounding: the IPCW sums can land a unit in the last place above 1
        assert ((a[ok] >= -1e-12) & (a[ok] <= 1 + 1e-12)).all()


@st.composite
def survival_data(draw):
    return _survival_data(draw, n_min=0)


@settings(max_examples=80, deadline=None)
@given(survival_data())
def test_kaplan_meier_is_a_cumulative_incidence(data):
    """1 - S is non-decreasing, in [0, 1], inside its interval; S is 1 before the first
    event; the curve and the grid agree."""
    t, e = data
    grid = np.arange(0.0, 14.0, 0.5)
    est, low, high = kaplan_meier(t, e, grid)
    assert ((est >= 0) & (est <= 1)).all() and (np.diff(est) >= -1e-15).all()
    assert (low <= est + 1e-12).all() and (est <= high + 1e-12).all()
    assert ((low >= 0) & (high <= 1)).all()
    if e.any():
        assert (est[grid < t[e].min()] == 0).all()
    curve = km_curve(t, e, min_at_risk=1)
    assert curve["cum_inc"].iloc[0] == 0 and (np.diff(curve["cum_inc"]) >= -1e-15).all()
    # after its starting point (0, 0), which comes before any event at time 0
    after = curve.iloc[1:]
    np.testing.assert_allclose(
        after["cum_inc"], kaplan_meier(t, e, after["time_years"].to_numpy())[0], atol=1e-15)


# four people, an event and a censoring tied at t=1: events at 1 and 2, censored at 1 and 3
T4 = np.array([1.0, 1.0, 2.0, 3.0])
E4 = np.array([1, 0, 1, 0], bool)


def test_censoring_km_takes_the_event_first_at_a_tie():
    """prodlim's reverse Kaplan-Meier (and scikit-survival's): the event at t=1 happens before
    the censoring at t=1, so only 3 people are at risk of it and G(1) = 1 - 1/3 = 2/3 (3/4 if
    the event stayed in the risk set). Nobody is censored at 2; the last censoring at 3 takes
    G to 0."""
    g = CensoringKM(T4, E4, np.ones((1, 4))).before(np.array([1.0, 1.5, 2.0, 2.5, 3.0, 3.5]))
    np.testing.assert_allclose(g[0], [1.0, 2 / 3, 2 / 3, 2 / 3, 2 / 3, 0.0], atol=1e-15)


def test_brier_of_the_tied_example_by_hand():
    """At 2.5, with G(1-) = 1 and G(2-) = G(2.5-) = 2/3:

    - event at 1: (1 - 0.5)^2 / G(1-) = 0.25 / 1     = 0.25
    - censored at 1: 0 (its weight goes to the others through G)
    - event at 2: (1 - 0.5)^2 / G(2-) = 0.25 / (2/3) = 0.375
    - followed past 2.5 (T = 3): 0.5^2 / G(2.5-)    = 0.375

    Brier = (0.25 + 0.375 + 0.375) / 4 = 0.25 exactly (0.229 with G(1) = 3/4). The IPCW
    weights are 1, 0, 1.5, 1.5 and sum to n = 4: a risk of 0 scores the cases' weights
    alone, a risk of 1 the controls', and the two make 1."""
    one = np.ones((1, 4))
    assert brier_weighted(T4, E4, np.full(4, 0.5), 2.5, one)[0] == pytest.approx(0.25, abs=1e-15)
    cases = brier_weighted(T4, E4, np.zeros(4), 2.5, one)[0]
    controls = brier_weighted(T4, E4, np.ones(4), 2.5, one)[0]
    assert cases == pytest.approx(2.5 / 4, abs=1e-15)
    assert controls == pytest.approx(1.5 / 4, abs=1e-15)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ipcw_weights_sum_to_n_on_tied_data(seed):
    """With the events-first rule the IPCW weights of cases (1 / G(T-)) and controls
    (1 / G(t-)) sum to n at any horizon (S(t) G(t) is the share still followed after t), for
    every row of multiplicities: Brier(risk 0) + Brier(risk 1) = 1, and Brier(risk 0) is the
    Kaplan-Meier cumulative incidence at t. Times are rounded to one decimal, so events and
    censorings tie often; the horizons fall between the times."""
    rng = np.random.default_rng(seed)
    n = 300
    t = np.round(rng.exponential(5, n), 1) + 0.1
    e = rng.random(n) < 0.5
    counts = np.vstack([np.ones(n), resample_counts(rng, n, 4)])
    zeros, ones = np.zeros(n), np.ones(n)
    for h in (1.05, 3.05, 6.05):
        cases = brier_weighted(t, e, zeros, h, counts)
        np.testing.assert_allclose(cases + brier_weighted(t, e, ones, h, counts), 1.0,
                                   atol=1e-12)
        for b in range(counts.shape[0]):
            idx = np.repeat(np.arange(n), counts[b].astype(int))
            assert cases[b] == pytest.approx(km_cumulative(t[idx], e[idx], h), abs=1e-12)
