"""Healthy-reference centiles (sphr.risk.centiles): calibrated on new healthy people in every
age third, flat in age, exact where conformal, monotone, consistent and leak-free."""

from __future__ import annotations

import numpy as np
import pytest

from sphr.beyond_age import spearman
from sphr.errors import ConfigError, InputError
from sphr.risk.centiles import HealthyCentiles, calibration_error


def healthy(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Scores whose location and spread grow with age, skewed right."""
    rng = np.random.default_rng(seed)
    age = rng.uniform(40, 75, n)
    return 1 + 0.03 * (age - 50) + (0.5 + 0.01 * age) * rng.lognormal(0, 0.5, n), age


@pytest.mark.parametrize("form", ["spline", "line"])
def test_new_healthy_people_beyond_each_bound_at_every_age(form):
    model = HealthyCentiles(form=form, tail="hybrid").fit(*healthy(400, 1))
    s, a = healthy(20_000, 2)
    p = model.p_healthy(s, a)
    assert 0.04 <= (p <= 0.05).mean() <= 0.065
    assert 0.005 <= (p <= 0.01).mean() <= 0.017
    for lo, hi in ((40, 52), (52, 64), (64, 75)):
        third = (a >= lo) & (a < hi)
        assert 0.035 <= (p[third] <= 0.05).mean() <= 0.07
    assert abs(spearman(model.centile(s, a), a)) < 0.1


def test_six_bins_of_the_old_reference_are_not_needed_for_a_flat_centile():
    """A reference that ignores age leaves the centile tracking age; this one does not."""
    s, a = healthy(400, 3)
    flat = HealthyCentiles(form="line").fit(s, a)
    new_s, new_a = healthy(5_000, 4)
    assert abs(spearman(flat.centile(new_s, new_a), new_a)) < 0.1
    assert spearman(new_s, new_a) > 0.3  # the raw score does track age


def test_conformal_p_is_exact():
    s, a = healthy(39, 5)
    model = HealthyCentiles(form="line", tail="conformal").fit(s, a)
    p = model.p_healthy(s, a)
    # a reference person counts themselves: the largest gets 2 / (n + 1)
    assert p.min() == pytest.approx(2 / 40)
    assert model.p_healthy([1e6], [60.0])[0] == pytest.approx(1 / 40)
    # with 39 people no one can be beyond the 99% centile: its bound is infinite
    assert np.isinf(model.bound(np.array([60.0]), 0.99)).all()
    assert model.p_healthy([-1e6], [60.0])[0] == 1.0


@pytest.mark.parametrize("tail", ["hybrid", "parametric", "conformal"])
def test_p_falls_with_the_score_and_groups_follow_the_bounds(tail):
    model = HealthyCentiles(tail=tail).fit(*healthy(300, 6))
    for age in (38.0, 50.0, 70.0, 90.0):
        grid = np.linspace(-5, 20, 400)
        p = model.p_healthy(grid, np.full(grid.size, age))
        assert (np.diff(p) <= 1e-12).all() and (p > 0).all() and (p <= 1).all()
        groups = model.groups(grid, np.full(grid.size, age))
        b95, b99 = (model.bound(np.array([age]), q)[0] for q in (0.95, 0.99))
        assert ((groups == "Normal") == (grid <= b95)).all()
        assert ((groups == "Higher Risk") == (grid > max(b95, b99))).all()
        # away from the bounds themselves, p agrees with the groups
        far = np.abs(grid - b95) > 1e-6
        assert ((p[far] <= 0.05) == (groups[far] != "Normal")).all()


def test_round_trip_gives_the_same_reading():
    model = HealthyCentiles().fit(*healthy(200, 7))
    again = HealthyCentiles.from_dict(model.to_dict())
    s, a = healthy(500, 8)
    assert np.allclose(again.p_healthy(s, a), model.p_healthy(s, a), atol=1e-6)
    assert (again.groups(s, a) == model.groups(s, a)).all()


def test_crossfitted_p_comes_from_a_model_without_the_person():
    s, a = healthy(120, 9)
    folds = np.arange(120) % 4
    model = HealthyCentiles(folds=4).fit(s, a, folds=folds)
    other = HealthyCentiles().fit(s[folds != 2], a[folds != 2])
    assert np.allclose(model.crossfitted_p_[folds == 2],
                       other.p_healthy(s[folds == 2], a[folds == 2]))
    moved = s.copy()
    moved[folds == 2] += 100  # fold 2's own scores never reach fold 2's model
    again = HealthyCentiles(folds=4).fit(moved, a, folds=folds)
    assert np.allclose(again.crossfitted_p_[folds == 2], other.p_healthy(
        moved[folds == 2], a[folds == 2]))


def test_bad_input_and_settings():
    with pytest.raises(InputError, match="no finite"):
        HealthyCentiles().fit([1.0, np.nan, 2.0, 3.0], [50, 51, 52, 53])
    with pytest.raises(InputError, match="at least 3"):
        HealthyCentiles().fit([1.0, 2.0], [50, 51])
    with pytest.raises(ConfigError, match="form"):
        HealthyCentiles(form="cubic").fit(*healthy(50, 1))
    with pytest.raises(ConfigError, match="tail"):
        HealthyCentiles(tail="gpd").fit(*healthy(50, 1))


def test_few_people_fall_back_to_a_line_then_a_constant():
    s, a = healthy(25, 10)
    assert HealthyCentiles().fit(s, a).form_used_ == "line"
    assert HealthyCentiles().fit(s[:8], a[:8]).form_used_ == "constant"


def test_calibration_error_states_share_n_and_range():
    p = np.r_[np.full(95, 0.5), np.full(4, 0.03), 0.005]
    out = calibration_error(p)
    assert out["0.05"]["n"] == 100 and out["0.05"]["share"] == pytest.approx(0.05)
    lo, hi = out["0.01"]["range"]
    assert lo <= out["0.01"]["share"] <= hi
