"""The marker space of the distance methods (docs/METHODS.md, "The distance space")."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from sphr.cohorts.normalize import MarkerScaler, QuantileNormalizer
from sphr.errors import ConfigError, InputError

positive = arrays(np.float64, st.tuples(st.integers(5, 40), st.integers(1, 4)),
                  elements=st.floats(0.01, 1e4, allow_nan=False))


@settings(max_examples=60, deadline=None)
@given(positive, st.floats(0.01, 1e6))
def test_order_is_kept_everywhere_including_beyond_the_fitted_range(X, probe):
    scaler = MarkerScaler().fit(X)
    grid = np.sort(np.concatenate([X[:, 0], [probe, X[:, 0].max() * 10, X[:, 0].min() / 10]]))
    Z = scaler.transform(np.repeat(grid[:, None], X.shape[1], axis=1))[:, 0]
    assert np.all(np.diff(Z) >= -1e-12)
    # strictly increasing beyond the fit, where the quantile normalizer is flat
    top = X[:, 0].max()
    assert scaler.transform(np.full((1, X.shape[1]), top * 4))[0, 0] > \
        scaler.transform(np.full((1, X.shape[1]), top * 2))[0, 0]


def test_quantile_normalizer_is_flat_beyond_its_range_the_scaler_is_not():
    rng = np.random.default_rng(0)
    X = rng.lognormal(1.0, 0.5, size=(300, 1))
    far = np.array([[X.max() * 2], [X.max() * 4]])
    q = QuantileNormalizer().fit(X).transform(far)[:, 0]
    m = MarkerScaler().fit(X).transform(far)[:, 0]
    assert q[0] == q[1]
    assert m[1] - m[0] == pytest.approx(np.log(2) / MarkerScaler().fit(X).scale_[0])


def test_logs_only_positive_features_and_standardizes_robustly():
    rng = np.random.default_rng(1)
    pos = rng.lognormal(0.0, 1.0, 2001)
    with_zero = np.where(rng.random(2001) < 0.3, 0.0, rng.exponential(100.0, 2001))
    scaler = MarkerScaler().fit(np.column_stack([pos, with_zero]))
    assert scaler.log_.tolist() == [True, False]
    Z = scaler.transform(np.column_stack([pos, with_zero]))
    assert np.median(Z, axis=0) == pytest.approx([0.0, 0.0], abs=1e-9)
    q25, q75 = np.percentile(Z, (25, 75), axis=0)
    assert (q75 - q25) == pytest.approx([1.349, 1.349])


def test_a_new_value_at_or_below_zero_of_a_logged_feature_reads_as_half_the_fitted_minimum():
    X = np.array([[1.0], [2.0], [4.0], [8.0]])
    scaler = MarkerScaler().fit(X)
    Z = scaler.transform(np.array([[0.0], [-3.0], [0.5], [1.0]]))[:, 0]
    assert Z[0] == Z[1] == Z[2] < Z[3]
    assert np.isfinite(Z).all()


def test_constant_and_point_mass_features_get_a_usable_scale():
    X = np.column_stack([np.full(20, 3.0), np.r_[np.zeros(15), np.arange(1, 6.0)]])
    scaler = MarkerScaler().fit(X)
    assert np.all(scaler.scale_ > 0)
    assert np.isfinite(scaler.transform(X)).all()


def test_fitted_only_on_the_rows_it_is_given_and_saved_exactly(tmp_path):
    rng = np.random.default_rng(2)
    X = rng.lognormal(size=(100, 3))
    a = MarkerScaler().fit(X[:60])
    other = X.copy()
    other[60:] *= 50.0  # rows the fit never sees
    b = MarkerScaler().fit(other[:60])
    assert np.array_equal(a.transform(X), b.transform(X))
    loaded = MarkerScaler.load(a.save(tmp_path / "scaler.json"))
    assert np.array_equal(loaded.transform(X), a.transform(X))
    assert loaded.features_ == ["x0", "x1", "x2"]


def test_bad_input_is_refused():
    with pytest.raises(InputError):
        MarkerScaler().fit(np.array([[1.0], [np.inf]]))
    with pytest.raises(InputError):
        MarkerScaler().fit(np.array([[1.0]]))
    with pytest.raises(ConfigError):
        MarkerScaler().transform(np.ones((2, 1)))
    with pytest.raises(InputError, match="expected 2 features"):
        MarkerScaler().fit(np.ones((3, 2)) + np.arange(3)[:, None]).transform(np.ones((1, 3)))
