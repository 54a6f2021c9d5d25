"""Risk scores given per person, beside the distance methods.

``phenoage``
    PhenoAge acceleration (Levine et al. 2018; :mod:`sphr.risk.phenoage`) from the raw
    (UKB-unit) markers of ``ingest/baseline.parquet``: the residual of PhenoAge on age,
    the line fitted on the training partition only. Computed for every participant who
    has the nine markers, whatever the cohort's completeness filter kept (CRP can fall
    below the threshold while most people have it); the others are "not scored" for
    this method and counted (:func:`phenoage_scores`).
``supervised_*``
    The supervised comparators (:mod:`sphr.risk.supervised`): they use the outcome.

Every score goes through the same calibration and groups as the distance methods:
:class:`ScoreModel` standardizes the score for age among healthy people and takes the
bounds from the calibration BFH (:func:`sphr.risk.calibration.calibrate`; people without a
score are left out of both).
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pandas as pd

from sphr.cohorts.age import group_names
from sphr.errors import InputError
from sphr.risk.calibration import (
    TAIL_BOUND,
    AgeStandardizer,
    CalibratedBounds,
    Healthy,
    calibrate,
)
from sphr.risk.centiles import HealthyCentiles

log = logging.getLogger(__name__)

class ScoreModel:
    """Calibrated Normal / Lower Risk / Higher Risk for a score given per person."""

    def __init__(self, method: str, age_groups: tuple[tuple[int, int], ...],
                 standardize_min_group: int = 30,
                 standardization: str = "training_groups", tail_bound: str = TAIL_BOUND
                 ) -> None:
        self.method = method
        self.age_groups = tuple(tuple(g) for g in age_groups)
        self.standardize_min_group = standardize_min_group
        self.standardization = standardization
        self.tail_bound = tail_bound
        self.standardizer = AgeStandardizer(group_names(self.age_groups), standardize_min_group)
        self.bounds: CalibratedBounds | None = None
        #: the healthy-reference centiles that replace the standardizer and bounds where the
        #: cross-fit set them (:mod:`sphr.risk.crossfit`)
        self.centiles: HealthyCentiles | None = None

    def fit(self, train: Healthy, calibration: Healthy) -> ScoreModel:
        """The age standardization and the bounds from the training and calibration BFH's
        scores (:func:`sphr.risk.calibration.calibrate`; people without a score, NaN, are
        left out of both)."""
        t, c = np.isfinite(train.scores), np.isfinite(calibration.scores)
        if t.sum() < 2 or c.sum() < 3:
            raise InputError(f"too few bona fide healthy people with a {self.method} score "
                             f"({int(t.sum())} training, {int(c.sum())} calibration)")
        self.standardizer, self.bounds = calibrate(
            self.standardization, group_names(self.age_groups), train.rows(t),
            calibration.rows(c), self.standardize_min_group, self.tail_bound)
        return self

    def transform(self, scores: np.ndarray, groups: np.ndarray,
                  ages: np.ndarray | None = None) -> pd.DataFrame:
        """One row per person; a person without a score (NaN) gets no group (None)."""
        if self.centiles is not None:
            from sphr.risk.distance import centile_rows

            return centile_rows(self.centiles, scores, groups, ages)
        c, s = self.standardizer.location_scale(groups, ages) if len(groups) else (
            np.empty(0), np.empty(0))
        z = (np.asarray(scores, np.float64) - c) / s
        group = np.full(len(z), None, dtype=object)
        scored = np.isfinite(z)
        group[scored] = self.bounds.groups(z[scored])
        return pd.DataFrame({
            "age_group": np.asarray(groups, object), "distance": np.asarray(scores, float),
            "score": z, "group": group, "normal_low": np.nan,
            "normal_high": c + s * self.bounds.normal.value, "lower_low": np.nan,
            "lower_high": c + s * self.bounds.lower.value, "centile": np.nan})

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "mode": "calibrated",
                "age_groups": [list(g) for g in self.age_groups],
                "standardization": self.standardization, "tail_bound": self.tail_bound,
                "standardizer": self.standardizer.to_dict(), "bounds": self.bounds.as_dict(),
                "centiles": self.centiles.to_dict() if self.centiles is not None else None}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ScoreModel:
        model = cls(data["method"], tuple(tuple(g) for g in data["age_groups"]),
                    standardization=data["standardization"], tail_bound=data["tail_bound"])
        model.standardizer = AgeStandardizer.from_dict(data["standardizer"],
                                                       group_names(model.age_groups))
        model.bounds = CalibratedBounds.from_dict(data["bounds"])
        if data.get("centiles"):
            model.centiles = HealthyCentiles.from_dict(data["centiles"])
        return model


def phenoage_scores(raw: pd.DataFrame, partition: np.ndarray
                    ) -> tuple[np.ndarray, list[float], dict[str, int]]:
    """(PhenoAge acceleration per row, NaN where a marker is missing; [intercept, slope] of
    PhenoAge on age, fitted on the ``train`` rows with every marker; people missing each
    marker). ``raw``: the nine markers and age in UKB units, one row per person. The line is
    saved so that ``sphr score`` applies it to new people."""
    from sphr.risk.phenoage import REQUIRED, phenoage

    missing = [c for c in REQUIRED if c not in raw.columns]
    if missing:
        raise InputError(f"PhenoAge needs {', '.join(missing)}, which the export does not have",
                         field=missing[0])
    pa = phenoage(raw)
    fit = (np.asarray(partition) == "train") & np.isfinite(pa)
    if fit.sum() < 10:
        raise InputError(f"only {int(fit.sum())} training participants have the nine PhenoAge "
                         "markers; at least 10 are needed for the line on age")
    age = raw["age"].to_numpy(float)
    slope, intercept = np.polyfit(age[fit], pa[fit], 1)
    gaps = {c: int(raw[c].isna().sum()) for c in REQUIRED if raw[c].isna().any()}
    return pa - (intercept + slope * age), [float(intercept), float(slope)], gaps


def phenoage_acceleration_new(raw: pd.DataFrame, line: list[float]) -> np.ndarray:
    """PhenoAge acceleration of new people with a saved training line (NaN: a marker missing)."""
    from sphr.risk.phenoage import phenoage

    return phenoage(raw) - (line[0] + line[1] * raw["age"].to_numpy(float))
