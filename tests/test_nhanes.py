"""NHANES 1999-2000 mortality check (benchmarks/nhanes_1999_2000.py, a study beside its
benchmark, not in the library): vendored data, units, no leakage, fit-part-only fits."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from benchmark_loader import load_benchmark
from lifelines.utils import concordance_index

from sphr.errors import InputError
from sphr.labels import SEXES
from sphr.risk.phenoage import MARKERS
from sphr.survival import c_index_weighted

N = load_benchmark("nhanes_1999_2000", register=True)


@pytest.fixture(scope="module")
def raw() -> pd.DataFrame:
    return N.load_nhanes()


@pytest.fixture(scope="module")
def people(raw) -> pd.DataFrame:
    return N.to_catalog(raw)


@pytest.fixture(scope="module")
def roles(people) -> np.ndarray:
    return N.assign_roles(people, seed=0)


def test_vendored_file_loads_with_expected_columns(raw):
    assert N.default_path().name == "nhanes_1999_2000.parquet"
    assert N.default_path().with_name("README.md").exists()
    assert list(raw.columns) == list(N.NHANES_COLUMNS)
    assert len(raw) == N.N_PEOPLE == 4086
    assert raw["sex"].value_counts().to_dict() == {"female": 2163, "male": 1923}
    assert int(raw["mortstat"].sum()) == 1298
    assert raw["age"].between(20, 85).all()


def test_missing_column_is_an_input_error_naming_file_and_field(raw, tmp_path):
    path = tmp_path / "bad.parquet"
    raw.drop(columns=["crp_mg_l"]).to_parquet(path)
    with pytest.raises(InputError) as err:
        N.load_nhanes(path)
    assert err.value.field == "crp_mg_l" and err.value.file == str(path)


def test_missing_value_names_its_row(raw, tmp_path):
    path = tmp_path / "gap.parquet"
    raw.head(5).assign(glucose_mg_dl=[90.0, 91.0, np.nan, 92.0, 93.0]).to_parquet(path)
    with pytest.raises(InputError) as err:
        N.load_nhanes(path)
    assert (err.value.field, err.value.row) == ("glucose_mg_dl", 3)


def test_unit_conversion_on_a_hand_made_row():
    row = pd.DataFrame([{
        "seqn": 7, "age": 41.0, "sex": "male", "albumin_g_dl": 4.5, "creatinine_mg_dl": 1.0,
        "glucose_mg_dl": 90.08, "crp_mg_l": 3.2, "lymphocyte_pct": 31.5, "mcv_fl": 88.0,
        "rdw_pct": 12.6, "alp_u_l": 71.0, "wbc_k_ul": 7.1, "mortstat": 1, "permth_exm": 120.0,
    }])
    out = N.to_catalog(row, recalibrate_creatinine=False).iloc[0]
    assert out["eid"] == 7 and out["sex"] == 1 and out["age"] == 41.0
    assert out["albumin"] == pytest.approx(45.0)           # g/dL x 10 -> g/L
    assert out["creatinine"] == pytest.approx(88.42)       # mg/dL x 88.42 -> umol/L
    assert out["glucose"] == pytest.approx(5.0)            # 90.08 mg/dL / 18.016 -> mmol/L
    assert out["crp"] == pytest.approx(3.2)                # mg/L both
    assert out["wbc"] == pytest.approx(7.1)                # 10^3/uL = 10^9/L
    assert (out["lymphocyte_pct"], out["mcv"], out["rdw"], out["alp"]) == (31.5, 88.0, 12.6, 71.0)
    assert out["time_years"] == pytest.approx(10.0) and out["event"] == 1
    recalibrated = N.to_catalog(row).iloc[0]["creatinine"]
    assert recalibrated == pytest.approx((1.013 * 1.0 + 0.147) * 88.42)


def test_reference_ranges_cover_every_marker_for_both_sexes():
    for sex in SEXES:
        covered = {r.marker for r in N.REFERENCE_RANGES if r.sex in (None, sex)}
        assert covered == set(MARKERS)
        assert all(r.source for r in N.REFERENCE_RANGES)


def test_no_fit_or_calibration_person_is_evaluated(people, roles):
    fit = set(people.loc[roles == "fit", "eid"])
    cal = set(people.loc[roles == "calibration", "eid"])
    ev = set(people.loc[roles == "evaluation", "eid"])
    assert not fit & cal and not fit & ev and not cal & ev
    assert len(fit) + len(cal) + len(ev) == len(people) == people["eid"].nunique()
    reference = N.in_reference_ranges(people) & (people["age"].to_numpy() < N.REFERENCE_MAX_AGE)
    assert set(people.loc[reference, "eid"]) == fit | cal
    for code in range(len(SEXES)):  # the 20% calibration split is per sex
        ref_sex = reference & (people["sex"].to_numpy() == code)
        assert (roles[ref_sex] == "calibration").sum() == round(0.2 * ref_sex.sum())
    again = N.assign_roles(people, seed=0)
    assert (again == roles).all()
    assert not (N.assign_roles(people, seed=1) == roles).all()


def _same_fit(a: dict, b: dict, probe: np.ndarray) -> bool:
    return all(np.array_equal(a[s].normalizer.transform(probe), b[s].normalizer.transform(probe))
               and np.array_equal(a[s].center, b[s].center)
               and np.array_equal(a[s].mean, b[s].mean)
               and np.array_equal(a[s].covariance, b[s].covariance) for s in SEXES)


@pytest.mark.parametrize("space", N.SPACES)
def test_normalizer_and_covariance_see_only_fit_rows(people, roles, space):
    fit = roles == "fit"
    probe = people[list(MARKERS)].to_numpy(np.float64)
    before = N.fit_reference(people, fit, space)
    moved = people.copy()
    for role in ("calibration", "evaluation"):
        for sex in range(len(SEXES)):
            i = np.flatnonzero((roles == role) & (people["sex"].to_numpy() == sex))[0]
            moved.loc[i, list(MARKERS)] = moved.loc[i, list(MARKERS)] * 3.0 + 100.0
    assert _same_fit(before, N.fit_reference(moved, fit, space), probe)
    # the same change to a fit row does move the fit: the check has teeth
    i = np.flatnonzero(fit)[0]
    moved.loc[i, list(MARKERS)] = moved.loc[i, list(MARKERS)] * 3.0 + 100.0
    assert not _same_fit(before, N.fit_reference(moved, fit, space), probe)


def test_the_marker_space_keeps_ranking_beyond_the_fit_range(people, roles):
    """Two people far outside the young reference, one farther: the quantile space gives
    them the same capped distance, the marker space ranks the farther one higher."""
    fit = roles == "fit"
    j = np.flatnonzero((roles == "evaluation") & (people["sex"].to_numpy() == 0))[:2]
    far = people.copy()
    far.loc[j[1], list(MARKERS)] = far.loc[j[0], list(MARKERS)].to_numpy()
    far.loc[j[0], "crp"], far.loc[j[1], "crp"] = 200.0, 400.0
    for space, ranks in (("quantile", False), ("marker", True)):
        scores, _ = N.score_people(far, N.fit_reference(far, fit, space), fit)
        a, b = scores.loc[j, "mahalanobis"].to_numpy()
        assert bool(b > a) is ranks, space


def test_scores_of_a_person_do_not_depend_on_other_non_fit_people(people, roles):
    fit = roles == "fit"
    scores, _ = N.score_people(people, N.fit_reference(people, fit), fit)
    moved = people.copy()
    j = np.flatnonzero(roles == "evaluation")[:50]
    moved.loc[j, "crp"] = moved.loc[j, "crp"] * 10
    rescored, _ = N.score_people(moved, N.fit_reference(moved, fit), fit)
    others = np.setdiff1d(np.arange(len(people)), j)
    pd.testing.assert_frame_equal(scores.iloc[others], rescored.iloc[others])


def test_c_index_weighted_equals_lifelines_on_a_multinomial_resample(people):
    rng = np.random.default_rng(3)
    sub = people.sample(400, random_state=0).reset_index(drop=True)
    t, e = sub["time_years"].to_numpy(), sub["event"].to_numpy()
    score = np.round(sub["age"].to_numpy() / 5)  # coarse, so score ties occur
    counts = rng.multinomial(len(sub), np.full(len(sub), 1 / len(sub)), size=3)
    got = c_index_weighted(t, e, score, counts)
    for b in range(3):
        idx = np.repeat(np.arange(len(sub)), counts[b])
        expected = concordance_index(t[idx], -score[idx], e[idx])
        assert got[b] == pytest.approx(expected, abs=1e-6)
    ones = c_index_weighted(t, e, score, np.ones((1, len(sub))))[0]
    assert ones == pytest.approx(concordance_index(t, -score, e), abs=1e-6)


def test_nhanes_mortality_on_the_real_data(tmp_path):
    result = N.nhanes_mortality(n_bootstrap=40, seed=0, out_dir=tmp_path)
    assert result["n"] == N.N_PEOPLE - result["n_reference"]
    assert result["n_fit"] + result["n_calibration"] == result["n_reference"]
    assert 0 < result["deaths"] < result["n"]
    for name in N.SCORES:
        c = result[f"c_index_{name}"]
        low, high = result[f"c_index_{name}_ci"]
        assert np.isfinite([c, low, high]).all() and low <= c <= high
    assert 0.5 < result["c_index_age"] < 1
    assert result["hr_low"] <= result["hr_higher_vs_normal"] <= result["hr_high"]
    for shares in result["group_shares"].values():
        assert sum(shares.values()) == pytest.approx(1.0)
    written = json.loads((tmp_path / "nhanes_mortality.json").read_text())
    assert written["c_index_age"] == pytest.approx(result["c_index_age"])
    table = pd.read_parquet(tmp_path / "nhanes_mortality_scores.parquet")
    assert list(table["score"]) == list(N.SCORES)
    assert (tmp_path / "nhanes_mortality_km.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the marker space has no cap; the acceptance (docs/notes/NHANES.md): HD >= 0.62
    assert result["space"] == "marker" and result["saturated_share"] == 0.0
    assert result["c_index_mahalanobis"] >= 0.62
