"""Joint (Gaussian-copula) augmentation: inside the bounds, keeps correlations and point masses."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sphr.cohorts.augment import augmentation_check, copula_sample, rejection_sample


def _class(seed: int = 0, n: int = 300) -> np.ndarray:
    rng = np.random.default_rng(seed)
    ldl = rng.lognormal(1.1, 0.25, n)
    apob = 0.3 * ldl + rng.normal(0, 0.05, n)  # strongly correlated, as in UKB
    met = np.where(rng.random(n) < 0.45, 0.0, rng.gamma(2.0, 400.0, n))  # point mass at 0
    age = rng.integers(40, 70, n).astype(float)
    return np.column_stack([ldl, apob, met, age])


FEATURES = ["ldl", "apob", "met_vigorous", "age"]


def test_copula_keeps_correlation_and_point_mass_where_independent_draws_do_not():
    X = _class()
    low, high = np.full(4, -np.inf), np.full(4, np.inf)
    joint = copula_sample(X, 900, low, high, np.random.default_rng(1), FEATURES)
    indep = rejection_sample(X, 900, low, high, np.random.default_rng(1), FEATURES)
    cj = augmentation_check(X, joint.samples, FEATURES)
    ci = augmentation_check(X, indep.samples, FEATURES)
    real = cj["pairs"]["ldl~apob"]["real"]
    assert abs(cj["pairs"]["ldl~apob"]["augmented"] - real) < 0.1
    assert abs(ci["pairs"]["ldl~apob"]["augmented"]) < 0.15  # Algorithm 1 loses it
    assert cj["point_masses"]["met_vigorous"]["augmented"] == pytest.approx(0.45, abs=0.07)
    assert ci["point_masses"]["met_vigorous"]["augmented"] < 0.05
    # every augmented value is one the class has (inverted-CDF quantiles)
    for j in range(4):
        assert np.isin(joint.samples[:, j], X[:, j]).all()


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 1000), st.floats(0.5, 3.0), st.floats(3.5, 6.0))
def test_copula_samples_stay_inside_the_box(seed, lo, hi):
    X = _class(seed % 7)
    low = np.array([lo, -np.inf, -np.inf, 45.0])
    high = np.array([hi, np.inf, 2000.0, 65.0])
    out = copula_sample(X, 200, low, high, np.random.default_rng(seed), FEATURES).samples
    assert out.shape == (200, 4)
    assert ((out >= low) & (out <= high)).all()


def test_copula_is_deterministic_for_a_seed():
    X = _class()
    args = (X, 100, np.full(4, -np.inf), np.full(4, np.inf))
    a = copula_sample(*args, np.random.default_rng(3), FEATURES).samples
    b = copula_sample(*args, np.random.default_rng(3), FEATURES).samples
    assert np.array_equal(a, b)


def test_cohort_copula_augmentation_on_the_fixture(ingest_dir):
    import pandas as pd

    from sphr.cohorts import CohortConfig, build_cohorts

    baseline = pd.read_parquet(ingest_dir / "baseline.parquet")
    cohorts, _ = build_cohorts(baseline, CohortConfig(n_triplets=500, augment="copula", seed=11))
    for c in cohorts.values():
        aug = c.report["augmentation"]["bona_fide_healthy"]
        assert aug["method"] == "copula" and aug["new_rows"] == 3 * aug["source_rows"]
        assert "check" in aug
