"""Properties of the cohort step's pieces: normalizer, BFH rule, augmentation, triplets."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from sphr.cohorts import (
    P0_RANGES,
    QuantileNormalizer,
    assign_age_groups,
    bona_fide_mask,
    mine_triplets,
    rejection_sample,
)
from sphr.cohorts.ranges import MG_DL_PER_MMOL_L_GLUCOSE, with_overrides
from sphr.errors import ConfigError, InputError

finite = st.floats(-1e4, 1e4, allow_nan=False, allow_infinity=False)


@settings(max_examples=40, deadline=None)
@given(arrays(np.float64, st.tuples(st.integers(5, 300), st.integers(1, 4)), elements=finite))
def test_normalizer_is_monotone(X):
    norm = QuantileNormalizer(n_quantiles=100).fit(X)
    probe = np.sort(np.concatenate([X, X + 0.5, X - 1e3]), axis=0)
    Z = norm.transform(probe)
    assert np.isfinite(Z).all()
    assert (np.diff(Z, axis=0) >= 0).all()  # sorted input -> sorted output, per feature


def test_normalizer_gives_standard_normal_on_train():
    rng = np.random.default_rng(0)
    X = np.column_stack(
        [rng.lognormal(0, 1, 5000), rng.integers(40, 70, 5000), rng.normal(5, 2, 5000)]
    )
    Z = QuantileNormalizer().fit(X).transform(X)
    assert np.abs(Z.mean(axis=0)).max() < 0.05
    assert np.abs(Z[:, [0, 2]].std(axis=0) - 1).max() < 0.05
    # ties (integer ages) get mid-ranks: symmetric around 0, not pushed to one side
    assert abs(np.median(Z[:, 1])) < 0.1


def test_normalizer_save_load_and_shape_check(tmp_path):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(500, 3))
    norm = QuantileNormalizer().fit(X, features=["a", "b", "c"])
    norm.save(tmp_path / "n.json")
    again = QuantileNormalizer.load(tmp_path / "n.json")
    np.testing.assert_array_equal(norm.transform(X), again.transform(X))
    np.testing.assert_allclose(again.inverse_transform(again.transform(X)), X, atol=0.05)
    with pytest.raises(InputError, match="expected 3 features"):
        again.transform(X[:, :2])
    with pytest.raises(InputError, match="missing values"):
        QuantileNormalizer().fit(np.array([[1.0], [np.nan]]))


def test_normalizer_is_a_scikit_learn_estimator(tmp_path):
    from sklearn.base import clone
    from sklearn.preprocessing import QuantileTransformer

    norm = QuantileNormalizer(n_quantiles=50)
    assert norm.get_params() == {"n_quantiles": 50}
    assert not hasattr(norm, "quantiles_")  # fitted attributes only after fit
    with pytest.raises(ConfigError, match="not fitted"):
        norm.transform(np.zeros((2, 1)))
    rng = np.random.default_rng(2)
    X = pd.DataFrame({"a": rng.normal(size=300), "b": rng.lognormal(size=300)})
    fitted = clone(norm).fit(X)
    assert fitted.features_ == ["a", "b"] and fitted.n_features_in_ == 2
    assert list(fitted.get_feature_names_out()) == ["a", "b"]
    assert clone(fitted).get_params() == {"n_quantiles": 50}
    np.testing.assert_array_equal(fitted.fit_transform(X), fitted.transform(X))
    fitted.save(tmp_path / "n.json")
    assert QuantileNormalizer.load(tmp_path / "n.json").n_features_in_ == 2
    # without ties at the ends of the range it is scikit-learn's QuantileTransformer
    theirs = QuantileTransformer(n_quantiles=50, output_distribution="normal",
                                 subsample=None).fit(X.to_numpy())
    probe = rng.normal(size=(200, 2)) * [1, 0.5] + [0, 1.5]
    np.testing.assert_allclose(fitted.transform(probe), theirs.transform(probe), atol=1e-5)
    # a point mass at the minimum: mid-rank here, -5.2 in scikit-learn (documented difference)
    zeros = np.column_stack([np.r_[np.zeros(150), rng.uniform(1, 2, 150)]])
    ours = QuantileNormalizer(50).fit(zeros).transform(np.zeros((1, 1)))[0, 0]
    sk = QuantileTransformer(n_quantiles=50, output_distribution="normal").fit(zeros)
    assert abs(ours) < 1.0 and sk.transform(np.zeros((1, 1)))[0, 0] < -5


def _p0_frame(**overrides):
    row = {"cholesterol": 4.5, "hdl": 1.5, "ldl": 2.5, "triglycerides": 1.0, "glucose": 4.8,
           "hba1c": 35.0, "crp": 1.0}
    row.update(overrides)
    return pd.DataFrame([row])


@pytest.mark.parametrize(("change", "sex", "bfh"), [
    ({}, "female", True),
    ({"cholesterol": 5.18}, "female", True), ({"cholesterol": 5.19}, "female", False),
    ({"hdl": 1.3}, "female", True), ({"hdl": 1.29}, "female", False),
    ({"hdl": 1.0}, "male", True), ({"hdl": 0.99}, "male", False),
    ({"ldl": 3.3}, "male", True), ({"ldl": 3.31}, "male", False),
    ({"triglycerides": 1.7}, "male", True), ({"triglycerides": 1.71}, "male", False),
    ({"glucose": 3.9}, "female", True), ({"glucose": 3.89}, "female", False),
    ({"glucose": 5.6}, "female", True), ({"glucose": 5.61}, "female", False),
    ({"hba1c": 41.9}, "female", True), ({"hba1c": 42.0}, "female", False),
    ({"crp": 9.99}, "male", True), ({"crp": 10.0}, "male", False),
    ({"crp": np.nan}, "male", False),
])
def test_bona_fide_boundaries(change, sex, bfh):
    assert bona_fide_mask(_p0_frame(**change), sex)[0] == bfh


def test_glucose_range_is_the_mg_dl_range_in_mmol_l():
    glucose = next(r for r in P0_RANGES if r.marker == "glucose")
    assert glucose.unit == "mmol/L" and glucose.paper == "70-100 mg/dL"
    assert round(70 / MG_DL_PER_MMOL_L_GLUCOSE, 1) == glucose.low
    assert round(100 / MG_DL_PER_MMOL_L_GLUCOSE, 1) == glucose.high


def test_range_overrides():
    ranges = with_overrides({"glucose": {"high": 6.0}, "hdl": {"female": {"low": 1.2}}})
    g = next(r for r in ranges if r.marker == "glucose")
    hdl_w = next(r for r in ranges if r.marker == "hdl" and r.sex == "female")
    hdl_m = next(r for r in ranges if r.marker == "hdl" and r.sex == "male")
    assert (g.low, g.high, g.source) == (3.9, 6.0, "user override")
    assert hdl_w.low == 1.2 and hdl_m.low == 1.0
    assert bona_fide_mask(_p0_frame(glucose=5.9, hdl=1.25), "female", ranges)[0]
    with pytest.raises(ConfigError, match="no clinical range for 'bmi'"):
        with_overrides({"bmi": {"high": 25}})


@settings(max_examples=30, deadline=None)
@given(st.floats(-5, 5), st.floats(0.2, 3), st.floats(-2, 0.5), st.floats(0.3, 3),
       st.integers(0, 10_000))
def test_augmentation_stays_inside_bounds(mu, sd, lo_off, width, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(mu, sd, size=(50, 2))
    low = np.array([mu + lo_off * sd, -np.inf])
    high = np.array([mu + (lo_off + width) * sd, np.inf])
    res = rejection_sample(X, 400, low, high, rng)
    assert res.samples.shape == (400, 2)
    assert (res.samples >= low).all() and (res.samples <= high).all()


def test_augmentation_with_a_low_acceptance_rate_does_not_run_out_of_rounds():
    """A bound a draw reaches 3% of the time needs ~300 rounds for 400 rows; the cap follows
    the acceptance rate (hypothesis found this where a fixed 200 rounds failed)."""
    rng = np.random.default_rng(0)
    X = rng.normal(0, 1, size=(50, 2))
    res = rejection_sample(X, 400, np.array([-2.0, -np.inf]), np.array([-1.625, np.inf]), rng)
    assert res.rounds > 200 and res.acceptance[0] < 0.05
    assert ((res.samples[:, 0] >= -2.0) & (res.samples[:, 0] <= -1.625)).all()


def test_augmentation_keeps_mean_and_sd_with_wide_bounds():
    rng = np.random.default_rng(2)
    X = rng.normal([5, 100], [1, 10], size=(2000, 2))
    res = rejection_sample(X, 20_000, np.array([-1e9, -1e9]), np.array([1e9, 1e9]), rng)
    np.testing.assert_allclose(res.samples.mean(0), X.mean(0), rtol=0.01)
    np.testing.assert_allclose(res.samples.std(0), X.std(0), rtol=0.03)


def test_augmentation_refuses_unreachable_bound():
    rng = np.random.default_rng(3)
    X = rng.normal(100, 1, size=(100, 1))  # e.g. glucose in mg/dL against a mmol/L range
    with pytest.raises(InputError, match=r"'glucose'.*check the bound and its unit"):
        rejection_sample(X, 10, np.array([3.9]), np.array([5.6]), rng, ["glucose"])
    with pytest.raises(InputError, match="1 member"):
        rejection_sample(X[:1], 10, np.array([0.0]), np.array([200.0]), rng, ["glucose"])


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=3, max_size=200), st.integers(0, 99), st.booleans())
def test_triplets_are_valid(labels, seed, balanced):
    labels = np.array(labels)
    classes, counts = np.unique(labels, return_counts=True)
    if classes.size < 2 or counts.max() < 2:
        with pytest.raises(InputError):
            mine_triplets(labels, 50, seed=seed)
        return
    t = mine_triplets(labels, 500, seed=seed, balanced=balanced)
    assert t.shape == (500, 3) and t.dtype == np.int64
    assert t.min() >= 0 and t.max() < labels.size
    a, p, n = labels[t[:, 0]], labels[t[:, 1]], labels[t[:, 2]]
    assert (a == p).all() and (a != n).all() and (t[:, 0] != t[:, 1]).all()
    singletons = classes[counts == 1]
    assert not np.isin(a, singletons).any()  # a singleton never anchors
    np.testing.assert_array_equal(t, mine_triplets(labels, 500, seed=seed, balanced=balanced))


def test_triplets_balanced_option():
    labels = np.array([0] * 900 + [1] * 90 + [2] * 10)
    share = np.bincount(labels[mine_triplets(labels, 30_000, seed=1, balanced=True)[:, 0]]) / 30_000
    np.testing.assert_allclose(share, 1 / 3, atol=0.02)
    share = np.bincount(labels[mine_triplets(labels, 30_000, seed=1)[:, 0]]) / 30_000
    np.testing.assert_allclose(share, [0.9, 0.09, 0.01], atol=0.01)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.sampled_from(["40-49", "50-59", "60-69"])),
                min_size=4, max_size=200), st.integers(0, 99), st.booleans())
def test_age_matched_triplets_stay_in_the_anchors_age_group(rows, seed, balanced):
    labels = np.array([r[0] for r in rows])
    strata = np.array([r[1] for r in rows], dtype=object)
    usable = [g for g in np.unique(strata)
              if np.unique(labels[strata == g]).size >= 2
              and np.unique(labels[strata == g], return_counts=True)[1].max() >= 2]
    if not usable:
        with pytest.raises(InputError):
            mine_triplets(labels, 50, seed=seed, strata=strata)
        return
    t = mine_triplets(labels, 400, seed=seed, balanced=balanced, strata=strata)
    assert t.shape == (400, 3) and t.dtype == np.int64
    a, p, n = labels[t[:, 0]], labels[t[:, 1]], labels[t[:, 2]]
    assert (a == p).all() and (a != n).all() and (t[:, 0] != t[:, 1]).all()
    assert (strata[t[:, 1]] == strata[t[:, 0]]).all() and (strata[t[:, 2]] == strata[t[:, 0]]).all()
    assert set(strata[t[:, 0]]) <= set(usable)
    np.testing.assert_array_equal(t, mine_triplets(labels, 400, seed=seed, balanced=balanced,
                                                   strata=strata))


def test_age_matched_triplets_share_by_group_size():
    labels = np.tile([0, 1, 2, 2], 300)
    strata = np.repeat(["young", "old"], [900, 300])
    t = mine_triplets(labels, 20_000, seed=2, strata=strata)
    assert abs((strata[t[:, 0]] == "young").mean() - 0.75) < 0.02
    # batches mix the groups: no long run of one group
    assert (strata[t[:1000, 0]] == "old").mean() > 0.15


def test_age_groups_nearest_rule():
    groups, outside = assign_age_groups(np.array([36, 45, 46, 60, 73, 75, 30, 80, 45.4, 45.6]))
    assert list(groups) == ["36-45", "36-45", "46-50", "56-60", "66-75", "66-75", "36-45",
                            "66-75", "36-45", "46-50"]
    assert outside == 4  # 30, 80 and the two between 45 and 46


def test_read_triplets_refuses_bad_files(tmp_path):
    from sphr.cohorts.triplets import read_triplets

    path = tmp_path / "triplets.npz"
    with pytest.raises(InputError, match=r"missing triplets\.npz") as err:
        read_triplets(path, 10)
    assert str(path) in str(err.value)
    np.savez(path, other=np.zeros((2, 3), dtype=np.int64))
    with pytest.raises(InputError, match="no array named 'triplets'"):
        read_triplets(path, 10)
    np.savez(path, triplets=np.array([[0, 1, 2], [3, 4, 10]]))
    with pytest.raises(InputError, match=r"row indices into train.parquet \(10 rows\)"):
        read_triplets(path, 10)
    np.savez(path, triplets=np.array([[0, 1, 2], [3, 4, 9]]))
    assert read_triplets(path, 10).dtype == np.int64


def test_cohort_defaults_are_the_papers_numbers():
    """docs/METHODS.md (Cohort preparation, Augmentation, Triplets): the numbers written here."""
    from sphr.cohorts import CohortConfig

    c = CohortConfig()
    assert (c.completeness, c.test_size, c.n_triplets, c.augment, c.n_quantiles) == (
        0.75, 0.3, 100_000, "independent", 1000)
    assert c.augment_fold == {"bona_fide_healthy": 3}
    assert c.age_groups == ((36, 45), (46, 50), (51, 55), (56, 60), (61, 65), (66, 75))
    assert [(r.marker, r.sex, r.low, r.high) for r in P0_RANGES] == [
        ("cholesterol", None, None, 5.18), ("hdl", "male", 1.0, None),
        ("hdl", "female", 1.3, None), ("ldl", None, None, 3.3),
        ("triglycerides", None, None, 1.7), ("glucose", None, 3.9, 5.6),
        ("hba1c", None, None, 42.0), ("crp", None, None, 10.0)]


def test_age_matched_triplets_refuse_bad_strata_with_a_clear_message():
    labels = np.array([0, 0, 1, 1])
    with pytest.raises(InputError, match=r"strata: \(3,\) values for \(4,\) rows"):
        mine_triplets(labels, 10, strata=np.array(["a", "a", "b"]))
    with pytest.raises(InputError, match="no stratum has two classes"):
        mine_triplets(labels, 10, strata=np.array(["a", "a", "b", "b"]))


def test_normalizer_stays_finite_on_subnormal_values():
    """The example hypothesis found (OPENBLAS_CORETYPE=Haswell run, 2026-11-28): quantiles a
    subnormal apart made np.interp's slope overflow into NaN."""
    X = np.array([[0.0], [-2.22507386e-313]] + [[2.22507386e-313]] * 99)
    norm = QuantileNormalizer(n_quantiles=100).fit(X)
    probe = np.sort(np.concatenate([X, X + 0.5, X - 1e3]), axis=0)
    Z = norm.transform(probe)
    assert np.isfinite(Z).all() and (np.diff(Z, axis=0) >= 0).all()
