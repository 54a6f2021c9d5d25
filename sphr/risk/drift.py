"""Drift of a new export against the training distribution, per feature.

The training distribution is what the fitted model kept of it: the per-sex
normalizer's quantile grid (up to 1,000 quantiles of each raw feature on the
training partition), read as an equally weighted sample. Per feature and sex:

* **PSI** (population stability index) over the training deciles: below 0.1
  stable, 0.1-0.25 a moderate shift, above ``PSI_WARN`` (0.25) drift (warning);
* the two-sample **KS** statistic against the quantile grid (reported);
* the **unit test** already used by ``sphr score`` (:func:`sphr.risk.model.check_units`):
  the share of new values outside the training range and the ratio of medians. More than
  ``OUT_OF_RANGE_SHARE`` outside (glucose in mg/dL is x18) is a unit mistake:
  blocking.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import ks_2samp

from sphr.cohorts.normalize import QuantileNormalizer
from sphr.labels import SEX_CODE
from sphr.risk.model import MODEL_FILE, OUT_OF_RANGE_SHARE, find_model_dir

PSI_WARN = 0.25
PSI_MODERATE = 0.1
_EPS = 1e-4


def psi(expected_sample: np.ndarray, actual: np.ndarray, bins: int = 10) -> float:
    edges = np.unique(np.quantile(expected_sample, np.linspace(0, 1, bins + 1)[1:-1]))
    e = np.bincount(np.searchsorted(edges, expected_sample, side="right"),
                    minlength=len(edges) + 1) / len(expected_sample)
    a = np.bincount(np.searchsorted(edges, actual, side="right"),
                    minlength=len(edges) + 1) / len(actual)
    e, a = np.clip(e, _EPS, None), np.clip(a, _EPS, None)
    return float(np.sum((a - e) * np.log(a / e)))


def feature_drift(values: np.ndarray, grid: np.ndarray) -> dict:
    """PSI, KS, out-of-range share and median ratio of ``values`` against a quantile grid."""
    v = values[~np.isnan(values)]
    row = {"n": int(v.size), "missing_share": float(np.isnan(values).mean()) if values.size else 0.0}
    if v.size == 0:
        return {**row, "psi": float("nan"), "ks": float("nan"), "out_of_range_share": 0.0,
                "median_ratio": float("nan"), "status": "no values"}
    ref = float(np.median(grid))
    ratio = float(np.median(v) / ref) if ref else float("nan")
    out = float(((v < grid[0]) | (v > grid[-1])).mean())
    p = psi(grid, v)
    ks = float(ks_2samp(v, grid).statistic)
    status = ("unit mistake" if out > OUT_OF_RANGE_SHARE else "drift" if p > PSI_WARN
              else "moderate shift" if p > PSI_MODERATE else "ok")
    return {**row, "psi": p, "ks": ks, "out_of_range_share": out, "median_ratio": ratio,
            "status": status}


def drift_table(baseline: pd.DataFrame, model: str | Path) -> pd.DataFrame:
    """One row per sex and fitted feature of the model in ``model`` (RUN, RUN/risk or the folder)."""
    from sphr.io import read_json

    model_dir = find_model_dir(model)
    spec = read_json(model_dir / MODEL_FILE)
    rows = []
    for sex in spec["sexes"]:
        norm = QuantileNormalizer.load(model_dir / sex / "normalizer.json")
        frame = baseline.loc[baseline["sex"] == SEX_CODE[sex]]
        for j, name in enumerate(norm.features_):
            values = (frame[name].to_numpy(float) if name in frame.columns
                      else np.full(len(frame), np.nan))
            rows.append({"sex": sex, "feature": name,
                         **feature_drift(values, norm.quantiles_[:, j])})
    return pd.DataFrame(rows)


def summarize(table: pd.DataFrame) -> dict:
    """Blocking verdict (unit mistakes) and warnings (drift) of a :func:`drift_table`."""
    units = table[table["status"] == "unit mistake"]
    drift = table[table["status"] == "drift"]
    return {"passed": units.empty, "unit_mistakes": [f"{r.sex}/{r.feature}" for r in units.itertuples()],
            "drifted": [f"{r.sex}/{r.feature}" for r in drift.itertuples()],
            "max_psi": float(table["psi"].max()) if len(table) else 0.0}
