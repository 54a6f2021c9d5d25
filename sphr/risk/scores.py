"""Risk scores researchers already use, beside the distance methods.

``phenoage``
    PhenoAge acceleration (Levine et al. 2018; :mod:`sphr.risk.phenoage`) from
    the raw (UKB-unit) markers of ``cohorts/<sex>/*_raw.parquet``: the residual
    of PhenoAge on age, the line fitted on the training partition only.
``supervised_xgboost``
    A supervised ceiling (MILTON-style): XGBoost on the normalized baseline
    features predicting a new diagnosis (any) at the first repeat visit.
    **It uses the outcome**, which no other method sees; every table labels
    it so. Cross-fitted: the real training rows are split into K folds, each
    fold scored by a model fitted on the other folds' participants with a
    repeat visit, and calibration / test people by the mean of the K models'
    log-odds, so no score comes from a model that saw that person's outcome.

Both go through the same calibration and groups as the distance methods:
:class:`ScoreModel` standardizes the score per age group among the training
BFH and takes the bounds from the calibration BFH.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sphr.cohorts.age import group_names
from sphr.errors import InputError
from sphr.risk.calibration import AgeStandardizer, CalibratedBounds

log = logging.getLogger(__name__)

#: K.5.4-style settings kept small: the training population with a repeat visit is ~4%
SUPERVISED_PARAMS: dict[str, Any] = {
    "n_estimators": 200, "max_depth": 3, "learning_rate": 0.05, "subsample": 0.8,
    "colsample_bytree": 0.8, "min_child_weight": 1.0, "tree_method": "hist", "n_jobs": 2}


class ScoreModel:
    """Calibrated Normal / Lower Risk / Higher Risk for a score given per person."""

    def __init__(self, method: str, age_groups: tuple[tuple[int, int], ...],
                 standardize_min_group: int = 30) -> None:
        self.method = method
        self.age_groups = tuple(tuple(g) for g in age_groups)
        self.standardizer = AgeStandardizer(group_names(self.age_groups), standardize_min_group)
        self.bounds: CalibratedBounds | None = None

    def fit(self, train_scores: np.ndarray, train_groups: np.ndarray,
            calibration_scores: np.ndarray, calibration_groups: np.ndarray) -> ScoreModel:
        """Training BFH scores set the age standardization, calibration BFH scores the bounds."""
        self.standardizer.fit(train_scores, train_groups)
        self.bounds = CalibratedBounds.fit(self.standardizer.transform(calibration_scores,
                                                                       calibration_groups))
        return self

    def transform(self, scores: np.ndarray, groups: np.ndarray) -> pd.DataFrame:
        z = self.standardizer.transform(scores, groups)
        c = np.array([self.standardizer.center_[g] for g in groups], float)
        s = np.array([self.standardizer.scale_[g] for g in groups], float)
        return pd.DataFrame({
            "age_group": np.asarray(groups, object), "distance": np.asarray(scores, float),
            "score": z, "group": self.bounds.groups(z), "normal_low": np.nan,
            "normal_high": c + s * self.bounds.normal.value, "lower_low": np.nan,
            "lower_high": c + s * self.bounds.lower.value})

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "mode": "calibrated",
                "age_groups": [list(g) for g in self.age_groups],
                "standardizer": self.standardizer.to_dict(), "bounds": self.bounds.as_dict()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ScoreModel:
        model = cls(data["method"], tuple(tuple(g) for g in data["age_groups"]))
        model.standardizer = AgeStandardizer.from_dict(data["standardizer"],
                                                       group_names(model.age_groups))
        model.bounds = CalibratedBounds.from_dict(data["bounds"])
        return model


def raw_markers(cohort_dir: Path, eids: np.ndarray) -> pd.DataFrame:
    """Raw (UKB-unit) feature values of the given participants, in ``eids`` order."""
    parts = [pd.read_parquet(cohort_dir / f"{p}_raw.parquet")
             for p in ("train", "calibration", "test") if (cohort_dir / f"{p}_raw.parquet").exists()]
    raw = pd.concat(parts, ignore_index=True).drop_duplicates("eid").set_index("eid")
    missing = np.setdiff1d(eids, raw.index.to_numpy())
    if missing.size:
        raise InputError(f"{missing.size} participants have no raw values", file=cohort_dir,
                         field="eid")
    return raw.loc[eids].reset_index()


def phenoage_scores(cohort_dir: Path, people: pd.DataFrame) -> tuple[np.ndarray, list[float]]:
    """(PhenoAge acceleration per person, [intercept, slope] of PhenoAge on age): the
    residual on a line fitted on the training partition only, saved so that ``sphr score``
    applies the same line to new people."""
    from sphr.risk.phenoage import phenoage

    raw = raw_markers(cohort_dir, people["eid"].to_numpy(np.int64))
    pa, age = phenoage(raw), raw["age"].to_numpy(float)
    fit = (people["partition"] == "train").to_numpy() & np.isfinite(pa)
    slope, intercept = np.polyfit(age[fit], pa[fit], 1)
    return pa - (intercept + slope * age), [float(intercept), float(slope)]


def phenoage_acceleration_new(raw: pd.DataFrame, line: list[float]) -> np.ndarray:
    """PhenoAge acceleration of new people with a saved training line."""
    from sphr.risk.phenoage import phenoage

    return phenoage(raw) - (line[0] + line[1] * raw["age"].to_numpy(float))


def supervised_scores(people: pd.DataFrame, features: list[str], outcome: pd.Series, *,
                      folds: int = 5, seed: int = 0) -> np.ndarray:
    """Cross-fitted log-odds of a new diagnosis (see the module docstring).

    ``outcome``: new diagnosis (any) at the first repeat visit, indexed by eid; people without
    a repeat visit are absent (they are scored but never fitted on).
    """
    import xgboost as xgb

    X = people[features].to_numpy(np.float32)
    y_all = outcome.reindex(people["eid"].to_numpy()).to_numpy(dtype=float, na_value=np.nan)
    train = np.flatnonzero((people["partition"] == "train").to_numpy())
    rng = np.random.default_rng(seed)
    fold_of = np.full(len(people), -1)
    fold_of[train] = rng.permutation(np.arange(train.size) % folds)
    margin = np.zeros(len(people))
    out_of_train = fold_of < 0
    fitted = 0
    for k in range(folds):
        fit = (fold_of >= 0) & (fold_of != k) & ~np.isnan(y_all)
        y = y_all[fit]
        if y.size < 10 or y.min() == y.max():
            raise InputError(f"too few training participants with a repeat-visit outcome to fit "
                             f"the supervised model (fold {k}: {y.size}, {int(np.nansum(y))} events)")
        model = xgb.XGBClassifier(**SUPERVISED_PARAMS, random_state=seed + k,
                                  objective="binary:logistic")
        model.fit(X[fit], y.astype(int))
        m = model.predict(X, output_margin=True)
        margin[fold_of == k] = m[fold_of == k]
        margin[out_of_train] += m[out_of_train] / folds
        fitted += 1
    log.info("supervised_xgboost: %d fold models on %d training participants with an outcome",
             fitted, int((~np.isnan(y_all[train])).sum()))
    return margin

