"""benchmarks/age_structure.py and sphr_age.py's death figures: the marker-age slopes, class
gaps, drift and shares on constructed frames whose answers are known."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from benchmark_loader import load_benchmark

_load = load_benchmark


@pytest.fixture(scope="module")
def ages():
    return _load("age_structure")


def _frame(n: int = 6000, seed: int = 0, bfh_slope: float = 0.0) -> pd.DataFrame:
    """Two sexes; marker ``a`` rises 0.5 SD per decade in everyone, marker ``b`` only in
    the unhealthy; the unhealthy sit 1 SD higher on both; BFH thin out with age."""
    rng = np.random.default_rng(seed)
    age = rng.uniform(40, 73, n)
    p_bfh = np.clip(0.5 - 0.01 * (age - 40), 0.05, None)
    u = rng.random(n)
    label = np.where(u < p_bfh, 2, np.where(u < p_bfh + 0.3, 0, 1))
    unh = label == 0
    a = 0.05 * (age - 56) + 1.0 * unh + rng.standard_normal(n)
    b = np.where(unh, 0.05 * (age - 56),
                 bfh_slope / 10 * (age - 56)) + 1.0 * unh + rng.standard_normal(n)
    sex = np.where(rng.random(n) < 0.5, "female", "male")
    return pd.DataFrame(
        {"eid": np.arange(n), "sex": sex, "age": age, "label": label, "a": a, "b": b}
    )


def test_normal_scores_rank_based_and_keep_nan(ages):
    z = ages.normal_scores(np.array([3.0, np.nan, 1.0, 2.0, 2.0]))
    assert np.isnan(z[1])
    assert z[2] < z[3] == z[4] < z[0]
    assert z[3] == pytest.approx(0.0)  # the mid-rank of a symmetric set


def test_slope_ci_recovers_a_known_slope(ages):
    rng = np.random.default_rng(1)
    age = rng.uniform(40, 73, 4000)
    y = 0.03 * age + rng.standard_normal(4000)
    s = ages.slope_ci(np.append(y, np.nan), np.append(age, 50.0))
    assert s["n"] == 4000
    assert s["lo"] < 0.3 < s["hi"]
    assert s["hi"] - s["lo"] < 0.12
    assert np.isnan(ages.slope_ci(np.ones(2), np.array([40.0, 50.0]))["slope"])


def test_spearman_and_mean_difference_intervals(ages):
    rng = np.random.default_rng(2)
    x = rng.standard_normal(2000)
    r = ages.spearman_ci(x + rng.standard_normal(2000), x)
    assert r["lo"] < r["r"] < r["hi"] and 0.6 < r["r"] < 0.75
    d = ages.mean_diff_ci(rng.normal(1.0, 1.0, 3000), rng.normal(0.0, 2.0, 3000))
    assert d["lo"] < 1.0 < d["hi"] and d["n_a"] == d["n_b"] == 3000


def test_wilson_interval(ages):
    p, lo, hi = ages.wilson(10, 100)
    assert p == 0.1
    assert lo == pytest.approx(0.0552, abs=1e-3) and hi == pytest.approx(0.1744, abs=1e-3)
    assert np.isnan(ages.wilson(0, 0)[0])


def test_tables_on_a_constructed_frame(ages):
    people = ages.add_scores(_frame(), ["a", "b"])
    slopes = ages.slope_table(people, ["a", "b"]).set_index(["sex", "marker", "class"])
    for sex in ("female", "male"):
        bfh_b = slopes.loc[(sex, "b", "bfh")]
        assert bfh_b["lo"] < 0 < bfh_b["hi"]  # b does not move with age in BFH
        assert slopes.loc[(sex, "a", "bfh"), "lo"] > 0.2  # a does
        assert slopes.loc[(sex, "b", "unhealthy"), "lo"] > 0.2
    gaps = ages.gap_table(people, ["a", "b"]).set_index(["sex", "marker"])
    # b's unhealthy-BFH gap widens with age (only the unhealthy drift), a's stays
    assert (gaps.xs("b", level="marker")["change_lo"] > 0).all()
    assert (gaps.xs("a", level="marker")["change_lo"] < 0).all()
    assert (gaps.xs("a", level="marker")["change_hi"] > 0).all()
    shares = ages.share_table(people, ((36, 45), (66, 75)))
    assert list(shares["group"].unique()) == ["40-45", "66-73"]
    assert (shares.groupby("sex")["bfh"].agg(lambda s: s.iloc[0] > s.iloc[1])).all()


def test_drift_measures_movement_toward_the_young_unhealthy(ages):
    still = ages.add_scores(_frame(20000, seed=3), ["a", "b"])
    moving = ages.add_scores(_frame(20000, seed=3, bfh_slope=0.5), ["a", "b"])
    d = {}
    for name, people in (("still", still), ("moving", moving)):
        t = ages.drift_table(people, ["a", "b"], n_bootstrap=20).set_index(["sex", "class"])
        d[name] = t.loc[("female", "bfh")]
        assert t.loc[("female", "unhealthy"), "drift"] > d[name]["drift"]
        assert 0.5 < t.loc[("female", "bfh"), "age_auroc_unhealthy_vs_bfh"] < 0.7
    # moving BFH cover more of the young gap per decade
    assert d["moving"]["drift"] > d["still"]["hi"]


def test_compare_table_differences(ages):
    people = ages.add_scores(_frame(), ["a", "b"])
    faster = ages.add_scores(_frame(seed=4, bfh_slope=1.0), ["a", "b"])
    t = ages.compare_table({"ref": ages.slope_table(people, ["a", "b"]),
                            "world": ages.slope_table(faster, ["a", "b"])})
    t = t.set_index(["sex", "marker"])
    assert (t.xs("b", level="marker")["lo"] > 0).all()
    assert (t.xs("a", level="marker")["lo"] < 0).all()
    assert set(t["run"]) == {"world"}


def test_death_c_index_interval():
    sphr_age = _load("sphr_age")
    rng = np.random.default_rng(5)
    risk = rng.standard_normal(600)
    time = rng.exponential(np.exp(-risk))
    event = rng.random(600) < 0.7
    c, lo, hi = sphr_age.c_index_interval(time, event, risk, n_bootstrap=100)
    assert lo < c < hi and c > 0.6
    assert sphr_age.associations(risk, time, {}, (time, event))["death_c"] == pytest.approx(
        c, abs=1e-3
    )


def test_alignment_is_the_cosine_with_the_young_gap(ages):
    rng = np.random.default_rng(6)
    n = 40000
    age = rng.uniform(40, 73, n)
    label = rng.choice([0, 1, 2], n)
    # young gap (1, 0) (mean age under 50 is 45); class 2 ages along (1, 1), class 0 along (0, 1)
    z = np.stack([1.0 * (label == 0) + 0.05 * (age - 45) * (label == 2),
                  0.05 * (age - 56) * (label != 1)], axis=1) + 0.3 * rng.standard_normal((n, 2))
    assert ages.alignment(z, age, label, 2) == pytest.approx(np.sqrt(0.5), abs=0.03)
    assert ages.alignment(z, age, label, 0) == pytest.approx(0.0, abs=0.05)
    assert ages.drift(z, age, label, 2) == pytest.approx(0.5, abs=0.05)


def test_dispersion_table_sees_spread_grow(ages):
    people = _frame(20000, seed=7)
    people["a"] = people["a"] * (1 + 0.05 * (people["age"] - 40))  # spreads out with age
    scored = ages.add_scores(people, ["a", "b"])
    t = ages.dispersion_table(scored, ["a", "b"]).set_index(["sex", "band"])
    for sex in ("female", "male"):
        assert t.loc[(sex, "60-73"), "variance"] > t.loc[(sex, "40-49"), "variance"]
        assert t.loc[(sex, "40-49"), "n_bfh"] > t.loc[(sex, "60-73"), "n_bfh"]


def test_crossfit_associations(tmp_path):
    sphr_age = _load("sphr_age")
    rng = np.random.default_rng(8)
    n = 800
    age = rng.uniform(40, 73, n)
    frail = rng.standard_normal(n)
    time = rng.exponential(np.exp(-0.08 * (age - 56) - frail))
    frame = pd.DataFrame({"eid": np.arange(n), "sex": np.where(np.arange(n) % 2, "male", "female"),
                          "age": age, "sphr": -age + rng.standard_normal(n), "raw_euclidean": frail,
                          "time_years": np.minimum(time, 2.0), "died": (time < 2.0).astype(int)})
    frame.to_parquet(tmp_path / "crossfit_scores_quantile.parquet")
    out = sphr_age.crossfit_associations(tmp_path / "crossfit_scores_quantile.parquet")
    for sex in ("female", "male"):
        assert out[sex]["n"] == 400
        assert out[sex]["sphr"]["age"] < -0.9 and out[sex]["sphr"]["death_c"][0] < 0.4
        assert out[sex]["age"]["death_c"][0] > 0.6
        assert all(c > 0.6 for c in out[sex]["raw_euclidean"]["death_c_within_age"].values())


def test_age_slope_proposal_moves_the_marginal_slope(ages):
    compare = pd.DataFrame([
        {"run": "linear", "sex": sex, "marker": marker, "slope": 0.3, "reference": 0.1,
         "diff": 0.2, "lo": 0.1, "hi": 0.3}
        for sex in ("female", "male") for marker in ("hba1c", "crp", "lymphocyte_pct")])
    t = ages.age_slope_proposal(compare).set_index("marker")
    assert "lymphocyte_pct" not in t.index  # not a copula marker: no age_slope parameter
    # normal marginal: SD 3.9 mmol/mol, 0.08 per year now; 0.2 SD per decade too steep
    for sex in ("female", "male"):
        assert t.loc["hba1c", f"proposed_{sex}"] == pytest.approx(0.08 - 0.02 * 3.9)
        sigma = np.sqrt(np.log1p((4.1 / 2.6) ** 2))  # CRP's log-scale SD
        assert t.loc["crp", f"proposed_{sex}"] == pytest.approx(-0.02 * sigma)
    # the world is 0.2 SD per decade steeper than the reference: the reference needs -0.2
    assert t.loc["crp", "delta_female"] == pytest.approx(-0.2)


def test_proxy_labels_follow_the_development_set(ages):
    export = pd.DataFrame({"eid": ["1", "2", "3"], "31-0.0": ["0", "1", "1"],
                           "30750-0.0": ["50.1", "40", ""], "2443-0.0": ["0", "1", "1"],
                           "2453-0.0": ["1", "0", "1"], "2473-0.0": ["1", "0", "0"],
                           "6153-0.0": ["1", "", ""], "6153-0.1": ["2", "", ""],
                           "6177-0.0": ["", "1", "2"], "6177-1.0": ["", "1", ""]})
    out = ages.proxy_labels(export)
    assert out["2443-0.0"].tolist() == ["1", "0", ""]  # HbA1c >= 48; unknown without HbA1c
    assert out["2453-0.0"].tolist() == ["0", "0", "0"]
    assert out["2473-0.0"].tolist() == ["1", "0", "0"]
    assert out["6153-0.0"].tolist() == ["-7", "", ""] and out["6153-0.1"].tolist() == ["", "", ""]
    assert out["6177-0.0"].tolist() == ["", "-7", "-7"]
    assert out["6177-1.0"].tolist() == ["", "1", ""]  # later visits untouched
