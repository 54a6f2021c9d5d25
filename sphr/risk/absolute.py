"""Absolute risk: a 5- and 10-year risk with an interval, and a risk-equivalent age.

docs/METHODS.md, "Absolute risk and the risk-equivalent age" (pre-registered): per sex and
linked outcome, Cox models (lifelines ``CoxPHFitter`` through :func:`sphr.survival.cox_fit`)
on the training partition, recalibrated on the calibration partition, and PhenoAge's own
Gompertz mortality formula as an anchor that nothing fits.

* :class:`CoxRisk`: one candidate (``age``, ``age_distance``, ``age_phenoage``,
  ``ridge_markers``); ``fit`` on training rows, ``recalibrate`` on calibration rows (the
  training fit's linear predictor as the one covariate of a second Cox fit: calibration slope
  and Breslow baseline), ``predict`` on anyone from the saved numbers alone (no lifelines).
* :class:`PhenoAgeFormula`: the anchor (death only).
* :func:`fit_outcome_models`: every candidate of one sex and outcome, or the reason it is
  skipped; :func:`predict_all`: their rows for a covariate frame.

Every candidate is linear in age, so the healthy reference's linear predictor is a line in
age and the risk-equivalent age is where that line meets a person's linear predictor
(monotone in the risk by construction); outside the training ages it is clipped and flagged.
The interval is the delta method on the linear predictor (the covariance of the Cox
coefficients, and of the calibration slope when recalibrated), without the baseline
hazard's uncertainty.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from sphr.errors import InputError
from sphr.risk import phenoage as pheno
from sphr.risk.config import ABSOLUTE_CANDIDATES, RiskConfig
from sphr.survival import Z95, cox_fit, risk_set_times

#: the fitted candidates (docs/METHODS.md), fewest covariates first
CANDIDATES: tuple[str, ...] = ABSOLUTE_CANDIDATES
#: PhenoAge's own 10-year mortality formula: reported beside, never shipped
ANCHOR = "phenoage_formula"
#: the covariate names of the frame every candidate reads (plus the marker-space features)
AGE, DISTANCE, PHENOAGE_XB = "age", "distance", "phenoage_xb"
#: years
HORIZONS: tuple[float, ...] = (5.0, 10.0)
#: lifelines' ridge penalty of ``ridge_markers`` on the (standardized) markers; age is free
RIDGE_PENALIZER = 0.05
#: fewest training events of an outcome to fit its candidates; of calibration events to
#: recalibrate
MIN_EVENTS = RiskConfig.absolute_min_events
MIN_CALIBRATION_EVENTS = 5
#: the columns of absolute_risk.parquet (the candidates' table adds ``method``, ``recalibrated``)
COLUMNS: tuple[str, ...] = ("eid", "sex", "outcome", "risk_5y", "risk_10y", "risk_10y_low",
                            "risk_10y_high", "risk_age", "risk_age_outside", "partition")


def covariates_of(candidate: str, features: list[str]) -> list[str]:
    """The covariates of a candidate, age first."""
    return {"age": [AGE], "age_distance": [AGE, DISTANCE], "age_phenoage": [AGE, PHENOAGE_XB],
            "ridge_markers": [AGE, *(f for f in features if f != AGE)]}[candidate]


def _horizon_key(h: float) -> str:
    return f"{h:g}"


def _baseline_at(fit: Any, horizons: tuple[float, ...], followed: float) -> dict[str, float]:
    """lifelines' Breslow cumulative baseline hazard at each horizon (at the fit's covariate
    means); NaN past ``followed``, the longest follow-up of the fitted rows."""
    bch = fit.baseline_cumulative_hazard_
    t, h = bch.index.to_numpy(float), bch.iloc[:, 0].to_numpy(float)
    out = {}
    for hz in horizons:
        k = np.searchsorted(t, hz, side="right") - 1
        out[_horizon_key(hz)] = float(h[k]) if k >= 0 and followed >= hz else float("nan")
    return out


def _frame(X: pd.DataFrame, time: np.ndarray, event: np.ndarray) -> pd.DataFrame:
    return risk_set_times(pd.DataFrame({"time": np.maximum(np.asarray(time, float), 1e-6),
                                        "event": np.asarray(event, int),
                                        **{c: X[c].to_numpy(float) for c in X.columns}}))


class CoxRisk:
    """One candidate's Cox model (scikit-learn style: parameters in ``__init__``, fitted
    attributes with ``_``).

    Fitted: ``coef_``, ``mean_`` (covariate -> value), ``cov_`` (covariance of the
    coefficients), ``baseline_`` (horizon -> training Breslow H0 at ``mean_``), ``events_``,
    ``age_range_``, ``reference_`` (the healthy reference's covariates but age); after
    :meth:`recalibrate` also ``slope_``, ``slope_var_``, ``cal_mean_``, ``cal_baseline_``
    (or ``recalibration_`` says why not).
    """

    def __init__(self, candidate: str, covariates: list[str], penalizer: float = 0.0,
                 horizons: tuple[float, ...] = HORIZONS, min_events: int = MIN_EVENTS) -> None:
        self.candidate, self.covariates = candidate, list(covariates)
        self.penalizer, self.horizons, self.min_events = penalizer, tuple(horizons), min_events

    def fit(self, X: pd.DataFrame, time: np.ndarray, event: np.ndarray,
            reference: pd.DataFrame) -> CoxRisk:
        """Fit on the training rows ``X`` (the covariates); ``reference``: the training BFH's
        covariates, whose medians (age aside) are the healthy reference."""
        X = X[self.covariates]
        ok = np.isfinite(X.to_numpy(float)).all(axis=1) & np.isfinite(time)
        n_events = int(np.asarray(event, bool)[ok].sum())
        if n_events < self.min_events:
            raise InputError(f"{n_events} training events among {int(ok.sum())} people "
                             f"(at least {self.min_events} needed)")
        penalty = np.array([0.0 if c == AGE else self.penalizer for c in self.covariates])
        fit = cox_fit(_frame(X.loc[ok], time[ok], event[ok]),
                      penalty if self.penalizer > 0 else 0.0)
        if fit is None:
            raise InputError("the Cox fit did not converge")
        self.coef_ = {c: float(fit.params_[c]) for c in self.covariates}
        self.mean_ = {c: float(fit._norm_mean[c]) for c in self.covariates}
        self.cov_ = fit.variance_matrix_.loc[self.covariates, self.covariates].to_numpy(
            float).tolist()
        self.baseline_ = _baseline_at(fit, self.horizons, float(np.max(time[ok])))
        self.events_ = {"train": n_events, "train_n": int(ok.sum())}
        ages = X.loc[ok, AGE].to_numpy(float)
        self.age_range_ = [float(ages.min()), float(ages.max())]
        ref = reference[self.covariates[1:]].median()
        self.reference_ = {c: float(ref[c]) for c in self.covariates[1:]}
        self.recalibration_, self.slope_ = "not done", None
        return self

    def linear_predictor(self, X: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        """(lp, its variance) of each row: (x - mean) b and the delta method's x'Cov x."""
        d = X[self.covariates].to_numpy(float) - np.array([self.mean_[c] for c in
                                                           self.covariates])
        b = np.array([self.coef_[c] for c in self.covariates])
        return d @ b, np.einsum("ij,jk,ik->i", d, np.asarray(self.cov_), d)

    def recalibrate(self, X: pd.DataFrame, time: np.ndarray, event: np.ndarray) -> CoxRisk:
        """The calibration slope and baseline on the calibration rows (module docstring)."""
        lp, _ = self.linear_predictor(X)
        ok = np.isfinite(lp) & np.isfinite(time)
        n_events = int(np.asarray(event, bool)[ok].sum())
        self.events_["calibration"], self.events_["calibration_n"] = n_events, int(ok.sum())
        if n_events < MIN_CALIBRATION_EVENTS:
            self.recalibration_ = (f"not done: {n_events} calibration events (at least "
                                   f"{MIN_CALIBRATION_EVENTS} needed)")
            return self
        fit = cox_fit(_frame(pd.DataFrame({"lp": lp[ok]}), time[ok], event[ok]))
        if fit is None:
            self.recalibration_ = "not done: the calibration Cox fit did not converge"
            return self
        self.slope_ = float(fit.params_["lp"])
        self.slope_var_ = float(fit.standard_errors_["lp"]) ** 2
        self.cal_mean_ = float(fit._norm_mean["lp"])
        self.cal_baseline_ = _baseline_at(fit, self.horizons, float(np.max(time[ok])))
        self.recalibration_ = "done"
        return self

    @property
    def recalibrated_(self) -> bool:
        return self.slope_ is not None

    def predict(self, X: pd.DataFrame, recalibrated: bool = True) -> pd.DataFrame:
        """risk_5y, risk_10y, risk_10y_low, risk_10y_high, risk_age, risk_age_outside; the
        training fit's own baseline where ``recalibrated`` is False or it was not done."""
        lp, var = self.linear_predictor(X)
        if recalibrated and self.recalibrated_:
            centred = lp - self.cal_mean_
            eta = self.slope_ * centred
            var = self.slope_ ** 2 * var + centred ** 2 * self.slope_var_
            base = self.cal_baseline_
        else:
            eta, base = lp, self.baseline_
        out = {}
        for h in self.horizons:
            out[f"risk_{h:g}y"] = -np.expm1(-base[_horizon_key(h)] * np.exp(eta))
        sd = np.sqrt(np.maximum(var, 0.0))
        h10 = base.get("10", float("nan"))
        out["risk_10y_low"] = -np.expm1(-h10 * np.exp(eta - Z95 * sd))
        out["risk_10y_high"] = -np.expm1(-h10 * np.exp(eta + Z95 * sd))
        # the reference's lp at age a: sum over the other covariates + b_age (a - mean_age)
        rest = sum(self.coef_[c] * (self.reference_[c] - self.mean_[c])
                   for c in self.covariates[1:])
        b_age = self.coef_[AGE]
        age = self.mean_[AGE] + (lp - rest) / b_age if b_age > 0 else np.full(len(lp), np.nan)
        out.update(_clipped_age(age, self.age_range_))
        return pd.DataFrame(out)

    def to_dict(self) -> dict[str, Any]:
        keys = ("coef_", "mean_", "cov_", "baseline_", "events_", "age_range_", "reference_",
                "recalibration_", "slope_")
        spec = {"kind": "cox", "candidate": self.candidate, "covariates": self.covariates,
                "penalizer": self.penalizer, "horizons": list(self.horizons),
                "min_events": self.min_events, **{k: getattr(self, k) for k in keys}}
        if self.recalibrated_:
            spec.update(slope_var_=self.slope_var_, cal_mean_=self.cal_mean_,
                        cal_baseline_=self.cal_baseline_)
        return spec

    @classmethod
    def from_dict(cls, spec: dict[str, Any]) -> CoxRisk:
        model = cls(spec["candidate"], spec["covariates"], spec["penalizer"],
                    tuple(spec["horizons"]), spec["min_events"])
        for k, v in spec.items():
            if k.endswith("_"):
                setattr(model, k, v)
        return model


def _clipped_age(age: np.ndarray, age_range: list[float]) -> dict[str, np.ndarray]:
    lo, hi = age_range
    outside = np.isfinite(age) & ((age < lo) | (age > hi))
    return {"risk_age": np.clip(age, lo, hi), "risk_age_outside": outside}


class PhenoAgeFormula:
    """PhenoAge's own Gompertz mortality (Levine 2018), death only, nothing fitted; the
    healthy reference is the training BFH's median xb less its age term. Fitted:
    ``reference_``, ``age_range_``."""

    candidate = ANCHOR
    recalibrated_ = False

    def __init__(self, horizons: tuple[float, ...] = HORIZONS) -> None:
        self.horizons = tuple(horizons)

    def fit(self, X: pd.DataFrame, reference: pd.DataFrame) -> PhenoAgeFormula:
        b_age = pheno.COEFFICIENTS["age"]
        rest = (reference[PHENOAGE_XB] - b_age * reference[AGE]).dropna()
        if rest.empty:
            raise InputError("no training BFH with PhenoAge's nine markers")
        self.reference_ = float(rest.median())
        ages = X[AGE].to_numpy(float)
        self.age_range_ = [float(np.nanmin(ages)), float(np.nanmax(ages))]
        return self

    def predict(self, X: pd.DataFrame, recalibrated: bool = False) -> pd.DataFrame:
        xb = X[PHENOAGE_XB].to_numpy(float)
        out = {f"risk_{h:g}y": gompertz_risk(xb, 12 * h) for h in self.horizons}
        nan = np.full(len(xb), np.nan)  # nothing fitted: no interval of a fit
        out.update(risk_10y_low=nan, risk_10y_high=nan)
        out.update(_clipped_age((xb - self.reference_) / pheno.COEFFICIENTS["age"],
                                self.age_range_))
        return pd.DataFrame(out)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "phenoage_formula", "candidate": ANCHOR, "horizons": list(self.horizons),
                "reference_": self.reference_, "age_range_": self.age_range_}

    @classmethod
    def from_dict(cls, spec: dict[str, Any]) -> PhenoAgeFormula:
        model = cls(tuple(spec["horizons"]))
        model.reference_, model.age_range_ = spec["reference_"], spec["age_range_"]
        return model


def gompertz_risk(xb: np.ndarray, months: float) -> np.ndarray:
    """PhenoAge's mortality by ``months``: 1 - exp(-exp(xb) (exp(g t) - 1) / g); at 120 months
    :func:`sphr.risk.phenoage.mortality_score` (Levine 2018)."""
    factor = math.expm1(months * pheno.GAMMA) / pheno.GAMMA
    return -np.expm1(-np.exp(np.asarray(xb, float)) * factor)


def load_model(spec: dict[str, Any]) -> CoxRisk | PhenoAgeFormula:
    return PhenoAgeFormula.from_dict(spec) if spec["kind"] == ANCHOR else CoxRisk.from_dict(spec)


# ----------------------------------------------------------------------------- per outcome

def outcome_arrays(eids: np.ndarray, outcomes: pd.DataFrame, outcome: str
                   ) -> tuple[np.ndarray, np.ndarray]:
    """(time in years, event) per eid; NaN time where the person has no row or is a prevalent
    case (not at risk). Death before a non-death outcome censors it (cause-specific hazard,
    docs/METHODS.md)."""
    oc = outcomes.loc[(outcomes["outcome"] == outcome) & ~outcomes["prevalent"].astype(bool)]
    oc = oc.drop_duplicates("eid").set_index("eid").reindex(np.asarray(eids, np.int64))
    return oc["time_years"].to_numpy(float), oc["event"].fillna(0).to_numpy(float) == 1


def fit_outcome_models(X: pd.DataFrame, partition: np.ndarray, bfh: np.ndarray,
                       time: np.ndarray, event: np.ndarray, outcome: str, features: list[str],
                       min_events: int = MIN_EVENTS
                       ) -> tuple[dict[str, CoxRisk | PhenoAgeFormula], dict[str, str]]:
    """Every candidate of one outcome (and the anchor for death): fitted on the ``train``
    rows, recalibrated on the ``calibration`` rows; ``X`` holds every covariate of every
    person. Returns (models, skipped: candidate -> reason)."""
    train, cal = partition == "train", partition == "calibration"
    reference = X.loc[train & bfh]
    models: dict[str, CoxRisk | PhenoAgeFormula] = {}
    skipped: dict[str, str] = {}
    for cand in CANDIDATES:
        covs = covariates_of(cand, features)
        missing = [c for c in covs if c not in X.columns or not np.isfinite(
            X.loc[train, c].to_numpy(float)).any()]
        if missing:
            skipped[cand] = f"no {', '.join(missing[:3])} for the training participants"
            continue
        model = CoxRisk(cand, covs, RIDGE_PENALIZER if cand == "ridge_markers" else 0.0,
                        min_events=min_events)
        try:
            model.fit(X.loc[train], time[train], event[train], reference)
        except InputError as exc:
            skipped[cand] = str(exc)
            continue
        models[cand] = model.recalibrate(X.loc[cal], time[cal], event[cal])
    if outcome == "death" and PHENOAGE_XB in X.columns:
        try:
            models[ANCHOR] = PhenoAgeFormula().fit(X.loc[train], reference)
        except InputError as exc:
            skipped[ANCHOR] = str(exc)
    return models, skipped


def predict_all(models: dict[str, dict[str, CoxRisk | PhenoAgeFormula]], X: pd.DataFrame,
                eids: np.ndarray) -> pd.DataFrame:
    """One row per person, outcome, candidate and baseline (``recalibrated`` True / False;
    only False where the recalibration was not done): eid, outcome, method, recalibrated
    and the risk columns. A person without a covariate gets no row."""
    frames = []
    for outcome, by_cand in models.items():
        for cand, model in by_cand.items():
            for recal in (True, False) if model.recalibrated_ else (False,):
                res = model.predict(X, recalibrated=recal)
                res.insert(0, "eid", np.asarray(eids, np.int64))
                res = res.assign(outcome=outcome, method=cand, recalibrated=recal)
                frames.append(res.loc[np.isfinite(res["risk_10y"].to_numpy(float))
                                      | np.isfinite(res["risk_5y"].to_numpy(float))])
    if not frames:
        return pd.DataFrame(columns=["eid", "outcome", "method", "recalibrated", "risk_5y",
                                     "risk_10y", "risk_10y_low", "risk_10y_high", "risk_age",
                                     "risk_age_outside"])
    return pd.concat(frames, ignore_index=True)


def shipped(candidates: pd.DataFrame, method: str, recalibrate: bool) -> pd.DataFrame:
    """The shipped rows of the candidates' table (:data:`COLUMNS`): ``method`` with the
    recalibrated baseline where ``recalibrate`` and it was done, else the training baseline."""
    rows = candidates.loc[candidates["method"] == method]
    if recalibrate:  # per outcome: recalibrated rows where they exist
        has = rows.groupby("outcome")["recalibrated"].transform("any")
        rows = rows.loc[rows["recalibrated"] == has]
    else:
        rows = rows.loc[~rows["recalibrated"].astype(bool)]
    return rows[list(COLUMNS)].reset_index(drop=True)
