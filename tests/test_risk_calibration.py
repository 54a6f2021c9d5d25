"""Out-of-sample risk: conformal bounds, the calibration partition, discrimination metrics."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sphr.risk.calibration import (
    AgeStandardizer,
    calibrated_groups,
    conformal_rank,
    upper_bound,
)
from sphr.risk.intervals import HIGHER_RISK, LOWER_RISK, NORMAL
from sphr.risk.validation.discrimination import auroc, auroc_rows, discrimination, risk_ratio
from sphr.risk.validation.groups import holm
from sphr.survival import c_index

# ----------------------------------------------------------------------------- conformal bounds


def test_conformal_rank_and_fallback():
    assert conformal_rank(19, 0.95) == 19 and conformal_rank(18, 0.95) == 19
    assert conformal_rank(99, 0.99) == 99 and conformal_rank(40, 0.99) == 41
    s = np.arange(1.0, 41.0)
    b = upper_bound(s, 0.95)
    assert (b.method, b.value) == ("conformal", 39.0)  # ceil(41 * 0.95) = 39th smallest
    assert upper_bound(s, 0.99).method == "lognormal"
    assert upper_bound(s, 0.99).value > 40.0


def test_split_conformal_coverage_on_a_simulated_example():
    """Held-out reference people land at or below the 95% bound 95% of the time (averaged over
    calibration draws: the guarantee is marginal), and not far above it."""
    rng = np.random.default_rng(0)
    n_cal, reps = 40, 2000
    cal = rng.gamma(3.0, size=(reps, n_cal))
    new = rng.gamma(3.0, size=(reps, 200))
    bounds = np.array([upper_bound(c, 0.95).value for c in cal])
    coverage = (new <= bounds[:, None]).mean()
    # theory: k / (n + 1) = 39 / 41 = 0.951; Monte Carlo SE ~ 0.001
    assert coverage == pytest.approx(39 / 41, abs=0.006)


def test_lognormal_fallback_covers_roughly_its_level():
    rng = np.random.default_rng(1)
    cal = rng.lognormal(1.0, 0.5, size=(500, 40))
    new = rng.lognormal(1.0, 0.5, size=(500, 400))
    bounds = np.array([upper_bound(c, 0.99).value for c in cal])
    assert 0.975 < (new <= bounds[:, None]).mean() < 0.998


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(-50, 50, allow_nan=False), min_size=1, max_size=40),
       st.floats(-10, 10), st.floats(0, 10))
def test_calibrated_groups_are_one_sided_and_ordered(s, normal, extra):
    s = np.array(s)
    g = calibrated_groups(s, normal, normal + extra)
    assert set(g) <= {NORMAL, LOWER_RISK, HIGHER_RISK}
    assert (g[s <= normal] == NORMAL).all()  # nobody below the bound is at risk
    assert (g[s > normal + extra] == HIGHER_RISK).all()


def test_age_standardizer_pools_small_groups():
    scores = np.r_[np.full(5, 10.0), np.arange(40.0)]
    groups = np.array(["36-45"] * 5 + ["46-50"] * 40, dtype=object)
    std = AgeStandardizer(["36-45", "46-50"], min_group_size=30).fit(scores, groups)
    assert std.pooled_["36-45"] == ["36-45", "46-50"] and std.pooled_["46-50"] == ["46-50"]
    assert std.center_["46-50"] == pytest.approx(19.5)
    z = std.transform(np.array([19.5]), np.array(["46-50"], dtype=object))
    assert z[0] == pytest.approx(0.0)


# ----------------------------------------------------------------------------- leakage


def test_calibration_partition_never_reaches_a_fit(cohorts_dir):
    """Calibration people are disjoint from training and test, are 20% of the training healthy
    classes, and neither the normalizer nor the triplets see them."""
    from sphr.artifacts import load_cohort
    from sphr.cohorts.normalize import QuantileNormalizer
    from sphr.cohorts.triplets import read_triplets

    for sex in ("female", "male"):
        c = load_cohort(cohorts_dir / sex)
        cal, train, test = (set(c.calibration["eid"]), set(c.train["eid"]), set(c.test["eid"]))
        assert cal and not cal & train and not cal & test
        assert set(c.calibration["label"]) <= {1, 2} and not c.calibration["augmented"].any()
        real = c.train[~c.train["augmented"]]
        for label in (1, 2):
            share = (c.calibration["label"] == label).sum() / (
                (c.calibration["label"] == label).sum() + (real["label"] == label).sum())
            assert share == pytest.approx(0.2, abs=0.03)
        # the saved normalizer is the one fitted on the real training rows alone
        raw = pd.read_parquet(cohorts_dir / sex / "train_raw.parquet")
        raw = raw[~raw["augmented"]]
        saved = QuantileNormalizer.load(cohorts_dir / sex / "normalizer.json")
        refit = QuantileNormalizer(saved.n_quantiles).fit(raw[c.features].to_numpy(float),
                                                          features=c.features)
        assert np.allclose(saved.quantiles_, refit.quantiles_)
        trip = read_triplets(cohorts_dir / sex / "triplets.npz", len(c.train))
        assert trip.max() < len(c.train)  # indices into train.parquet only


def test_calibration_rows_set_bounds_only(cohorts_dir):
    """Moving the calibration BFH changes the bounds and nothing that was fitted."""
    from sphr.artifacts import load_cohort
    from sphr.risk.distance import DistanceModel

    c = load_cohort(cohorts_dir / "female")
    far = c.calibration.copy()
    far[c.features] = far[c.features] + 3.0
    for method in ("raw_euclidean", "mahalanobis", "homeostatic_dysregulation"):
        a = DistanceModel(method, "calibrated", c.features).fit(c.train, c.calibration)
        b = DistanceModel(method, "calibrated", c.features).fit(c.train, far)
        for g in a.strata_:
            assert a.strata_[g]["reference"] == b.strata_[g]["reference"]
        assert a.standardizer_.to_dict() == b.standardizer_.to_dict()
        if hasattr(a.space_, "L_"):
            assert np.array_equal(a.space_.L_, b.space_.L_)
        assert b.bounds_.normal.value != a.bounds_.normal.value


def test_supervised_scores_are_cross_fitted():
    """A training person's score comes from a model that never saw their outcome: flipping
    their outcome leaves their own score unchanged; test outcomes are never used."""
    from sphr.risk.supervised import supervised_scores

    rng = np.random.default_rng(0)
    n = 400
    people = pd.DataFrame(rng.normal(size=(n, 3)), columns=["a", "b", "c"])
    people["eid"] = np.arange(1, n + 1)
    people["partition"] = np.where(np.arange(n) < 300, "train", "test")
    y = pd.Series((people["a"] + rng.normal(size=n) > 0.5).to_numpy(), index=people["eid"])
    base = supervised_scores(people, ["a", "b", "c"], y, seed=0)
    # test outcomes are never used: flipping them changes nothing
    flipped = y.copy()
    flipped.iloc[300:] = ~flipped.iloc[300:]
    assert np.array_equal(base, supervised_scores(people, ["a", "b", "c"], flipped, seed=0))
    # a training person's own outcome does not reach their own score
    own = y.copy()
    own.iloc[7] = not own.iloc[7]
    assert supervised_scores(people, ["a", "b", "c"], own, seed=0)[7] == pytest.approx(base[7])
    assert np.corrcoef(base[300:], people["a"].to_numpy()[300:])[0, 1] > 0.5


# ----------------------------------------------------------------------------- metrics


def test_auroc_and_c_index_hand_computed():
    score = np.array([0.1, 0.4, 0.35, 0.8])
    y = np.array([0, 0, 1, 1])
    # pairs (pos, neg): (0.35, 0.1) ok, (0.35, 0.4) wrong, (0.8, *) ok -> 3 / 4
    assert auroc_rows(score, y)[0] == pytest.approx(0.75)
    assert np.isnan(auroc_rows(score, np.zeros(4))[0])
    assert auroc(y, score) == pytest.approx(0.75)
    # the vectorized bootstrap rows agree with scikit-learn's roc_auc_score, ties included
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(3)
    S, Y = rng.integers(0, 5, size=(20, 60)).astype(float), rng.random((20, 60)) < 0.3
    np.testing.assert_allclose(auroc_rows(S, Y),
                               [roc_auc_score(yy, ss) for ss, yy in zip(S, Y, strict=True)])
    # C: events at t=1 (score 5), t=3 (score 1); censored t=2 (score 2), t=4 (score 3)
    time, event = np.array([1.0, 2.0, 3.0, 4.0]), np.array([1, 0, 1, 0], bool)
    s = np.array([5.0, 2.0, 1.0, 3.0])
    # comparable pairs: (1,2) ok, (1,3) ok, (1,4) ok, (3,4) wrong -> 3 / 4
    assert c_index(time, event, s) == pytest.approx(0.75)


def test_holm_and_risk_ratio_known_values():
    adj = holm(np.array([0.01, 0.04, 0.03, np.nan]))
    assert adj[:3] == pytest.approx([0.03, 0.06, 0.06]) and np.isnan(adj[3])
    rr, lo, hi = risk_ratio(10, 50, 5, 100)
    assert rr == pytest.approx(4.0)
    se = np.sqrt(1 / 10 - 1 / 50 + 1 / 5 - 1 / 100)
    assert (lo, hi) == pytest.approx((4 * np.exp(-1.96 * se), 4 * np.exp(1.96 * se)))


def test_discrimination_on_a_constructed_cohort():
    """A score that drives the outcome has AUROC and C-index well above 0.5, and beats a noise
    score in the paired bootstrap."""
    rng = np.random.default_rng(2)
    n = 600
    eid = np.arange(1, n + 1)
    risk = rng.normal(size=n)
    new = rng.random(n) < 1 / (1 + np.exp(-(2 * risk - 2)))
    rows = pd.concat([
        pd.DataFrame({"eid": eid, "sex": "female", "method": "sphr", "mode": "calibrated",
                      "score": risk, "group": np.where(risk > 1, HIGHER_RISK, NORMAL)}),
        pd.DataFrame({"eid": eid, "sex": "female", "method": "raw_euclidean",
                      "mode": "calibrated", "score": rng.normal(size=n), "group": NORMAL})])
    fu = pd.DataFrame({"eid": eid, "instance": 1, "years_since_baseline": 4.5,
                       "new_cancer": new, "new_diabetes": False, "new_other_serious": False})
    d = discrimination(rows, fu, n_bootstrap=200, seed=0).set_index(["method", "outcome"])
    good = d.loc[("sphr", "any")]
    assert good["auroc"] > 0.7 and good["auroc_low"] > 0.6 and good["c_index"] > 0.65
    assert good["auroc_minus_raw"] > 0.1 and good["diff_low"] > 0 and good["p_diff"] < 0.05
    assert good["rr_higher_vs_normal"] > 1.5 and good["rr_low"] > 1
    assert d.loc[("raw_euclidean", "any"), "auroc_low"] < 0.5 < d.loc[("raw_euclidean", "any"),
                                                                       "auroc_high"]
    assert d.loc[("sphr", "any"), "n"] == n


def test_summary_sentences_follow_the_numbers():
    from sphr.risk.report import summary_sentences

    heldout = pd.DataFrame({"sex": "female", "method": ["sphr", "raw_euclidean"],
                            "mode": "calibrated", "partition": "test", "n": 80,
                            "normal_share": [0.9, 0.975]})
    disc = pd.DataFrame({"sex": "female", "method": ["sphr", "raw_euclidean"], "outcome": "any",
                         "n": 300, "events": 30, "auroc": [0.71, 0.6],
                         "auroc_low": [0.62, 0.45], "auroc_high": [0.8, 0.7]})
    text = " ".join(summary_sentences(disc, heldout))
    assert "90-98% land in Normal" in text and "SPHR at 0.71" in text
    assert "lies above chance: SPHR." in text
    disc.loc[0, ["auroc", "auroc_low"]] = [0.55, 0.41]
    text = " ".join(summary_sentences(disc, heldout))
    assert "Euclidean (raw) at 0.60" in text and "No method's 95% interval" in text


def test_vectorized_bootstrap_c_index_equals_lifelines():
    from lifelines.utils import concordance_index

    from sphr.survival import c_index_weighted, resample_counts

    rng = np.random.default_rng(5)
    n = 40
    time = rng.integers(1, 6, size=n).astype(float)  # many tied times on purpose
    event = rng.random(n) < 0.5
    score = rng.integers(0, 4, size=n).astype(float)  # and tied scores
    counts = resample_counts(rng, n, 30)
    fast = c_index_weighted(time, event, score, counts)
    for b in range(30):
        idx = np.repeat(np.arange(n), counts[b])
        assert counts[b].sum() == n
        try:
            slow = concordance_index(time[idx], -score[idx], event[idx])
        except ZeroDivisionError:
            assert np.isnan(fast[b])
            continue
        assert fast[b] == pytest.approx(slow, abs=1e-12)
