"""PhenoAge (Levine et al. 2018): a published worked example, units, monotonicity, acceleration."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sphr.errors import InputError
from sphr.risk import phenoage as P

# Worked example: the BioAge R package (Kwon & Belsky, GeroScience 2021;43:2795-2808),
# github.com/dayoonkwon/BioAge commit b1f9fc0 (2026-04-02, "Update PhenoAge constant to
# 0.090165 and recompute data"), data/NHANES4.rda: NHANES 1999-2000 participants with
# their inputs (albumin_gL, creat_umol, glucose_mmol, crp in mg/dL, lncrp, lymph, mcv,
# rdw, alp, wbc, age) and the original-coefficient PhenoAge `phenoage0`, which BioAge
# computes in R/phenoage_calc.R (orig = TRUE). BioAge's `lncrp` is ln(1 + CRP mg/dL),
# not ln(CRP), so the CRP we pass, in mg/L, is 10 (1 + CRP mg/dL): then our
# ln(CRP / 10) is exactly BioAge's lncrp and every other part of the formula is pinned.
#          seqn: albumin g/L, creatinine umol/L, glucose mmol/L, CRP mg/dL, lncrp,
#                lymph %, MCV fL, RDW %, ALP U/L, WBC 10^9/L, age, phenoage0
BIOAGE_NHANES4 = {
    2: (45.0, 75.68069537, 4.329, 0.36, 0.3074846997479605, 21.1, 88.5, 13.7, 62.0, 7.6,
        77.0, 70.87546684506457),
    13: (40.0, 75.68069537, 7.881, 0.27, 0.2390169004704999, 13.1, 91.1, 14.4, 103.0, 11.6,
         70.0, 81.83392324540036),
    14: (45.0, 102.545972, 6.3825, 1.99, 1.095273387402595, 29.8, 90.4, 12.4, 110.0, 9.1,
         81.0, 79.11055168840898),
    20: (44.0, 39.86032653, 4.773, 0.67, 0.5128236264286637, 28.1, 91.0, 11.4, 50.0, 5.6,
         23.0, 10.425198054921909),
}


def _row(**overrides: float) -> pd.DataFrame:
    base = {"albumin": 45.0, "creatinine": 80.0, "glucose": 5.0, "crp": 2.0,
            "lymphocyte_pct": 30.0, "mcv": 90.0, "rdw": 13.0, "alp": 70.0, "wbc": 6.5,
            "age": 50.0}
    base.update(overrides)
    return pd.DataFrame([base])


def test_reproduces_bioage_phenoage0_on_nhanes_people():
    rows = []
    for albumin, creat, gluc, crp_dl, lncrp, lymph, mcv, rdw, alp, wbc, age, _ in \
            BIOAGE_NHANES4.values():
        assert math.log1p(crp_dl) == pytest.approx(lncrp, abs=1e-15)  # BioAge's convention
        rows.append({"albumin": albumin, "creatinine": creat, "glucose": gluc,
                     "crp": 10.0 * (1.0 + crp_dl), "lymphocyte_pct": lymph, "mcv": mcv,
                     "rdw": rdw, "alp": alp, "wbc": wbc, "age": age})
    expected = np.array([v[-1] for v in BIOAGE_NHANES4.values()])
    # 1e-3 years: our -0.00553 (as published) against BioAge's -0.0055305 is 0.0010 years
    np.testing.assert_allclose(P.phenoage(pd.DataFrame(rows)), expected, atol=2e-3)


def test_coefficients_round_to_the_published_table():
    assert round(P.INTERCEPT, 3) == P.PUBLISHED_INTERCEPT
    assert P.COEFFICIENTS.keys() == P.PUBLISHED_COEFFICIENTS.keys()
    for name, value in P.COEFFICIENTS.items():
        assert round(value, 4) == pytest.approx(P.PUBLISHED_COEFFICIENTS[name], abs=1e-12), name
    assert (P.GAMMA, P.HORIZON_MONTHS) == (0.0076927, 120)
    assert (P.AGE_INTERCEPT, P.AGE_SCALE, P.AGE_RATE) == (141.50225, 0.00553, 0.090165)


def test_closed_form_equals_the_published_two_step_formula():
    xb = np.linspace(-14.0, -3.0, 23)
    m = P.mortality_score(xb)
    two_step = P.AGE_INTERCEPT + np.log(-P.AGE_SCALE * np.log(1 - m)) / P.AGE_RATE
    np.testing.assert_allclose(P.phenoage_from_linear_predictor(xb), two_step, atol=1e-9)
    direct = 1 - np.exp(-np.exp(xb) * (np.exp(120 * P.GAMMA) - 1) / P.GAMMA)
    np.testing.assert_allclose(m, direct, rtol=1e-9)


def test_linear_predictor_by_hand_with_crp_in_mg_dl():
    frame = _row(crp=4.0)  # UKB mg/L
    coef = P.COEFFICIENTS
    by_hand = (P.INTERCEPT + coef["albumin"] * 45.0 + coef["creatinine"] * 80.0
               + coef["glucose"] * 5.0 + coef["crp"] * math.log(0.4)  # 4 mg/L = 0.4 mg/dL
               + coef["lymphocyte_pct"] * 30.0 + coef["mcv"] * 90.0 + coef["rdw"] * 13.0
               + coef["alp"] * 70.0 + coef["wbc"] * 6.5 + coef["age"] * 50.0)
    assert P.linear_predictor(frame)[0] == pytest.approx(by_hand, abs=1e-12)


def test_crp_unit_mg_l_not_mg_dl():
    # 10 mg/L is 1 mg/dL: ln 1 = 0, so the CRP term vanishes
    values = _row(crp=10.0).iloc[0]
    no_crp_term = P.INTERCEPT + sum(coef * values[name] for name, coef in P.COEFFICIENTS.items()
                                    if name != "crp")
    assert P.linear_predictor(_row(crp=10.0))[0] == pytest.approx(no_crp_term, abs=1e-12)
    # a mg/dL value passed as if mg/L reads 10x too low: PhenoAge drops by b ln(10) / 0.090165
    shift = P.phenoage(_row(crp=10.0))[0] - P.phenoage(_row(crp=1.0))[0]
    assert shift == pytest.approx(P.COEFFICIENTS["crp"] * math.log(10) / P.AGE_RATE, rel=1e-12)
    assert shift == pytest.approx(2.436, abs=1e-3)


def test_zero_crp_is_finite_and_scored_at_the_floor():
    zero = P.phenoage(_row(crp=0.0))[0]
    assert np.isfinite(zero)
    assert zero == P.phenoage(_row(crp=P.CRP_FLOOR_MG_L))[0]
    assert zero < P.phenoage(_row(crp=0.1))[0]


def test_negative_crp_names_field_and_row():
    frame = pd.concat([_row(), _row(crp=-1.0)], ignore_index=True)
    with pytest.raises(InputError) as err:
        P.phenoage(frame)
    assert err.value.field == "crp" and err.value.row == 2


@pytest.mark.parametrize("column", P.REQUIRED)
def test_missing_column_names_the_field(column):
    with pytest.raises(InputError) as err:
        P.phenoage(_row().drop(columns=[column]))
    assert err.value.field == column
    assert column in str(err.value)


def test_missing_value_gives_nan_for_that_row_only():
    frame = pd.concat([_row(), _row(glucose=np.nan)], ignore_index=True)
    out = P.phenoage(frame)
    assert np.isfinite(out[0]) and np.isnan(out[1])


_plausible = {
    "albumin": st.floats(30, 55), "creatinine": st.floats(40, 200), "glucose": st.floats(3, 15),
    "crp": st.floats(0.1, 50), "lymphocyte_pct": st.floats(10, 50), "mcv": st.floats(75, 105),
    "rdw": st.floats(11, 18), "alp": st.floats(30, 200), "wbc": st.floats(3, 12),
    "age": st.floats(20, 85),
}


@settings(max_examples=60, deadline=None)
@given(base=st.fixed_dictionaries(_plausible), marker=st.sampled_from(["crp", "glucose", "age"]),
       factor=st.floats(1.01, 3.0))
def test_higher_crp_glucose_or_age_gives_higher_phenoage(base, marker, factor):
    low = pd.DataFrame([base])
    high = low.assign(**{marker: base[marker] * factor})
    assert P.phenoage(high)[0] > P.phenoage(low)[0]


@settings(max_examples=30, deadline=None)
@given(base=st.fixed_dictionaries(_plausible))
def test_higher_albumin_gives_lower_phenoage(base):
    low = pd.DataFrame([base])
    assert P.phenoage(low.assign(albumin=base["albumin"] + 5))[0] < P.phenoage(low)[0]


def test_acceleration_is_the_residual_on_age():
    rng = np.random.default_rng(0)
    age = rng.uniform(20, 80, 200)
    pheno = 3.0 + 0.9 * age + rng.normal(0, 5, 200)
    accel = P.phenoage_acceleration(pheno, age)
    assert abs(accel.mean()) < 1e-9
    assert abs(np.corrcoef(accel, age)[0, 1]) < 1e-9


def test_acceleration_fit_ignores_rows_outside_fit_mask():
    rng = np.random.default_rng(1)
    age = rng.uniform(20, 80, 100)
    pheno = 1.0 + age + rng.normal(0, 3, 100)
    fit = np.zeros(100, bool)
    fit[:60] = True
    before = P.phenoage_acceleration(pheno, age, fit_mask=fit)
    moved = pheno.copy()
    moved[60:] += rng.normal(50, 30, 40)  # wild values in rows outside the fit
    after = P.phenoage_acceleration(moved, age, fit_mask=fit)
    np.testing.assert_allclose(after[:60], before[:60], atol=1e-12)
    # the line is the fit rows' own: residuals there have mean 0, and the rest are measured from it
    assert abs(after[:60].mean()) < 1e-9
    slope, intercept = np.polyfit(age[:60], pheno[:60], 1)
    np.testing.assert_allclose(after[60:], moved[60:] - (intercept + slope * age[60:]), atol=1e-9)
    # without the mask the same wild rows do move the line
    assert not np.allclose(P.phenoage_acceleration(moved, age)[:60], before[:60])


def test_acceleration_needs_two_fit_rows_with_different_ages():
    with pytest.raises(InputError):
        P.phenoage_acceleration(np.array([40.0, 50.0, 60.0]), np.array([40.0, 50.0, 60.0]),
                                fit_mask=np.array([True, False, False]))
