"""The fit of one sex (module docstring of :mod:`sphr.risk.model`, "Fit"): :class:`SexFit`
fits every method and mode of a :class:`~sphr.risk.config.RiskConfig` on a
:class:`~sphr.risk.model.frames.CohortInputs` and returns what it fitted
(:class:`FittedSex`); :class:`~sphr.risk.model.estimator.SexModel` keeps it.

The spaces, references and age standardizations on the real training rows (BFH only where
the method says so), the calibrated bounds on the calibration partition's BFH, the
supervised comparators on the training participants' outcomes, cross-fitted. Every
participant (train, calibration, test) is then scored (``rows``).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from sphr.cohorts.normalize import MarkerScaler
from sphr.errors import InputError, SphrError
from sphr.risk import absolute
from sphr.risk.calibration import Healthy
from sphr.risk.comparators import ScoreModel, phenoage_scores
from sphr.risk.config import MARKER_SPACE_METHODS, OPTIONAL_METHODS, PAPER_METHODS, RiskConfig
from sphr.risk.distance import DistanceModel, bfh_rows
from sphr.risk.model.frames import (
    COLUMNS,
    PARTITIONS,
    CohortInputs,
    covariates,
    no_fold,
    participants,
    predict_none,
)
from sphr.risk.model.methods import DistanceMethod, ScoreMethod
from sphr.risk.spaces import build_space
from sphr.risk.supervised import SupervisedScore, Target, linked_targets, repeat_visit_target

log = logging.getLogger(__name__)


@dataclass
class FittedSex:
    """What the fit of one sex gives: the fitted methods, the marker scaler (None without a
    marker-space method), the absolute-risk models, why a method was skipped or some people
    left unscored, and the ``risk_groups`` rows of every participant (``COLUMNS``) and their
    absolute-risk rows."""

    methods: dict[str, DistanceMethod | ScoreMethod] = field(default_factory=dict)
    marker_scaler: MarkerScaler | None = None
    absolute: dict[str, dict[str, Any]] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    unscored: dict[str, dict[str, Any]] = field(default_factory=dict)
    rows: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(COLUMNS)))
    absolute_rows: pd.DataFrame = field(default_factory=predict_none)


class SexFit:
    """One sex being fitted: the inputs in the forms the methods read, the rows so far, and
    what has been fitted (``fitted``, returned by :meth:`run`)."""

    def __init__(self, sex: str, inputs: CohortInputs, config: RiskConfig,
                 groups: tuple[tuple[int, int], ...]) -> None:
        self.sex, self.inputs, self.config, self.groups = sex, inputs, config, groups
        self.people = participants(inputs.train, inputs.calibration, inputs.test)
        self.frames: list[pd.DataFrame] = []
        self.fitted = FittedSex()
        self._marker: tuple[dict[str, pd.DataFrame], pd.DataFrame] | None = None

    def run(self) -> FittedSex:
        """Every method of the config, then the absolute-risk models; what was fitted."""
        for method in self.config.methods:
            self.method(method)
        fit_absolute(self)
        self.fitted.rows = self.rows()
        return self.fitted

    def add(self, out: pd.DataFrame, method: str, mode: str) -> None:
        """Rows of one method and mode, one per participant (same order as ``people``);
        a participant without a score (NaN distance) is left out of the rows."""
        p = self.people
        out.insert(0, "eid", p["eid"].to_numpy(np.int64))
        out = out.assign(sex=self.sex, method=method, mode=mode,
                         age_years=p["age_years"].to_numpy(float),
                         partition=p["partition"].to_numpy(), label=p["label"].to_numpy(np.int8),
                         fold=no_fold(len(out)).to_numpy())
        self.frames.append(out.loc[np.isfinite(out["distance"].to_numpy(float))])

    def skip(self, method: str, reason: str) -> None:
        log.warning("%s: skipping method %s: %s", self.sex, method, reason)
        self.fitted.skipped[method] = reason
        self.fitted.unscored[method] = {"n": len(self.people), "of": len(self.people),
                                        "reason": reason}

    def rows(self) -> pd.DataFrame:
        if not self.frames:
            return pd.DataFrame(columns=list(COLUMNS))
        return pd.concat(self.frames, ignore_index=True)[list(COLUMNS)]

    def marker(self) -> tuple[dict[str, pd.DataFrame], pd.DataFrame]:
        """(frames by partition, participants) with each feature replaced by its marker-space
        value: a :class:`MarkerScaler` fitted on the real training rows' raw values (the rows
        the quantile normalizer was fitted on)."""
        if self._marker is None:
            inputs, features = self.inputs, self.inputs.features
            if inputs.raw is None:
                raise InputError("the marker space needs the cohort's raw values "
                                 "(cohorts/<sex>/<part>_raw.parquet; re-run `sphr cohorts`)")
            train = inputs.raw["train"]
            real = ~train["augmented"].to_numpy(bool) if "augmented" in train else \
                np.ones(len(train), bool)
            scaler = MarkerScaler().fit(train.loc[real, features].to_numpy(float),
                                        features=features)
            self.fitted.marker_scaler = scaler
            frames = {}
            for part in PARTITIONS:
                frame = getattr(inputs, part).copy()
                frame[features] = scaler.transform(inputs.raw[part][features].to_numpy(float))
                frames[part] = frame
            self._marker = frames, participants(*(frames[p] for p in PARTITIONS))
        return self._marker

    def distance(self, method: str) -> None:
        """Every mode of one distance method (a space and a reference per age group)."""
        config, inputs = self.config, self.inputs
        marker = config.distance_space == "marker" and method in MARKER_SPACE_METHODS
        frames, people = self.marker() if marker else (
            {p: getattr(inputs, p) for p in PARTITIONS}, self.people)
        space = build_space(method, inputs.features, representations=inputs.representations,
                            device=config.device)
        modes: dict[str, DistanceModel] = {}
        for mode in config.modes:
            if mode == "paper" and method not in PAPER_METHODS:
                continue  # Eq. A.4 is defined for the paper's five methods
            model = DistanceModel(method, mode, inputs.features, age_groups=self.groups,
                                  min_group_size=config.min_group_size,
                                  standardize_min_group=config.standardize_min_group,
                                  standardization=config.standardization,
                                  tail_bound=config.tail_bound, space=space
                                  ).fit(frames["train"], frames["calibration"])
            self.add(model.transform(people), method, mode)
            modes[mode] = model
        self.fitted.methods[method] = DistanceMethod(space, "marker" if marker else "quantile",
                                                     modes)

    def calibrated(self, method: str, raw: np.ndarray, about: dict[str, Any], **source: Any
                   ) -> None:
        """A per-person score through the age standardization and calibrated bounds."""
        people = self.people
        age_group = people["age_group"].astype(str).to_numpy(object)
        bfh, role = bfh_rows(people), people["partition"].to_numpy()
        fit, cal = bfh & (role == "train"), bfh & (role == "calibration")
        ages = people["age_years"].to_numpy(float)
        model = ScoreModel(method, self.groups, self.config.standardize_min_group,
                           self.config.standardization, self.config.tail_bound).fit(
            Healthy(raw[fit], age_group[fit], ages[fit]),
            Healthy(raw[cal], age_group[cal], ages[cal]))
        self.add(model.transform(raw, age_group, ages), method, "calibrated")
        self.fitted.methods[method] = ScoreMethod(model, about, **source)

    def method(self, method: str) -> None:
        calibrated = "calibrated" in self.config.modes
        try:
            if method == "phenoage":
                if calibrated:
                    fit_phenoage(self)
            elif method == "supervised_xgboost":
                if calibrated:
                    fit_supervised(self)
            else:
                self.distance(method)
        except SphrError as exc:
            if method not in OPTIONAL_METHODS:
                raise
            self.skip(method, str(exc))


# ----------------------------------------------------------------------------- score methods

def fit_phenoage(fit: SexFit) -> None:
    """PhenoAge acceleration from the export's raw markers, for everyone with the nine
    markers, whatever the cohort's features are."""
    if "phenoage" in fit.inputs.unavailable:
        raise InputError(fit.inputs.unavailable["phenoage"])
    if fit.inputs.baseline is None:
        raise InputError("PhenoAge reads the raw markers of the baseline (run `sphr ingest`)")
    people = fit.people
    raw = fit.inputs.baseline.drop_duplicates("eid").set_index("eid").reindex(
        people["eid"].to_numpy()).reset_index(drop=True)
    raw["age"] = people["age_years"].to_numpy(float)
    score, line, gaps = phenoage_scores(raw, people["partition"].to_numpy())
    fit.calibrated("phenoage", score, {"score": "PhenoAge acceleration (years)"}, line=line)
    n = int(np.isnan(score).sum())
    if n:
        fit.fitted.unscored["phenoage"] = {
            "n": n, "of": len(score),
            "reason": "missing " + ", ".join(f"{k} ({v})" for k, v in gaps.items())}


def _targets(fit: SexFit) -> list[Target]:
    inputs, people = fit.inputs, fit.people
    targets = linked_targets(people, inputs.outcomes) if inputs.outcomes is not None else []
    if inputs.first_visit is not None:
        targets.append(repeat_visit_target(people, inputs.first_visit))
    else:
        fit.skip("supervised_xgboost", inputs.unavailable.get(
            "supervised_xgboost", "repeat visit: no follow-up visits given"))
    return targets


def fit_supervised(fit: SexFit) -> None:
    """Every supervised comparator the export allows (:mod:`sphr.risk.supervised`); each
    one that cannot be fitted is skipped with its reason."""
    config, people = fit.config, fit.people
    train = (people["partition"] == "train").to_numpy()
    X = people[fit.inputs.features].to_numpy(np.float32)
    for target in _targets(fit):
        model = SupervisedScore(target.objective, config.supervised_folds, config.seed,
                                config.supervised_min_events)
        try:
            score = model.fit_score(X, target.label, train)
            about = {"score": target.description, "uses_outcome": True,
                     "outcome": target.outcome or "new diagnosis (visit 1)",
                     "training_events": target.events(train)}
            fit.calibrated(target.method, score, about, supervised=model)
        except SphrError as exc:
            fit.skip(target.method, str(exc))


# ----------------------------------------------------------------------------- absolute risk

def fit_covariates(fit: SexFit) -> pd.DataFrame:
    """Every absolute-risk covariate of every participant (``people``' order): age, the
    raw Euclidean distance (mode calibrated), PhenoAge's xb and the marker-space features;
    a covariate that cannot be computed is left out (its candidates are skipped)."""
    people = fit.people
    eids = people["eid"].to_numpy(np.int64)
    dist = [f for f in fit.frames if len(f) and f["method"].iloc[0] == "raw_euclidean"
            and f["mode"].iloc[0] == "calibrated"]
    raw = None
    if fit.inputs.baseline is not None:
        raw = fit.inputs.baseline.drop_duplicates("eid").set_index("eid").reindex(
            eids).reset_index(drop=True)
        raw["age"] = people["age_years"].to_numpy(float)
    try:
        markers = fit.marker()[1][fit.inputs.features]
    except InputError:
        markers = None
    return covariates(people["age_years"].to_numpy(float), eids,
                      dist[0][["eid", "distance"]] if dist else None, raw, markers)


def fit_absolute(fit: SexFit) -> None:
    """The absolute-risk candidates of every linked outcome (:mod:`sphr.risk.absolute`),
    each skipped with its reason where it cannot be fitted."""
    inputs, people, fitted = fit.inputs, fit.people, fit.fitted
    fitted.absolute = {}
    if inputs.outcomes is None or inputs.outcomes.empty:
        fitted.skipped["absolute_risk"] = "no linked outcomes in the export"
        return
    t0 = time.perf_counter()
    X = fit_covariates(fit)
    eids = people["eid"].to_numpy(np.int64)
    for outcome in dict.fromkeys(inputs.outcomes["outcome"]):
        years, event = absolute.outcome_arrays(eids, inputs.outcomes, outcome)
        models, skipped = absolute.fit_outcome_models(
            X, people["partition"].to_numpy(), bfh_rows(people), years, event, outcome,
            inputs.features, fit.config.absolute_min_events)
        for cand, why in skipped.items():
            log.warning("%s: absolute risk of %s, %s skipped: %s", fit.sex, outcome,
                        cand, why)
            fitted.skipped[f"absolute_{outcome}_{cand}"] = why
        if models:
            fitted.absolute[outcome] = models
    rows = absolute.predict_all(fitted.absolute, X, eids)
    part = people.set_index("eid")["partition"]
    fitted.absolute_rows = rows.assign(sex=fit.sex,
                                       partition=part.reindex(rows["eid"]).to_numpy())
    log.info("%s: absolute risk fitted in %.1f s", fit.sex, time.perf_counter() - t0)
