"""Supervised comparators: XGBoost that sees the outcome, cross-fitted, saved for ``sphr score``.

A supervised model is a ceiling, not a peer of the health distances: **it uses the
outcome**, which no distance sees, and every table labels it so (MILTON-style: Garg et
al. 2024, Nat Genet 56:1821). Two kinds of target (:func:`targets`):

``supervised_<outcome>`` (linked records, when the export has them)
    time to the outcome from ``ingest/outcomes.parquet`` (death, cardiovascular, cancer,
    type 2 diabetes), that outcome's prevalent cases left out of the fit; XGBoost's
    Cox objective (``survival:cox``: label +t for an event at t, -t for censoring at t),
    so the score is a log hazard ratio. One model per outcome with at least
    ``min_events`` events among the training participants.
``supervised_xgboost`` (repeat visits)
    a new diagnosis (any) at the first repeat visit, logistic; the score is a log-odds.

**Cross-fitting** (:class:`SupervisedScore`): the real training participants are split
into K folds; each fold is scored by the model fitted on the other folds, and every
other participant (calibration, test, and a new export's people in ``sphr score``) by
the mean of the K models' margins. So no score comes from a model that saw that
person's outcome, and the same K models score new people. Features: the cohort's
quantile-normalized features, as the other comparators see them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sphr.errors import InputError

log = logging.getLogger(__name__)

#: K.5.4-style settings kept small: a cohort's training partition is a few thousand people
SUPERVISED_PARAMS: dict[str, Any] = {
    "n_estimators": 200, "max_depth": 3, "learning_rate": 0.05, "subsample": 0.8,
    "colsample_bytree": 0.8, "min_child_weight": 1.0, "tree_method": "hist", "n_jobs": 2}
#: the method name of the repeat-visit target (kept from the first supervised comparator)
REPEAT_VISIT_METHOD = "supervised_xgboost"
OBJECTIVES: tuple[str, ...] = ("binary:logistic", "survival:cox")


def linked_method(outcome: str) -> str:
    return f"supervised_{outcome}"


def is_supervised(method: str) -> bool:
    return method.startswith("supervised_")


def evaluated_on(method: str, outcome: str) -> bool:
    """Whether ``method`` is judged on ``outcome``: every method on every outcome, except that
    a supervised comparator is judged only on the outcome it was fitted to (the repeat-visit
    one on "new diagnosis", a linked one on its own linked outcome)."""
    if not is_supervised(method):
        return True
    if method == REPEAT_VISIT_METHOD:
        return outcome == "new diagnosis"
    return method == linked_method(outcome)


@dataclass
class Target:
    """What one supervised model learns: ``label`` per person (binary 0/1, or the signed time
    of the Cox objective), NaN where the person is not fitted on (no visit, prevalent case)."""

    method: str
    objective: str
    label: np.ndarray
    description: str
    outcome: str | None = None

    def events(self, rows: np.ndarray) -> int:
        y = self.label[rows]
        y = y[np.isfinite(y)]
        return int((y > 0).sum())


class SupervisedScore:
    """K fold models of one target; scikit-learn style (parameters in ``__init__``, fitted
    attributes with ``_``)."""

    def __init__(self, objective: str = "survival:cox", folds: int = 5, seed: int = 0,
                 min_events: int = 10) -> None:
        self.objective, self.folds, self.seed, self.min_events = objective, folds, seed, min_events

    def fit_score(self, X: np.ndarray, label: np.ndarray, train: np.ndarray) -> np.ndarray:
        """Fit the K fold models on the ``train`` rows with a finite label; return every row's
        cross-fitted margin (out of fold for train rows, the K models' mean for the rest)."""
        import xgboost as xgb

        if self.objective not in OBJECTIVES:
            raise InputError(f"unknown objective {self.objective!r}: {', '.join(OBJECTIVES)}")
        X = np.asarray(X, np.float32)
        label = np.asarray(label, np.float64)
        rows = np.flatnonzero(np.asarray(train, bool))
        rng = np.random.default_rng(self.seed)
        self.fold_of_ = np.full(len(X), -1)
        self.fold_of_[rows] = rng.permutation(np.arange(rows.size) % self.folds)
        margin = np.zeros(len(X))
        outside = self.fold_of_ < 0
        self.models_: list[Any] = []
        for k in range(self.folds):
            fit = (self.fold_of_ >= 0) & (self.fold_of_ != k) & np.isfinite(label)
            y = label[fit]
            events = int((y > 0).sum())
            if events < self.min_events or (self.objective == "binary:logistic"
                                             and events == y.size):
                raise InputError(f"too few training participants with the outcome to fit the "
                                 f"supervised model (fold {k}: {y.size} people, {events} "
                                 f"events; at least {self.min_events} needed)")
            model_cls = xgb.XGBClassifier if self.objective == "binary:logistic" else \
                xgb.XGBRegressor
            model = model_cls(**SUPERVISED_PARAMS, random_state=self.seed + k,
                              objective=self.objective)
            model.fit(X[fit], y.astype(int) if self.objective == "binary:logistic" else y)
            booster = model.get_booster()
            m = _margin(booster, X)
            margin[self.fold_of_ == k] = m[self.fold_of_ == k]
            margin[outside] += m[outside] / self.folds
            self.models_.append(booster)
        return margin

    def predict_margin(self, X: np.ndarray) -> np.ndarray:
        """New people: the mean of the K fold models' margins."""
        if not getattr(self, "models_", None):
            raise InputError("the supervised model is not fitted")
        X = np.asarray(X, np.float32)
        return np.mean([_margin(b, X) for b in self.models_], axis=0)

    def save(self, directory: Path, method: str) -> dict[str, Any]:
        files = []
        for k, booster in enumerate(self.models_):
            name = f"{method}_fold{k}.json"
            booster.save_model(str(Path(directory) / name))
            files.append(name)
        return {"objective": self.objective, "folds": self.folds, "seed": self.seed,
                "files": files}

    @classmethod
    def load(cls, spec: dict[str, Any], directory: Path) -> SupervisedScore:
        import xgboost as xgb

        model = cls(spec["objective"], spec["folds"], spec["seed"])
        model.models_ = []
        for name in spec["files"]:
            path = Path(directory) / name
            if not path.is_file():
                raise InputError("missing supervised model file", file=path)
            booster = xgb.Booster()
            booster.load_model(str(path))
            model.models_.append(booster)
        return model


def _margin(booster: Any, X: np.ndarray) -> np.ndarray:
    import xgboost as xgb

    return booster.predict(xgb.DMatrix(X), output_margin=True).astype(np.float64)


def linked_targets(people: pd.DataFrame, outcomes: pd.DataFrame) -> list[Target]:
    """One Cox target per linked outcome (``ingest/outcomes.parquet`` rows of these people)."""
    eids = people["eid"].to_numpy(np.int64)
    out = []
    for name in dict.fromkeys(outcomes["outcome"]):
        oc = outcomes.loc[(outcomes["outcome"] == name) & ~outcomes["prevalent"].astype(bool)]
        oc = oc.drop_duplicates("eid").set_index("eid").reindex(eids)
        time = np.maximum(oc["time_years"].to_numpy(float), 1e-3)  # Cox needs t > 0
        event = oc["event"].to_numpy(float)
        label = np.where(event == 1, time, -time)  # NaN stays NaN: not fitted on
        out.append(Target(linked_method(name), "survival:cox", label,
                          f"cross-fitted XGBoost log hazard ratio of {name.replace('_', ' ')} "
                          "(Cox objective; uses the outcome)", outcome=name))
    return out


def repeat_visit_target(people: pd.DataFrame, new_any: pd.Series) -> Target:
    """A new diagnosis (any) at the first repeat visit; ``new_any`` indexed by eid (people
    without a repeat visit absent)."""
    y = new_any.reindex(people["eid"].to_numpy()).to_numpy(dtype=float, na_value=np.nan)
    return Target(REPEAT_VISIT_METHOD, "binary:logistic", y,
                  "cross-fitted XGBoost log-odds of a new diagnosis at the first repeat visit "
                  "(uses the outcome)")


def supervised_scores(people: pd.DataFrame, features: list[str], outcome: pd.Series, *,
                      folds: int = 5, seed: int = 0) -> np.ndarray:
    """Cross-fitted log-odds of a new diagnosis at the first repeat visit (``outcome`` indexed
    by eid; people without a visit absent: scored, never fitted on)."""
    target = repeat_visit_target(people, outcome)
    model = SupervisedScore(target.objective, folds, seed, min_events=1)
    return model.fit_score(people[features].to_numpy(np.float32), target.label,
                           (people["partition"] == "train").to_numpy())
