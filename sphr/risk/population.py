"""What a fitted risk model keeps of its training population, per sex and feature.

:class:`PopulationSummary` holds, for each fitted feature in raw UKB units, the number of
training values, their mean and standard deviation and the 101 percentiles 0, 1, ..., 100
(the first and last are the fitted range): no training row. ``sphr risk`` fits it on the
real (not augmented) training rows of each sex, the rows the normalizer and the marker
scaler were fitted on, and saves it as ``<sex>/population.json`` of the model folder;
:mod:`sphr.risk.serve.drift` compares a new export with it. A model fitted without the raw training
rows has it from its normalizer's quantile grid (:meth:`PopulationSummary.from_normalizer`),
taken as an equally weighted sample of the training distribution.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sphr.cohorts.normalize import QuantileNormalizer
from sphr.errors import InputError
from sphr.io import read_json, write_json

#: the file of a sex's summary in the model folder
POPULATION_FILE = "population.json"
#: the levels of the saved percentiles (0 and 100: the fitted range)
LEVELS = np.linspace(0.0, 100.0, 101)


def observed_values(rows: pd.DataFrame, features: list[str],
                    imputed: pd.DataFrame | None) -> np.ndarray:
    """``rows``' ``features`` as measured: the values the cohort step filled (``imputed``:
    eid, imputed names joined by ";", as ``cohorts/<sex>/imputed.parquet``) set missing.
    The summary is compared with a new export's measured values, so a filled median must
    not count as a training value (it would pile a decile onto the median, and every new
    export of a sparse marker would read as drift)."""
    values = rows[features].to_numpy(np.float64).copy()
    if imputed is None or imputed.empty:
        return values
    filled = dict(zip(imputed["eid"].to_numpy(np.int64), imputed["imputed"], strict=True))
    column = {f: j for j, f in enumerate(features)}
    for i, eid in enumerate(rows["eid"].to_numpy(np.int64)):
        for name in str(filled.get(eid, "")).split(";"):
            if name in column:
                values[i, column[name]] = np.nan
    return values


class PopulationSummary:
    """Per feature: ``n_``, ``mean_``, ``sd_`` and ``percentiles_`` (101 x features), raw
    units; ``features_`` names the columns."""

    def fit(self, X: np.ndarray, features: list[str]) -> PopulationSummary:
        """Summaries of the columns of ``X`` (missing values are left out per column)."""
        X = np.asarray(X, np.float64)
        if X.ndim != 2 or X.shape[1] != len(features):
            raise InputError(f"{X.shape} values for {len(features)} features")
        self.features_ = list(features)
        self.n_ = np.sum(np.isfinite(X), axis=0).astype(int)
        if (self.n_ < 2).any():
            bad = [f for f, n in zip(features, self.n_, strict=True) if n < 2]
            raise InputError(f"fewer than 2 training values of {bad[:3]}", field=bad[0])
        self.mean_ = np.nanmean(X, axis=0)
        self.sd_ = np.nanstd(X, axis=0, ddof=1)
        self.percentiles_ = np.nanpercentile(X, LEVELS, axis=0)
        return self

    @classmethod
    def from_normalizer(cls, norm: QuantileNormalizer) -> PopulationSummary:
        """The summary of the normalizer's quantile grid (a model saved without one)."""
        return cls().fit(norm.quantiles_, list(norm.features_))

    def column(self, name: str) -> dict[str, Any]:
        j = self.features_.index(name)
        return {"n": int(self.n_[j]), "mean": float(self.mean_[j]), "sd": float(self.sd_[j]),
                "percentiles": self.percentiles_[:, j]}

    def to_dict(self) -> dict[str, Any]:
        return {"levels": LEVELS.tolist(), "features": {
            name: {"n": int(self.n_[j]), "mean": float(self.mean_[j]), "sd": float(self.sd_[j]),
                   "percentiles": self.percentiles_[:, j].tolist()}
            for j, name in enumerate(self.features_)}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PopulationSummary:
        out = cls()
        feats = data["features"]
        out.features_ = list(feats)
        out.n_ = np.array([feats[f]["n"] for f in out.features_], int)
        out.mean_ = np.array([feats[f]["mean"] for f in out.features_], float)
        out.sd_ = np.array([feats[f]["sd"] for f in out.features_], float)
        out.percentiles_ = np.array([feats[f]["percentiles"] for f in out.features_], float).T
        return out

    def save(self, path: str | Path) -> Path:
        return write_json(self.to_dict(), path)

    @classmethod
    def load(cls, path: str | Path) -> PopulationSummary:
        return cls.from_dict(read_json(path))
