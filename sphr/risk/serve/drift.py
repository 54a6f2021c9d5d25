"""Drift of a new export against a fitted model's training population, per sex and feature.

The one drift table of the project: ``sphr score`` writes it as ``OUT/drift.csv`` (and
refuses to score with ``--on-drift refuse``), the refresh checks and writes it before it
scores. The training population is the model's :class:`~sphr.risk.population.PopulationSummary`
(raw UKB units: n, mean, SD, the 101 percentiles). Per sex and feature (docs/notes/TRANSPORT.md,
"Drift"):

* ``smd``: standardized mean difference, (new mean - training mean) / training SD;
* ``psi``: population stability index over the training deciles;
* ``ks``: the two-sample Kolmogorov-Smirnov statistic against the percentile grid;
* ``out_of_range_share``: the share of new values outside the fitted range (training
  minimum to maximum) and ``median_ratio`` (new median / training median);
* ``status``: ``units`` when more than ``OUT_OF_RANGE_SHARE`` (half) of the new values lie
  outside the fitted range (glucose in mg/dL is x18: a unit mistake, blocking); else
  ``drift`` when |SMD| >= ``SMD_DRIFT`` or PSI >= ``PSI_DRIFT``; else ``moderate`` when
  |SMD| >= ``SMD_MODERATE`` or PSI >= ``PSI_MODERATE``; else ``ok``. A feature with fewer
  than ``MIN_VALUES`` new values is ``few values`` (too few to tell), never an alarm.

The thresholds are effect sizes, not tests: a large export is not flagged for a shift of
no consequence, and a split of one cohort (sampling noise only) stays ``ok`` or at worst
``moderate`` (tests/test_drift_transport.py).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import ks_2samp

from sphr.labels import SEX_CODE
from sphr.risk.model import OUT_OF_RANGE_SHARE, RiskModel, find_model_dir, read_spec
from sphr.risk.population import POPULATION_FILE, PopulationSummary

#: |SMD| at or above which a feature has drifted / moved moderately
SMD_DRIFT = 0.25
SMD_MODERATE = 0.1
#: PSI at or above which a feature has drifted / moved moderately (the usual 0.25 / 0.1)
PSI_DRIFT = 0.25
PSI_MODERATE = 0.1
#: fewer new values than this: status "few values" (no verdict)
MIN_VALUES = 20
#: the statuses, mildest first
STATUSES: tuple[str, ...] = ("ok", "few values", "no values", "moderate", "drift", "units")
COLUMNS: tuple[str, ...] = ("sex", "feature", "n", "missing_share", "training_mean",
                            "training_sd", "new_mean", "smd", "psi", "ks",
                            "out_of_range_share", "median_ratio", "status")
_EPS = 1e-4


def psi(expected_sample: np.ndarray, actual: np.ndarray, bins: int = 10) -> float:
    """Population stability index of ``actual`` against the deciles of ``expected_sample``."""
    edges = np.unique(np.quantile(expected_sample, np.linspace(0, 1, bins + 1)[1:-1]))
    e = np.bincount(np.searchsorted(edges, expected_sample, side="right"),
                    minlength=len(edges) + 1) / len(expected_sample)
    a = np.bincount(np.searchsorted(edges, actual, side="right"),
                    minlength=len(edges) + 1) / len(actual)
    e, a = np.clip(e, _EPS, None), np.clip(a, _EPS, None)
    return float(np.sum((a - e) * np.log(a / e)))


def status_of(smd: float, psi_value: float, out_of_range: float, n: int) -> str:
    """The status of one sex and feature (module docstring, thresholds above)."""
    if n == 0:
        return "no values"
    if out_of_range > OUT_OF_RANGE_SHARE:
        return "units"
    if n < MIN_VALUES:
        return "few values"
    size = abs(smd) if np.isfinite(smd) else 0.0
    if size >= SMD_DRIFT or psi_value >= PSI_DRIFT:
        return "drift"
    if size >= SMD_MODERATE or psi_value >= PSI_MODERATE:
        return "moderate"
    return "ok"


def feature_drift(values: np.ndarray, training: dict) -> dict:
    """One row of the table: ``values`` (new, raw units, NaN missing) against ``training``
    (:meth:`PopulationSummary.column`: n, mean, sd, percentiles)."""
    values = np.asarray(values, float)
    v = values[np.isfinite(values)]
    grid = np.asarray(training["percentiles"], float)
    row = {"n": int(v.size), "missing_share": float(np.isnan(values).mean()) if values.size
           else 0.0, "training_mean": training["mean"], "training_sd": training["sd"]}
    if v.size == 0:
        return {**row, "new_mean": np.nan, "smd": np.nan, "psi": np.nan, "ks": np.nan,
                "out_of_range_share": 0.0, "median_ratio": np.nan, "status": "no values"}
    sd = training["sd"]
    smd = float((v.mean() - training["mean"]) / sd) if sd > 0 else 0.0
    ref = float(np.median(grid))
    out = float(((v < grid[0]) | (v > grid[-1])).mean())
    p, ks = psi(grid, v), float(ks_2samp(v, grid).statistic)
    return {**row, "new_mean": float(v.mean()), "smd": smd, "psi": p, "ks": ks,
            "out_of_range_share": out,
            "median_ratio": float(np.median(v) / ref) if ref else np.nan,
            "status": status_of(smd, p, out, int(v.size))}


def sex_drift(baseline: pd.DataFrame, sex: str, population: PopulationSummary) -> pd.DataFrame:
    """The table's rows of one sex: its people of ``baseline`` against its training
    ``population`` (every feature the model was fitted on)."""
    frame = baseline.loc[baseline["sex"] == SEX_CODE[sex]]
    rows = []
    for name in population.features_:
        values = (frame[name].to_numpy(float) if name in frame.columns
                  else np.full(len(frame), np.nan))
        rows.append({"sex": sex, "feature": name,
                     **feature_drift(values, population.column(name))})
    return pd.DataFrame(rows, columns=list(COLUMNS))


def populations(model: RiskModel | str | Path) -> dict[str, PopulationSummary]:
    """Sex -> training population of a fitted or loaded model, or of the one saved in
    ``model`` (RUN, RUN/risk or the model folder; read without loading the representations)."""
    if isinstance(model, RiskModel):
        return {sex: m.population_ for sex, m in model.sexes_.items()}
    directory = find_model_dir(model)
    return {sex: PopulationSummary.load(directory / sex / POPULATION_FILE)
            for sex in read_spec(directory)["sexes"]}


def drift_table(baseline: pd.DataFrame, model: RiskModel | str | Path) -> pd.DataFrame:
    """One row per sex and fitted feature (:data:`COLUMNS`); ``model``: a fitted or loaded
    :class:`RiskModel`, or where one is saved (RUN, RUN/risk or the model folder)."""
    frames = [sex_drift(baseline, sex, pop) for sex, pop in populations(model).items()]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(COLUMNS))


def _named(rows: pd.DataFrame) -> list[str]:
    return [f"{r.sex}/{r.feature}" for r in rows.itertuples()]


def summarize(table: pd.DataFrame) -> dict:
    """Blocking verdict (unit mistakes), the drifted and moderate features, largest shifts."""
    units = table[table["status"] == "units"]
    drift = table[table["status"] == "drift"].assign(size=lambda t: t["smd"].abs())
    drift = drift.sort_values("size", ascending=False)
    return {"passed": units.empty, "unit_mistakes": _named(units), "drifted": _named(drift),
            "moderate": _named(table[table["status"] == "moderate"]),
            "shifts": {f"{r.sex}/{r.feature}": {"smd": round(float(r.smd), 3),
                                                 "psi": round(float(r.psi), 3)}
                       for r in drift.itertuples()},
            "max_psi": float(table["psi"].max()) if len(table) else 0.0,
            "max_abs_smd": float(table["smd"].abs().max()) if len(table) else 0.0}


def drift_line(table: pd.DataFrame) -> str:
    """One printed line: the features that drifted (largest |SMD| first) or that none did."""
    verdict = summarize(table)
    if verdict["unit_mistakes"]:
        return "drift: units differ for " + ", ".join(verdict["unit_mistakes"])
    if not verdict["drifted"]:
        return (f"drift: none of {len(table)} sex-feature pairs drifted "
                f"({len(verdict['moderate'])} moderate)")
    items = [f"{k} (SMD {v['smd']:+.2f}, PSI {v['psi']:.2f})" for k, v in verdict["shifts"].items()]
    return f"drift: {len(items)} of {len(table)} sex-feature pairs drifted: " + ", ".join(items)
