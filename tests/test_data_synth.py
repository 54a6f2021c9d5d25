"""The synthetic cohort looks like UK Biobank and its health is structured, not noise."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sphr.data.fields import PREDICTORS
from sphr.synth.cohort import generate_cohort


@pytest.fixture(scope="module")
def cohort():
    return generate_cohort(20_000, seed=3)


@pytest.fixture(scope="module")
def baseline(cohort):
    v = cohort.visits
    return v[v["instance"] == 0].reset_index(drop=True)


@pytest.mark.parametrize(("marker", "mean", "sd", "tol"), [
    ("age", 56.5, 8.1, 1.5), ("bmi", 27.4, 4.8, 0.8), ("cholesterol", 5.69, 1.19, 0.3),
    ("hdl", 1.45, 0.40, 0.1), ("ldl", 3.56, 0.89, 0.25), ("triglycerides", 1.75, 0.93, 0.2),
    ("glucose", 5.12, 1.06, 0.2), ("hba1c", 36.1, 5.8, 1.5), ("crp", 2.6, 4.1, 0.6),
    ("creatinine", 72, 18, 4), ("haemoglobin", 14.2, 1.2, 0.4), ("wbc", 6.9, 2.0, 0.3),
    ("platelets", 252, 56, 8), ("vitamin_d", 47.7, 22, 4), ("urate", 310, 79, 15),
])
def test_marginals_match_ukb(baseline, marker, mean, sd, tol):
    x = baseline[marker].dropna()
    assert abs(x.mean() - mean) < tol, (marker, x.mean())
    assert 0.6 * sd < x.std() < 1.45 * sd, (marker, x.std())


def test_sex_differences(baseline):
    male = baseline["sex"] == 1
    assert 0.42 < male.mean() < 0.49
    for marker, higher_in_men in [("haemoglobin", True), ("creatinine", True), ("hdl", False),
                                  ("urate", True), ("shbg", False), ("testosterone", True)]:
        m, f = baseline.loc[male, marker].median(), baseline.loc[~male, marker].median()
        assert (m > f) == higher_in_men, marker


def test_blood_count_identities(baseline):
    b = baseline.dropna(subset=["wbc", "rbc", "mcv", "haematocrit", "lymphocyte_pct"])
    pct = b[["lymphocyte_pct", "monocyte_pct", "neutrophil_pct", "eosinophil_pct",
             "basophil_pct"]].sum(axis=1)
    np.testing.assert_allclose(pct, 100, atol=1e-6)
    np.testing.assert_allclose(b["lymphocytes"], b["lymphocyte_pct"] / 100 * b["wbc"], rtol=1e-9)
    np.testing.assert_allclose(b["haematocrit"], b["rbc"] * b["mcv"] / 10, rtol=0.05)
    # cholesterol is made of its fractions, so they correlate as in real lipid panels
    lipids = baseline.dropna(subset=["ldl", "cholesterol"])[["ldl", "cholesterol"]]
    assert np.corrcoef(lipids.T)[0, 1] > 0.7


def test_missingness_is_block_structured(baseline):
    # the MET panel goes missing together (UKB ~20%)
    met = baseline[["met_walking", "met_moderate", "met_vigorous", "met_total"]].isna()
    assert 0.15 < met["met_total"].mean() < 0.25
    assert (met.all(axis=1) == met.any(axis=1)).mean() > 0.99


def test_visits(cohort):
    v = cohort.visits
    n = (v["instance"] == 0).sum()
    assert 0.03 < (v["instance"] == 1).sum() / n < 0.05  # repeat assessment ~4%


def test_medicated_values_are_treated(cohort):
    t = cohort.truth
    v = cohort.visits
    b = v[v["instance"] == 0].set_index("eid").loc[t["eid"]]
    lipid_high = t["lipid"].to_numpy() > 1
    statin = t["baseline_statin"].to_numpy()
    ldl = b["ldl"].to_numpy()
    # at the same latent lipid risk, people on statins have lower LDL
    assert np.nanmean(ldl[lipid_high & statin]) < np.nanmean(ldl[lipid_high & ~statin]) - 0.6


def test_new_diagnoses_follow_baseline_risk(cohort):
    t = cohort.truth
    healthy = t["onset_years_diabetes"].to_numpy() > 0
    high = t["metabolic"].to_numpy() > np.quantile(t["metabolic"], 0.75)
    within5 = t["onset_years_diabetes"].to_numpy() < 5
    # top-quartile metabolic risk develops diabetes far more often within 5 years
    assert within5[healthy & high].mean() > 3 * within5[healthy & ~high].mean()


def test_same_seed_same_cohort():
    a, b = generate_cohort(500, seed=9), generate_cohort(500, seed=9)
    assert a.visits.equals(b.visits) and a.truth.equals(b.truth)


def test_rejects_empty_cohort():
    from sphr.errors import ConfigError

    with pytest.raises(ConfigError, match="at least 1"):
        generate_cohort(0)


# ------------------------------------------------------------------ values a person can have
LAB_MARKERS = [f for f in PREDICTORS if f.group in ("blood_count", "biochemistry")]


@pytest.mark.parametrize(("world", "seed"), [("linear", 0), ("nonlinear", 3)])
def test_every_lab_value_written_is_one_a_person_can_have(world, seed):
    """200,000 participants and all their visits: every blood-count and biochemistry value
    the generator writes is finite, above zero (no concentration, count or volume is zero or
    less) and inside the catalog's plausible range (a percentage at most 100, a fraction at
    most 1), the range the ingest checks. Before generator v3 this draw wrote negative urea,
    IGF-1 and urate values (the far low tails of their normal marginals)."""
    visits = generate_cohort(200_000, seed=seed, linked=False, world=world).visits
    bad = {}
    for f in LAB_MARKERS:
        x = visits[f.name].to_numpy(float)
        x = x[~np.isnan(x)]
        high = np.inf if f.max_value is None else f.max_value
        out = ~np.isfinite(x) | (x <= 0) | (x < f.min_value) | (x > high)
        if out.any():
            bad[f.name] = (int(out.sum()), float(x[out].min()))
        assert len(x) > 0.5 * len(visits), f.name  # the check saw the marker's values
    assert not bad, f"impossible lab values (count, lowest) in the {world} world: {bad}"


def test_only_impossible_lab_values_go_missing(monkeypatch):
    """Not reporting a value at or below zero masks those cells and moves nothing else: the
    same seed with the rule switched off gives the same visits, truth and linked records
    but for the masked cells, each of which held a value at or below zero."""
    import sphr.synth.markers as markers

    kept = generate_cohort(50_000, seed=0)
    monkeypatch.setattr(markers, "NOT_REPORTED_AT_OR_BELOW", -np.inf)
    raw = generate_cohort(50_000, seed=0)
    pd.testing.assert_frame_equal(kept.truth, raw.truth)
    pd.testing.assert_frame_equal(kept.linked, raw.linked)
    a, b = kept.visits, raw.visits
    assert list(a.columns) == list(b.columns)
    moved = 0
    for col in a.columns:
        if col not in {f.name for f in LAB_MARKERS}:
            pd.testing.assert_series_equal(a[col], b[col])
            continue
        x, y = a[col].to_numpy(float), b[col].to_numpy(float)
        differs = ~((x == y) | (np.isnan(x) & np.isnan(y)))
        assert np.isnan(x[differs]).all() and (y[differs] <= 0).all(), col
        moved += int(differs.sum())
    assert moved > 0  # this draw has impossible values to mask (urea, IGF-1, urate)
