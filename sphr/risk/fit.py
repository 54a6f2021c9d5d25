"""Fit every risk method of one sex on its cohort: the rows of ``risk_groups`` and the saved model.

Who is fitted on whom (docs/METHODS.md, "Partitions"): the spaces, references and age
standardizations on the real training rows (BFH only where the method says so), the
calibrated bounds on the calibration partition's BFH, the supervised comparators on the
training participants' outcomes, cross-fitted. Every participant (train, calibration,
test) is then scored; validation later reads only the test partition.

A method that cannot be computed (a model file missing, too few events, no PhenoAge
marker in the export) is **skipped** with its reason; a method computed for some people
only (PhenoAge without CRP) leaves the others **unscored**, counted with the reason. Both
reach ``risk_report.json`` and the report (:class:`SexFit`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sphr.cohorts.normalize import MarkerScaler
from sphr.errors import InputError, SphrError
from sphr.io import read_json
from sphr.layout import cohort_dir, ingest_dir
from sphr.risk.config import MARKER_SPACE_METHODS, OPTIONAL_METHODS, RiskConfig
from sphr.risk.model import RiskModel, bfh_rows
from sphr.risk.scores import ScoreModel
from sphr.risk.spaces import PAPER_METHODS, build_space

log = logging.getLogger(__name__)

#: the stable columns of risk_groups.parquet / .csv, in order
COLUMNS: tuple[str, ...] = ("eid", "sex", "age_years", "age_group", "method", "mode", "distance", "score",
                            "group", "normal_low", "normal_high", "lower_low", "lower_high",
                            "partition", "label")
#: the marker scaler's file in the saved model (``RUN/risk/model/<sex>/``)
MARKER_SCALER = "marker_scaler.json"


def participants(cohort) -> pd.DataFrame:
    """Every real participant of one sex with their role: ``train`` (not augmented),
    ``calibration`` and ``test``."""
    train = cohort.train.loc[~cohort.train["augmented"].to_numpy(bool)].assign(partition="train")
    calibration = cohort.calibration.assign(partition="calibration")
    test = cohort.test.assign(partition="test")
    return pd.concat([train, calibration, test], ignore_index=True)


@dataclass
class SexFit:
    """What fitting one sex produced: risk rows, the model spec, and what was not computed."""

    sex: str
    people: pd.DataFrame
    spec: dict[str, Any]
    frames: list[pd.DataFrame] = field(default_factory=list)
    #: method -> why it was not computed for anyone
    skipped: dict[str, str] = field(default_factory=dict)
    #: method -> {"n": people left unscored, "of": participants, "reason": ...}
    unscored: dict[str, dict[str, Any]] = field(default_factory=dict)

    def add(self, out: pd.DataFrame, method: str, mode: str) -> None:
        """Rows of one method and mode, one per participant (same order as ``people``);
        a participant without a score (NaN distance) is left out of the rows."""
        p = self.people
        out.insert(0, "eid", p["eid"].to_numpy(np.int64))
        out = out.assign(sex=self.sex, method=method, mode=mode,
                         age_years=p["age_years"].to_numpy(float),
                         partition=p["partition"].to_numpy(), label=p["label"].to_numpy(np.int8))
        self.frames.append(out.loc[np.isfinite(out["distance"].to_numpy(float))])

    def skip(self, method: str, reason: str) -> None:
        log.warning("%s: skipping method %s: %s", self.sex, method, reason)
        self.skipped[method] = reason
        self.unscored[method] = {"n": len(self.people), "of": len(self.people), "reason": reason}

    def rows(self) -> pd.DataFrame:
        if not self.frames:
            return pd.DataFrame(columns=list(COLUMNS))
        return pd.concat(self.frames, ignore_index=True)[list(COLUMNS)]


@dataclass
class Inputs:
    """The cohort of one sex in the forms the methods read, built once."""

    run: Path
    sex: str
    cohort: Any
    people: pd.DataFrame
    groups: tuple[tuple[int, int], ...]
    config: RiskConfig
    model_dir: Path | None
    _marker: tuple[Any, Any] | None = None

    def marker(self) -> tuple[Any, pd.DataFrame]:
        """(cohort, participants) with the features in the marker space: a
        :class:`MarkerScaler` fitted on the real training rows' raw values (the rows the
        quantile normalizer was fitted on), saved beside the model."""
        if self._marker is None:
            self._marker = marker_cohort(self.cohort, cohort_dir(self.run, self.sex))
            if self.model_dir is not None:
                self._marker[0].scaler.save(self.model_dir / MARKER_SCALER)
        return self._marker


def _raw(cdir: Path, part: str) -> pd.DataFrame:
    path = cdir / f"{part}_raw.parquet"
    if not path.exists():
        raise InputError(f"missing {part}_raw.parquet (re-run `sphr cohorts`)", file=path)
    return pd.read_parquet(path)


@dataclass
class _MarkerCohort:
    features: list[str]
    train: pd.DataFrame
    calibration: pd.DataFrame
    test: pd.DataFrame
    scaler: MarkerScaler


def marker_cohort(cohort, cdir: Path) -> tuple[_MarkerCohort, pd.DataFrame]:
    """The cohort frames with each feature replaced by its marker-space value (module doc)."""
    features = cohort.features
    frames = {}
    raws = {part: _raw(cdir, part) for part in ("train", "calibration", "test")}
    real = ~raws["train"]["augmented"].to_numpy(bool) if "augmented" in raws["train"] else \
        np.ones(len(raws["train"]), bool)
    scaler = MarkerScaler().fit(raws["train"].loc[real, features].to_numpy(float),
                                features=features)
    for part in ("train", "calibration", "test"):
        frame, raw = getattr(cohort, part), raws[part]
        if len(frame) != len(raw) or not np.array_equal(frame["eid"].to_numpy(),
                                                        raw["eid"].to_numpy()):
            raise InputError(f"{part}_raw.parquet and {part}.parquet list other participants",
                             file=cdir / f"{part}_raw.parquet", field="eid")
        frame = frame.copy()
        frame[features] = scaler.transform(raw[features].to_numpy(float))
        frames[part] = frame
    marker = _MarkerCohort(features, frames["train"], frames["calibration"], frames["test"],
                           scaler)
    return marker, participants(marker)


def fit_distance(method: str, inputs: Inputs, out: SexFit) -> None:
    """Every mode of one distance method (a space and a reference per age group)."""
    config = inputs.config
    marker = config.distance_space == "marker" and method in MARKER_SPACE_METHODS
    cohort, people = inputs.marker() if marker else (inputs.cohort, inputs.people)
    space = build_space(method, cohort.features, run=inputs.run, sex=inputs.sex,
                        device=config.device)
    entry: dict[str, Any] = {"modes": {}, "input": "marker" if marker else "quantile"}
    for mode in config.modes:
        if mode == "paper" and method not in PAPER_METHODS:
            continue  # Eq. A.4 is defined for the paper's five methods
        model = RiskModel(method, mode, cohort.features, age_groups=inputs.groups,
                          min_group_size=config.min_group_size,
                          standardize_min_group=config.standardize_min_group,
                          space=space).fit(cohort.train, cohort.calibration)
        out.add(model.transform(people), method, mode)
        entry["modes"][mode] = model.to_dict()
    if inputs.model_dir is not None:
        entry["space"] = space.save(inputs.model_dir, method)
    out.spec["methods"][method] = entry


def calibrate_score(method: str, raw: np.ndarray, inputs: Inputs, out: SexFit,
                    what: dict[str, Any]) -> None:
    """A per-person score through the age standardization and calibrated bounds."""
    people = inputs.people
    age_group = people["age_group"].astype(str).to_numpy(object)
    bfh, role = bfh_rows(people), people["partition"].to_numpy()
    model = ScoreModel(method, inputs.groups, inputs.config.standardize_min_group).fit(
        raw[bfh & (role == "train")], age_group[bfh & (role == "train")],
        raw[bfh & (role == "calibration")], age_group[bfh & (role == "calibration")])
    out.add(model.transform(raw, age_group), method, "calibrated")
    out.spec["methods"][method] = {"modes": {"calibrated": model.to_dict()}, **what}


def fit_phenoage(inputs: Inputs, out: SexFit) -> None:
    """PhenoAge acceleration from the export's raw markers (``ingest/baseline.parquet``), for
    everyone with the nine markers, whatever the cohort's features are."""
    from sphr.risk.phenoage import REQUIRED
    from sphr.risk.scores import phenoage_scores

    path = ingest_dir(inputs.run) / "baseline.parquet"
    if not path.exists():
        raise InputError("PhenoAge reads the raw markers of the baseline (run `sphr ingest`)",
                         file=path)
    baseline = pd.read_parquet(path, columns=["eid", *[c for c in REQUIRED if c != "age"]])
    raw = baseline.drop_duplicates("eid").set_index("eid").reindex(
        inputs.people["eid"].to_numpy()).reset_index(drop=True)
    raw["age"] = inputs.people["age_years"].to_numpy(float)
    score, line, gaps = phenoage_scores(raw, inputs.people["partition"].to_numpy())
    calibrate_score("phenoage", score, inputs, out,
                    {"score": "PhenoAge acceleration (years)", "phenoage_line": line})
    n = int(np.isnan(score).sum())
    if n:
        out.unscored["phenoage"] = {
            "n": n, "of": len(score),
            "reason": "missing " + ", ".join(f"{k} ({v})" for k, v in gaps.items())}


def fit_supervised(inputs: Inputs, out: SexFit) -> None:
    """Every supervised comparator the export allows (:mod:`sphr.risk.supervised`); each
    one that cannot be fitted is skipped with its reason."""
    from sphr.risk.supervised import SupervisedScore, linked_targets, repeat_visit_target

    config, people = inputs.config, inputs.people
    train = (people["partition"] == "train").to_numpy()
    targets = []
    outcomes = ingest_dir(inputs.run) / "outcomes.parquet"
    if outcomes.exists():
        targets += linked_targets(people, pd.read_parquet(outcomes))
    try:
        targets.append(repeat_visit_target(people, first_visit_any(inputs.run)))
    except InputError as exc:
        out.skip("supervised_xgboost", f"repeat visit: {exc}")
    X = people[inputs.cohort.features].to_numpy(np.float32)
    for target in targets:
        model = SupervisedScore(target.objective, config.supervised_folds, config.seed,
                                config.supervised_min_events)
        try:
            score = model.fit_score(X, target.label, train)
            what: dict[str, Any] = {"score": target.description, "uses_outcome": True,
                                    "outcome": target.outcome or "new diagnosis (visit 1)",
                                    "training_events": target.events(train)}
            if inputs.model_dir is not None:
                what["supervised"] = model.save(inputs.model_dir, target.method)
            calibrate_score(target.method, score, inputs, out, what)
        except SphrError as exc:
            out.skip(target.method, str(exc))


def first_visit_any(run: Path) -> pd.Series:
    """New diagnosis (any) at the first repeat visit, indexed by eid (absent: no visit)."""
    from sphr.risk.validation import _new_any

    path = ingest_dir(run) / "followup.parquet"
    if not path.exists():
        raise InputError("no follow-up visits to learn from", file=path)
    fu = pd.read_parquet(path)
    fu = fu.loc[fu["instance"] == 1].drop_duplicates("eid").set_index("eid")
    if fu.empty:
        raise InputError("nobody has a repeat visit", file=path)
    return _new_any(fu).dropna().astype(bool)


def fit_sex(run: Path, sex: str, config: RiskConfig, model_dir: Path | None = None,
            age_groups: tuple[tuple[int, int], ...] | None = None) -> SexFit:
    """Fit every method and mode of one sex (module docstring)."""
    from sphr.artifacts import load_cohort
    from sphr.cohorts.age import DEFAULT_AGE_GROUPS

    cohort = load_cohort(cohort_dir(run, sex))
    if cohort.calibration.empty and "calibrated" in config.modes:
        raise InputError("no calibration partition: re-run `sphr cohorts` (calibration_size > 0)",
                         file=cohort_dir(run, sex) / "calibration.parquet")
    people = participants(cohort)
    inputs = Inputs(run, sex, cohort, people, age_groups or DEFAULT_AGE_GROUPS, config,
                    model_dir)
    out = SexFit(sex, people, {"features": cohort.features, "methods": {}})
    for method in config.methods:
        try:
            if method == "phenoage":
                if "calibrated" in config.modes:
                    fit_phenoage(inputs, out)
            elif method == "supervised_xgboost":
                if "calibrated" in config.modes:
                    fit_supervised(inputs, out)
            else:
                fit_distance(method, inputs, out)
        except SphrError as exc:
            if method not in OPTIONAL_METHODS:
                raise
            out.skip(method, str(exc))
    return out


def read_age_groups(run: Path) -> tuple[tuple[int, int], ...] | None:
    """The age groups ``sphr cohorts`` used (its report), or None for the default."""
    report = Path(run) / "cohorts" / "cohort_report.json"
    if report.exists():
        groups = read_json(report).get("config", {}).get("age_groups")
        if groups:
            return tuple(tuple(int(v) for v in g) for g in groups)
    return None
