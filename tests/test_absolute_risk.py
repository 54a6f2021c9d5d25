"""Absolute risk and the risk-equivalent age (sphr.risk.absolute, docs/METHODS.md)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from sphr.risk import absolute
from sphr.risk.absolute import (
    ANCHOR,
    CoxRisk,
    PhenoAgeFormula,
    fit_outcome_models,
    gompertz_risk,
    shipped,
)


def cohort(n: int = 1500, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray, np.ndarray,
                                                   np.ndarray, np.ndarray]:
    """(covariates, time, event, partition, bfh): exponential deaths whose log hazard is
    0.08 age + 0.5 distance, censored uniformly up to 15 years."""
    rng = np.random.default_rng(seed)
    age = rng.uniform(40, 73, n)
    distance = rng.gamma(4.0, 0.5, n)
    xb = rng.normal(-3.0, 0.6, n)
    X = pd.DataFrame({"age": age, "distance": distance, "phenoage_xb": xb,
                      "m1": rng.normal(size=n), "m2": rng.normal(size=n)})
    hazard = np.exp(-9.0 + 0.08 * age + 0.5 * distance)
    t_event = rng.exponential(1 / hazard)
    t_cens = rng.uniform(5, 15, n)
    time, event = np.minimum(t_event, t_cens), t_event <= t_cens
    partition = rng.choice(np.array(["train", "calibration", "test"]), n, p=[0.5, 0.2, 0.3])
    bfh = rng.random(n) < 0.3
    return X, time, event, partition, bfh


def test_cox_risk_matches_lifelines_survival_function():
    """The saved numbers give lifelines' own predicted survival at 5 and 10 years."""
    from lifelines import CoxPHFitter

    X, time, event, _, bfh = cohort()
    model = CoxRisk("age_distance", ["age", "distance"]).fit(X, time, event, X[bfh])
    frame = pd.DataFrame({"time": time, "event": event.astype(int), "age": X["age"],
                          "distance": X["distance"]})
    ref = CoxPHFitter().fit(frame, "time", "event")
    surv = ref.predict_survival_function(X[["age", "distance"]].iloc[:50], times=[5.0, 10.0])
    got = model.predict(X.iloc[:50], recalibrated=False)
    np.testing.assert_allclose(got["risk_5y"], 1 - surv.loc[5.0].to_numpy(), rtol=1e-5)
    np.testing.assert_allclose(got["risk_10y"], 1 - surv.loc[10.0].to_numpy(), rtol=1e-5)
    assert (got["risk_10y_low"] <= got["risk_10y"]).all()
    assert (got["risk_10y"] <= got["risk_10y_high"]).all()


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("recalibrated", [False, True])
def test_risk_age_is_monotone_in_the_risk(seed, recalibrated):
    """Among people whose risk-equivalent age is not clipped, a higher 10-year risk never has
    a lower risk-equivalent age; the healthy reference at age a has risk_age a."""
    X, time, event, part, bfh = cohort(seed=seed)
    train, cal = part == "train", part == "calibration"
    model = CoxRisk("age_distance", ["age", "distance"]).fit(
        X[train], time[train], event[train], X[train & bfh])
    model.recalibrate(X[cal], time[cal], event[cal])
    rng = np.random.default_rng(seed + 100)
    new = pd.DataFrame({"age": rng.uniform(30, 85, 400), "distance": rng.gamma(4.0, 0.7, 400)})
    out = model.predict(new, recalibrated=recalibrated).assign(age=new["age"])
    out = out.sort_values("risk_10y")
    assert np.all(np.diff(out["risk_age"].to_numpy()) >= -1e-9)
    inside = out.loc[~out["risk_age_outside"]]
    assert len(inside) > 100
    lo, hi = model.age_range_
    assert out["risk_age"].between(lo, hi).all()
    reference = pd.DataFrame({"age": [50.0, 60.0], "distance": model.reference_["distance"]})
    np.testing.assert_allclose(model.predict(reference, recalibrated)["risk_age"], [50, 60])


def test_phenoage_formula_against_levines_published_coefficients():
    """A worked example: Levine 2018's Table (printed coefficients) by hand, 10-year mortality
    M = 1 - exp(-exp(xb) (exp(120 g) - 1) / g); the anchor gives the same to the precision of
    the printed coefficients, and its 5-year risk is the same Gompertz at 60 months."""
    from sphr.risk.phenoage import linear_predictor, mortality_score

    person = {"albumin": 42.0, "creatinine": 80.0, "glucose": 5.2, "crp": 2.0,
              "lymphocyte_pct": 30.0, "mcv": 90.0, "rdw": 13.0, "alp": 70.0, "wbc": 6.0,
              "age": 60.0}
    printed = {"albumin": -0.0336, "creatinine": 0.0095, "glucose": 0.1953,
               "crp": 0.0954, "lymphocyte_pct": -0.0120, "mcv": 0.0268, "rdw": 0.3306,
               "alp": 0.0019, "wbc": 0.0554, "age": 0.0804}
    xb = -19.907 + sum(c * (math.log(person[k] / 10) if k == "crp" else person[k])
                       for k, c in printed.items())
    g = 0.0076927
    m10 = 1 - math.exp(-math.exp(xb) * (math.exp(120 * g) - 1) / g)
    m5 = 1 - math.exp(-math.exp(xb) * (math.exp(60 * g) - 1) / g)
    frame = pd.DataFrame([person])
    ours = linear_predictor(frame)
    assert ours[0] == pytest.approx(xb, abs=0.02)  # printed vs full-precision coefficients
    # the library's own 10-year mortality of this person is the hand Gompertz above (6.06%
    # with the printed coefficients; 6.02% with the full-precision ones, 0.6% apart)
    assert mortality_score(ours)[0] == pytest.approx(m10, rel=0.01)
    X = pd.DataFrame({"age": [60.0], "phenoage_xb": ours})
    ages = pd.DataFrame({"age": [40.0, 80.0], "phenoage_xb": [0.0, 0.0]})  # the fitted ages
    anchor = PhenoAgeFormula().fit(ages, X.assign(phenoage_xb=ours - 0.5))
    risk = anchor.predict(X)
    assert risk["risk_10y"].iloc[0] == pytest.approx(m10, rel=0.03)
    assert risk["risk_5y"].iloc[0] == pytest.approx(m5, rel=0.03)
    assert gompertz_risk(ours, 120)[0] == pytest.approx(mortality_score(ours)[0], rel=1e-12)
    # the reference's xb at age 60 is 0.5 lower: it reaches this risk 0.5 / b_age years later
    assert risk["risk_age"].iloc[0] == pytest.approx(60 + 0.5 / 0.08035356, abs=1e-6)
    assert not risk["risk_age_outside"].iloc[0]


def test_moving_held_out_rows_changes_no_fitted_number():
    """Leakage: the Cox coefficients and training baseline see only training rows, the
    recalibration only calibration rows; changing test rows (covariates and outcomes, BFH
    included) changes nothing fitted, changing calibration rows changes only the
    recalibration."""
    X, time, event, part, bfh = cohort(seed=3)
    features = ["m1", "m2"]
    before, _ = fit_outcome_models(X, part, bfh, time, event, "death", features)
    rng = np.random.default_rng(9)
    test = part == "test"
    X2, t2, e2 = X.copy(), time.copy(), event.copy()
    X2.loc[test, ["age", "distance", "m1", "phenoage_xb"]] *= 1.7
    t2[test], e2[test] = rng.uniform(0.1, 3, test.sum()), True
    after, _ = fit_outcome_models(X2, part, bfh, t2, e2, "death", features)
    assert set(before) == set(after) == {*absolute.CANDIDATES, ANCHOR}
    for cand in before:
        assert before[cand].to_dict() == after[cand].to_dict(), cand
    cal = part == "calibration"
    t3 = time.copy()
    t3[cal] = t3[cal] * 0.5
    moved, _ = fit_outcome_models(X, part, bfh, t3, event, "death", features)
    for cand in absolute.CANDIDATES:
        a, b = before[cand].to_dict(), moved[cand].to_dict()
        assert {k: a[k] for k in ("coef_", "cov_", "baseline_", "reference_")} == \
            {k: b[k] for k in ("coef_", "cov_", "baseline_", "reference_")}
        assert a["cal_baseline_"] != b["cal_baseline_"]


def test_too_few_events_are_skipped_with_the_reason():
    X, time, event, part, bfh = cohort(n=300, seed=1)
    models, skipped = fit_outcome_models(X, part, bfh, time, event, "cancer", ["m1"],
                                         min_events=10_000)
    assert models == {}
    assert set(skipped) == set(absolute.CANDIDATES)
    assert all("training events" in why and "10000 needed" in why for why in skipped.values())
    # no PhenoAge column: its candidate is skipped, the others fitted
    models, skipped = fit_outcome_models(X.drop(columns="phenoage_xb"), part, bfh, time,
                                         event, "death", ["m1"])
    assert "age_phenoage" in skipped and "phenoage_xb" in skipped["age_phenoage"]
    assert "age_distance" in models and ANCHOR not in models


def test_absolute_validation_of_a_true_risk_is_calibrated():
    """Simulated with known hazards: the true 10-year risk has O/E and slope near 1, and the
    IPCW Brier without censoring before 10 years is the plain mean squared error."""
    from sphr.risk.validation.absolute import absolute_validation
    from sphr.survival import brier_weighted

    rng = np.random.default_rng(5)
    n = 6000
    lp = rng.normal(0, 0.8, n)
    rate = 0.01 * np.exp(lp)
    t = rng.exponential(1 / rate)
    c = rng.uniform(4, 14, n)
    risks = pd.DataFrame({"eid": np.arange(n), "sex": "female", "outcome": "death",
                          "method": "truth", "recalibrated": False,
                          "risk_10y": -np.expm1(-rate * 10)})
    outcomes = pd.DataFrame({"eid": np.arange(n), "outcome": "death",
                             "event": (t <= c).astype(int), "time_years": np.minimum(t, c),
                             "prevalent": False})
    metrics, deciles = absolute_validation(risks, outcomes, n_bootstrap=50)
    r = metrics.iloc[0]
    assert r.oe_low < 1 < r.oe_high and 0.85 < r.slope < 1.15
    assert r.c_index_low < r.c_index < r.c_index_high
    assert len(deciles) == 10 and deciles["n"].sum() == n
    # no censoring before the horizon: Brier = mean (outcome - risk)^2
    t_full = np.where(t > 10, 12.0, t)
    y = (t_full <= 10).astype(float)
    p = risks["risk_10y"].to_numpy()
    got = brier_weighted(t_full, t_full <= 10, p, 10.0, np.ones((1, n)))[0]
    assert got == pytest.approx(np.mean((y - p) ** 2), rel=1e-12)


@pytest.fixture(scope="module")
def small_run(tmp_path_factory, ingest_dir, cohorts_dir):
    run = tmp_path_factory.mktemp("absrun")
    (run / "ingest").symlink_to(ingest_dir)
    (run / "cohorts").symlink_to(cohorts_dir)
    return run


def test_fit_save_load_score_gives_the_same_absolute_risk(small_run, ukb_export, tmp_path):
    """RiskModel.fit -> save -> load -> score: every candidate's numbers for every person the
    fit scored, identical; the shipped table has the issue's columns; an outcome without
    enough events is skipped with its reason in the model."""
    from sphr.risk.config import RiskConfig
    from sphr.risk.fit import fit_run
    from sphr.risk.model import RiskModel

    config = RiskConfig(methods=("raw_euclidean",), device="cpu", absolute_min_events=8)
    fitted = fit_run(small_run, config)
    rows = fitted.absolute_rows_
    assert {"death"} <= set(rows["outcome"]) and {ANCHOR, "age_distance"} <= set(rows["method"])
    fitted.save(tmp_path / "model")
    loaded = RiskModel.load(tmp_path / "model", device="cpu")
    baseline = pd.read_parquet(small_run / "ingest" / "baseline.parquet")
    scored = loaded.score_cohort(baseline).absolute
    keys = ["eid", "outcome", "method", "recalibrated"]
    both = rows.merge(scored, on=keys, suffixes=("", "_new"))
    assert len(both) == len(rows)
    for col in ("risk_5y", "risk_10y", "risk_10y_low", "risk_10y_high", "risk_age"):
        np.testing.assert_allclose(both[f"{col}_new"], both[col], rtol=1e-12, atol=1e-12,
                                   err_msg=col)
    ship = shipped(scored, config.absolute_method, config.absolute_recalibrate)
    assert {"eid", "sex", "outcome", "risk_5y", "risk_10y", "risk_10y_low", "risk_10y_high",
            "risk_age"} <= set(ship.columns)
    assert not ship.duplicated(["eid", "outcome"]).any()
    # `sphr score` writes the shipped rows as absolute_risk.parquet, the same numbers
    from sphr.risk.serve.apply import run_score

    run_score(tmp_path / "model", ukb_export, tmp_path / "out", device="cpu")
    written = pd.read_parquet(tmp_path / "out" / "absolute_risk.parquet")
    assert tuple(written.columns) == absolute.COLUMNS
    again = written.merge(ship, on=["eid", "outcome"], suffixes=("", "_ship"))
    assert len(again) == len(ship) == len(written)
    np.testing.assert_allclose(again["risk_10y"], again["risk_10y_ship"], rtol=1e-12)
    # too few events: every outcome's candidates skipped, each with the reason, in the model
    few = fit_run(small_run, RiskConfig(methods=("raw_euclidean",), device="cpu",
                                        absolute_min_events=10_000))
    assert set(few.absolute_rows_["method"]) == {ANCHOR}  # nothing fitted: no events needed
    why = {k: v for k, v in few.skipped_.items() if k.startswith("female/absolute_death_")}
    assert set(why) == {f"female/absolute_death_{c}" for c in absolute.CANDIDATES}
    assert all("10000 needed" in v for v in why.values())
