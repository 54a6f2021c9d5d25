"""The fitted risk model: :class:`RiskModel` (``fit`` / ``save`` / ``load`` / ``score``).

``sphr risk`` fits it (:mod:`sphr.risk.fit` reads a run's cohorts into :class:`CohortInputs`,
:mod:`sphr.risk.pipeline` saves it as ``RUN/risk/model/``); ``sphr score``
(:mod:`sphr.risk.apply`) and the refresh (:mod:`sphr.risk.refresh`) load it and score new
people with it. Loading reads only the model folder: this module, the representations it
holds, and nothing of the fit or the run directory.

Per sex (:class:`SexModel`): the cohort's quantile normalizer and features, the clinical
ranges its classes were labelled with, the marker scaler of the marker-space methods, and
one fitted method per name, either a distance (:class:`DistanceMethod`: a space of
:mod:`sphr.risk.spaces` and one :class:`~sphr.risk.distance.DistanceModel` per mode, with
the references, age standardizer and bounds) or a score given per person
(:class:`ScoreMethod`: PhenoAge's line on age or the supervised fold models, and the
calibrated :class:`~sphr.risk.comparators.ScoreModel`).

**Fit** (docs/METHODS.md, "Partitions"): the spaces, references and age standardizations
on the real training rows (BFH only where the method says so), the calibrated bounds on the
calibration partition's BFH, the supervised comparators on the training participants'
outcomes, cross-fitted. Every participant (train, calibration, test) is then scored
(``rows_``); validation later reads only the test partition. A method that cannot be
computed (a model file missing, too few events, no PhenoAge marker in the export) is
**skipped** with its reason; a method computed for some people only (PhenoAge without CRP)
leaves the others **unscored**, counted with the reason (``skipped_``, ``unscored_``).

**Score** new people (a baseline frame in UKB units, one row per participant): nothing is
refitted. Refusals (``InputError`` naming the export and the UKB field): a fitted feature
the export does not have (or has no value for anyone); **units**: a feature for which more
than half of the new values (and at least one) fall outside the range seen in training
(the normalizer's minimum and maximum, raw UKB units). A column in other units (glucose in
mg/dL instead of mmol/L is x18) lands almost entirely outside; a correct file almost never
does. ``allow_out_of_range=True`` scores anyway (a value outside the range is then treated
as the training extreme, which is what the quantile normalizer does). Missing values
(``impute=True``): a missing fitted feature is set to the per-sex training median
(:mod:`sphr.risk.impute`) and flagged per participant; still unscorable, with the reason: a
missing or unknown sex, a sex the model was not fitted on, a missing age, or more than
``MAX_IMPUTED_SHARE`` of the features missing. PhenoAge reads the markers as measured
(never imputed): a person without its nine markers is not scored by it, counted per method
in the report's ``not_scored``. Ages outside every age group join the nearest group.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from sphr.cohorts.age import DEFAULT_AGE_GROUPS, assign_age_groups
from sphr.cohorts.normalize import MarkerScaler, QuantileNormalizer
from sphr.cohorts.ranges import P0_RANGES, assign_classes, ranges_for, ranges_from_records
from sphr.data.fields import BY_NAME
from sphr.errors import InputError, SphrError
from sphr.io import read_json, write_json
from sphr.labels import SEX_CODE
from sphr.risk import absolute
from sphr.risk.comparators import ScoreModel, phenoage_acceleration_new, phenoage_scores
from sphr.risk.config import (
    MARKER_SPACE_METHODS,
    OPTIONAL_METHODS,
    PAPER_METHODS,
    RiskConfig,
)
from sphr.risk.distance import DistanceModel, bfh_rows
from sphr.risk.impute import impute_median
from sphr.risk.population import POPULATION_FILE, PopulationSummary
from sphr.risk.spaces import Space, build_space, load_space
from sphr.risk.supervised import (
    SupervisedScore,
    Target,
    linked_targets,
    repeat_visit_target,
)

log = logging.getLogger(__name__)

#: the stable columns of risk_groups.parquet / .csv, in order
COLUMNS: tuple[str, ...] = ("eid", "sex", "age_years", "age_group", "method", "mode", "distance",
                            "score", "group", "normal_low", "normal_high", "lower_low",
                            "lower_high", "partition", "label")
#: the version written into risk_model.json
MODEL_VERSION = 3
MODEL_FILE = "risk_model.json"
#: the marker scaler's file in a sex's folder of the saved model
MARKER_SCALER = "marker_scaler.json"
#: share of a feature's new values outside the training range that means "wrong units"
OUT_OF_RANGE_SHARE = 0.5
#: more than this share of a participant's fitted features missing: not scored (too little data)
MAX_IMPUTED_SHARE = 0.5
PARTITIONS: tuple[str, ...] = ("train", "calibration", "test")


def find_model_dir(path: str | Path) -> Path:
    """RUN_DIR, RUN/risk or RUN/risk/model: the folder holding risk_model.json."""
    path = Path(path)
    for cand in (path / "risk" / "model", path / "model", path):
        if (cand / MODEL_FILE).is_file():
            return cand
    raise InputError("no fitted risk model here (run `sphr risk` first): looked for "
                     "risk/model/risk_model.json", file=path)


def _ukb_field(name: str) -> str:
    f = BY_NAME.get(name)
    return f"{f.id}-0.0 ({name})" if f else name


def check_units(frame: pd.DataFrame, norm: QuantileNormalizer, export: Path | None, *,
                allow_out_of_range: bool = False) -> dict[str, float]:
    """Share of values outside the training range per feature; refuse the implausible ones."""
    shares = {}
    lo, hi = norm.quantiles_[0], norm.quantiles_[-1]
    for j, name in enumerate(norm.features_):
        v = frame[name].to_numpy(float)
        v = v[~np.isnan(v)]
        if v.size == 0:
            continue
        out = (v < lo[j]) | (v > hi[j])
        shares[name] = float(out.mean())
        if shares[name] > OUT_OF_RANGE_SHARE and not allow_out_of_range:
            med, ref = float(np.median(v)), float(np.median(norm.quantiles_[:, j]))
            ratio = med / ref if ref else float("nan")
            unit = getattr(BY_NAME.get(name), "unit", "")
            raise InputError(
                f"{out.sum()} of {v.size} values ({shares[name]:.0%}) are outside the range "
                f"the model was fitted on [{lo[j]:.4g}, {hi[j]:.4g}] {unit}; median {med:.4g} vs "
                f"{ref:.4g} in training (ratio {ratio:.3g}): wrong units (e.g. mg/dL instead of "
                "mmol/L)? Convert, or pass --allow-out-of-range", file=export,
                field=_ukb_field(name))
    return shares


def participants(train: pd.DataFrame, calibration: pd.DataFrame, test: pd.DataFrame
                 ) -> pd.DataFrame:
    """Every real participant of one sex with their role: ``train`` (not augmented),
    ``calibration`` and ``test``."""
    real = train.loc[~train["augmented"].to_numpy(bool)].assign(partition="train")
    return pd.concat([real, calibration.assign(partition="calibration"),
                      test.assign(partition="test")], ignore_index=True)


@dataclass
class CohortInputs:
    """One sex's cohort in the forms the methods read: what :meth:`RiskModel.fit` takes
    (:func:`sphr.risk.fit.read_inputs` reads them from a run directory)."""

    sex: str
    features: list[str]
    #: the cohort's frames, features quantile-normalized (``cohorts/<sex>/<part>.parquet``)
    train: pd.DataFrame
    calibration: pd.DataFrame
    test: pd.DataFrame
    normalizer: QuantileNormalizer
    #: the ranges the classes were labelled with, as records (``sphr.cohorts.ranges``)
    clinical_ranges: list[dict[str, Any]]
    #: eid + raw features (UKB units) per partition, the marker space's input
    raw: dict[str, pd.DataFrame] | None = None
    #: eid + PhenoAge's markers as measured (``ingest/baseline.parquet``)
    baseline: pd.DataFrame | None = None
    #: linked outcomes (``ingest/outcomes.parquet``) and a new diagnosis at the first
    #: repeat visit (by eid): the supervised comparators' targets
    outcomes: pd.DataFrame | None = None
    first_visit: pd.Series | None = None
    #: ``deep_patient`` / ``sphr``: a fitted representation or the file to read it from
    representations: dict[str, Any] = field(default_factory=dict)
    #: method -> why an input it needs could not be read (it is skipped with this reason)
    unavailable: dict[str, str] = field(default_factory=dict)


class Scores(NamedTuple):
    """What :meth:`RiskModel.score` gives, as ``sphr score`` writes it."""

    rows: pd.DataFrame          # COLUMNS, one row per participant, method and mode
    participants: pd.DataFrame  # eid, sex, imputed_features, imputed
    unscorable: pd.DataFrame    # eid, sex, reason
    report: dict[str, Any]
    #: absolute risk of every candidate (:func:`sphr.risk.absolute.predict_all` + sex,
    #: partition); :func:`sphr.risk.absolute.shipped` picks the shipped rows
    absolute: pd.DataFrame


# ----------------------------------------------------------------------------- fitted methods

@dataclass
class DistanceMethod:
    """A distance method: its fitted space, whether it reads the marker space, one model a mode."""

    space: Space
    input: str
    modes: dict[str, DistanceModel]

    def to_spec(self, directory: Path, method: str) -> dict[str, Any]:
        return {"modes": {mode: m.to_dict() for mode, m in self.modes.items()},
                "input": self.input, "space": self.space.to_spec(directory, method)}

    @classmethod
    def from_spec(cls, entry: dict[str, Any], directory: Path, features: list[str],
                  device: str) -> DistanceMethod:
        space = load_space(entry["space"], directory, features, device)
        return cls(space, entry.get("input", "quantile"),
                   {mode: DistanceModel.from_dict(m, space) for mode, m in entry["modes"].items()})

    def score(self, people: _NewPeople, method: str) -> pd.DataFrame:
        data = people.marker() if self.input == "marker" else people.normalized
        return pd.concat([people.rows(m.transform(data), method, mode)
                          for mode, m in self.modes.items()], ignore_index=True)


@dataclass
class ScoreMethod:
    """A score given per person, calibrated: PhenoAge acceleration (``line``: PhenoAge on age)
    or a supervised comparator (``supervised``: the fold models); ``about``: what the
    score is, as risk_model.json records it."""

    model: ScoreModel
    about: dict[str, Any]
    line: list[float] | None = None
    supervised: SupervisedScore | None = None

    def to_spec(self, directory: Path, method: str) -> dict[str, Any]:
        spec = {"modes": {"calibrated": self.model.to_dict()}, **self.about}
        if self.line is not None:
            spec["phenoage_line"] = self.line
        if self.supervised is not None:
            spec["supervised"] = self.supervised.save(directory, method)
        return spec

    @classmethod
    def from_spec(cls, entry: dict[str, Any], directory: Path) -> ScoreMethod:
        about = {k: v for k, v in entry.items() if k not in ("modes", "phenoage_line",
                                                             "supervised")}
        sup = SupervisedScore.load(entry["supervised"], directory) if "supervised" in entry \
            else None
        return cls(ScoreModel.from_dict(entry["modes"]["calibrated"]), about,
                   entry.get("phenoage_line"), sup)

    def score(self, people: _NewPeople, method: str) -> pd.DataFrame:
        if self.line is not None:
            raw = phenoage_acceleration_new(people.as_read, self.line)
        else:
            raw = self.supervised.predict_margin(
                people.normalized[people.features].to_numpy(np.float32))
        return people.rows(self.model.transform(raw, people.groups), method, "calibrated")


def _load_method(entry: dict[str, Any], directory: Path, features: list[str], device: str
                 ) -> DistanceMethod | ScoreMethod:
    if "phenoage_line" in entry or "supervised" in entry:
        return ScoreMethod.from_spec(entry, directory)
    return DistanceMethod.from_spec(entry, directory, features, device)


# ----------------------------------------------------------------------------- the fit of one sex

class _Fit:
    """One sex being fitted: the inputs in the forms the methods read, and the rows so far."""

    def __init__(self, model: SexModel, inputs: CohortInputs, config: RiskConfig,
                 groups: tuple[tuple[int, int], ...]) -> None:
        self.model, self.inputs, self.config, self.groups = model, inputs, config, groups
        self.people = participants(inputs.train, inputs.calibration, inputs.test)
        self.frames: list[pd.DataFrame] = []
        self._marker: tuple[dict[str, pd.DataFrame], pd.DataFrame] | None = None

    def add(self, out: pd.DataFrame, method: str, mode: str) -> None:
        """Rows of one method and mode, one per participant (same order as ``people``);
        a participant without a score (NaN distance) is left out of the rows."""
        p = self.people
        out.insert(0, "eid", p["eid"].to_numpy(np.int64))
        out = out.assign(sex=self.model.sex, method=method, mode=mode,
                         age_years=p["age_years"].to_numpy(float),
                         partition=p["partition"].to_numpy(), label=p["label"].to_numpy(np.int8))
        self.frames.append(out.loc[np.isfinite(out["distance"].to_numpy(float))])

    def skip(self, method: str, reason: str) -> None:
        log.warning("%s: skipping method %s: %s", self.model.sex, method, reason)
        self.model.skipped_[method] = reason
        self.model.unscored_[method] = {"n": len(self.people), "of": len(self.people),
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
            self.model.marker_scaler_ = scaler
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
                                  space=space).fit(frames["train"], frames["calibration"])
            self.add(model.transform(people), method, mode)
            modes[mode] = model
        self.model.methods_[method] = DistanceMethod(space, "marker" if marker else "quantile",
                                                     modes)

    def calibrated(self, method: str, raw: np.ndarray, about: dict[str, Any], **source: Any
                   ) -> None:
        """A per-person score through the age standardization and calibrated bounds."""
        people = self.people
        age_group = people["age_group"].astype(str).to_numpy(object)
        bfh, role = bfh_rows(people), people["partition"].to_numpy()
        fit, cal = bfh & (role == "train"), bfh & (role == "calibration")
        model = ScoreModel(method, self.groups, self.config.standardize_min_group).fit(
            raw[fit], age_group[fit], raw[cal], age_group[cal])
        self.add(model.transform(raw, age_group), method, "calibrated")
        self.model.methods_[method] = ScoreMethod(model, about, **source)

    def phenoage(self) -> None:
        """PhenoAge acceleration from the export's raw markers, for everyone with the nine
        markers, whatever the cohort's features are."""
        if "phenoage" in self.inputs.unavailable:
            raise InputError(self.inputs.unavailable["phenoage"])
        if self.inputs.baseline is None:
            raise InputError("PhenoAge reads the raw markers of the baseline (run `sphr ingest`)")
        people = self.people
        raw = self.inputs.baseline.drop_duplicates("eid").set_index("eid").reindex(
            people["eid"].to_numpy()).reset_index(drop=True)
        raw["age"] = people["age_years"].to_numpy(float)
        score, line, gaps = phenoage_scores(raw, people["partition"].to_numpy())
        self.calibrated("phenoage", score, {"score": "PhenoAge acceleration (years)"}, line=line)
        n = int(np.isnan(score).sum())
        if n:
            self.model.unscored_["phenoage"] = {
                "n": n, "of": len(score),
                "reason": "missing " + ", ".join(f"{k} ({v})" for k, v in gaps.items())}

    def _targets(self) -> list[Target]:
        inputs, people = self.inputs, self.people
        targets = linked_targets(people, inputs.outcomes) if inputs.outcomes is not None else []
        if inputs.first_visit is not None:
            targets.append(repeat_visit_target(people, inputs.first_visit))
        else:
            self.skip("supervised_xgboost", inputs.unavailable.get(
                "supervised_xgboost", "repeat visit: no follow-up visits given"))
        return targets

    def supervised(self) -> None:
        """Every supervised comparator the export allows (:mod:`sphr.risk.supervised`); each
        one that cannot be fitted is skipped with its reason."""
        config, people = self.config, self.people
        train = (people["partition"] == "train").to_numpy()
        X = people[self.inputs.features].to_numpy(np.float32)
        for target in self._targets():
            model = SupervisedScore(target.objective, config.supervised_folds, config.seed,
                                    config.supervised_min_events)
            try:
                score = model.fit_score(X, target.label, train)
                about = {"score": target.description, "uses_outcome": True,
                         "outcome": target.outcome or "new diagnosis (visit 1)",
                         "training_events": target.events(train)}
                self.calibrated(target.method, score, about, supervised=model)
            except SphrError as exc:
                self.skip(target.method, str(exc))

    def covariates(self) -> pd.DataFrame:
        """Every absolute-risk covariate of every participant (``people``' order): age, the
        raw Euclidean distance (mode calibrated), PhenoAge's xb and the marker-space features;
        a covariate that cannot be computed is left out (its candidates are skipped)."""
        people = self.people
        eids = people["eid"].to_numpy(np.int64)
        dist = [f for f in self.frames if len(f) and f["method"].iloc[0] == "raw_euclidean"
                and f["mode"].iloc[0] == "calibrated"]
        raw = None
        if self.inputs.baseline is not None:
            raw = self.inputs.baseline.drop_duplicates("eid").set_index("eid").reindex(
                eids).reset_index(drop=True)
            raw["age"] = people["age_years"].to_numpy(float)
        try:
            markers = self.marker()[1][self.inputs.features]
        except InputError:
            markers = None
        return _covariates(people["age_years"].to_numpy(float), eids,
                           dist[0][["eid", "distance"]] if dist else None, raw, markers)

    def absolute(self) -> None:
        """The absolute-risk candidates of every linked outcome (:mod:`sphr.risk.absolute`),
        each skipped with its reason where it cannot be fitted."""
        inputs, people, model = self.inputs, self.people, self.model
        model.absolute_ = {}
        if inputs.outcomes is None or inputs.outcomes.empty:
            model.skipped_["absolute_risk"] = "no linked outcomes in the export"
            return
        t0 = time.perf_counter()
        X = self.covariates()
        eids = people["eid"].to_numpy(np.int64)
        for outcome in dict.fromkeys(inputs.outcomes["outcome"]):
            years, event = absolute.outcome_arrays(eids, inputs.outcomes, outcome)
            models, skipped = absolute.fit_outcome_models(
                X, people["partition"].to_numpy(), bfh_rows(people), years, event, outcome,
                inputs.features, self.config.absolute_min_events)
            for cand, why in skipped.items():
                log.warning("%s: absolute risk of %s, %s skipped: %s", model.sex, outcome,
                            cand, why)
                model.skipped_[f"absolute_{outcome}_{cand}"] = why
            if models:
                model.absolute_[outcome] = models
        rows = absolute.predict_all(model.absolute_, X, eids)
        part = people.set_index("eid")["partition"]
        model.absolute_rows_ = rows.assign(sex=model.sex,
                                           partition=part.reindex(rows["eid"]).to_numpy())
        log.info("%s: absolute risk fitted in %.1f s", model.sex, time.perf_counter() - t0)

    def method(self, method: str) -> None:
        calibrated = "calibrated" in self.config.modes
        try:
            if method == "phenoage":
                if calibrated:
                    self.phenoage()
            elif method == "supervised_xgboost":
                if calibrated:
                    self.supervised()
            else:
                self.distance(method)
        except SphrError as exc:
            if method not in OPTIONAL_METHODS:
                raise
            self.skip(method, str(exc))


# ----------------------------------------------------------------------------- absolute risk

def predict_none() -> pd.DataFrame:
    """The absolute-risk rows of nobody (the columns of :func:`sphr.risk.absolute.predict_all`
    with sex and partition)."""
    return absolute.predict_all({}, pd.DataFrame(), np.array([], np.int64)).assign(
        sex=pd.Series(dtype=object), partition=pd.Series(dtype=object))


def _covariates(age: np.ndarray, eids: np.ndarray, distance: pd.DataFrame | None,
                raw: pd.DataFrame | None, markers: pd.DataFrame | None) -> pd.DataFrame:
    """The covariate frame of :mod:`sphr.risk.absolute`, one row per eid: age, distance (from
    eid -> distance rows), PhenoAge's xb from the raw markers as measured (NaN where one is
    missing) and the marker-space features; a covariate without its input is left out."""
    from sphr.risk.phenoage import linear_predictor

    X = pd.DataFrame({absolute.AGE: np.asarray(age, float)})
    if distance is not None:
        d = distance.drop_duplicates("eid").set_index("eid")["distance"]
        X[absolute.DISTANCE] = d.reindex(eids).to_numpy(float)
    if raw is not None:
        try:
            X[absolute.PHENOAGE_XB] = linear_predictor(raw.reset_index(drop=True))
        except InputError:  # the export lacks a PhenoAge marker: its candidates are skipped
            pass
    if markers is not None:  # age stays in years (a cohort feature too, there scaled)
        markers = markers.drop(columns=[c for c in markers.columns if c in X.columns])
        X = pd.concat([X, markers.reset_index(drop=True).astype(float)], axis=1)
    return X


# ----------------------------------------------------------------------------- new people

@dataclass
class _NewPeople:
    """One sex's new people in every form the saved methods read."""

    frame: pd.DataFrame        # raw UKB units, imputed
    as_read: pd.DataFrame      # raw UKB units, not imputed (every column of the export)
    normalized: pd.DataFrame   # quantile-normalized features + age_group
    groups: np.ndarray
    labels: np.ndarray
    sex: str
    features: list[str]
    scaler: MarkerScaler | None
    scaler_file: Path | None

    def rows(self, res: pd.DataFrame, method: str, mode: str) -> pd.DataFrame:
        res.insert(0, "eid", self.frame["eid"].to_numpy(np.int64))
        return res.assign(sex=self.sex, method=method, mode=mode, partition="new",
                          label=self.labels, age_years=self.frame["age"].to_numpy(float))

    def marker(self) -> pd.DataFrame:
        """The features in the marker space of the saved model."""
        if self.scaler is None:
            raise InputError("missing marker scaler of the risk model", file=self.scaler_file)
        out = pd.DataFrame(self.scaler.transform(self.frame[self.features].to_numpy(float)),
                           columns=self.features)
        out["age_group"] = self.groups
        return out


def _unscorable(frame: pd.DataFrame, features: list[str], impute: bool,
                max_imputed_share: float) -> np.ndarray:
    """Why each participant cannot be scored ("" where they can)."""
    n_missing = frame[features].isna().sum(axis=1).to_numpy()
    reasons = np.full(len(frame), "", dtype=object)
    if impute:
        too_many = n_missing > max_imputed_share * len(features)
        reasons[too_many] = [f"{k} of {len(features)} features missing (more than "
                             f"{max_imputed_share:.0%})" for k in n_missing[too_many]]
    else:
        reasons[n_missing > 0] = "missing values (imputation off)"
    reasons[frame["age"].isna().to_numpy() & (reasons == "")] = "age missing"
    return reasons


# ----------------------------------------------------------------------------- one sex

class SexModel:
    """The fitted risk model of one sex (module docstring). Fitted attributes:
    ``features_``, ``normalizer_``, ``clinical_ranges_`` (records), ``population_`` (the
    training population, :mod:`sphr.risk.population`), ``marker_scaler_``
    (None without a marker-space method), ``methods_`` (name -> :class:`DistanceMethod` or
    :class:`ScoreMethod`), ``skipped_`` and ``unscored_``; after ``fit`` also ``rows_``."""

    def __init__(self, sex: str) -> None:
        self.sex = sex

    def _reset(self, features: list[str], normalizer: QuantileNormalizer,
               clinical_ranges: list[dict[str, Any]]) -> None:
        self.features_, self.normalizer_ = list(features), normalizer
        self.clinical_ranges_ = list(clinical_ranges)
        self.population_ = PopulationSummary.from_normalizer(normalizer)
        self.marker_scaler_: MarkerScaler | None = None
        self.methods_: dict[str, DistanceMethod | ScoreMethod] = {}
        self.skipped_: dict[str, str] = {}
        self.unscored_: dict[str, dict[str, Any]] = {}
        self.absolute_: dict[str, dict[str, Any]] = {}
        self.absolute_rows_ = predict_none()
        self._saved: tuple[Path, dict[str, Any]] | None = None

    def fitted_copy(self) -> SexModel:
        """A model with every fitted part of this one (each container its own), not saved and
        without the fit's rows: what re-anchoring replaces parts of. Listed beside
        :meth:`_reset`, so a part added to the model is carried over too."""
        out = SexModel(self.sex)
        out._reset(self.features_, self.normalizer_, self.clinical_ranges_)
        out.population_, out.marker_scaler_ = self.population_, self.marker_scaler_
        out.methods_ = dict(self.methods_)
        out.skipped_, out.unscored_ = dict(self.skipped_), dict(self.unscored_)
        out.absolute_ = self.absolute_
        return out

    def fit(self, inputs: CohortInputs, config: RiskConfig,
            age_groups: tuple[tuple[int, int], ...] = DEFAULT_AGE_GROUPS) -> SexModel:
        """Fit every method and mode of ``config`` (module docstring)."""
        if inputs.sex != self.sex:
            raise InputError(f"inputs of {inputs.sex} given to the {self.sex} model")
        self._reset(inputs.features, inputs.normalizer, inputs.clinical_ranges)
        if inputs.raw is not None:  # the training population the drift table compares with
            train = inputs.raw["train"]
            real = ~train["augmented"].to_numpy(bool) if "augmented" in train else \
                np.ones(len(train), bool)
            self.population_ = PopulationSummary().fit(
                train.loc[real, inputs.features].to_numpy(float), inputs.features)
        fit = _Fit(self, inputs, config, tuple(tuple(g) for g in age_groups))
        for method in config.methods:
            fit.method(method)
        fit.absolute()
        self.rows_ = fit.rows()
        return self

    def save(self, directory: Path) -> dict[str, Any]:
        """Write the sex's folder; return its entry of risk_model.json. A model read from a
        folder is saved as that folder, byte for byte (nothing in it was refitted)."""
        directory = Path(directory)
        if self._saved is not None:
            source, spec = self._saved
            if source.resolve() != directory.resolve():
                shutil.copytree(source, directory, dirs_exist_ok=True)
            return spec
        directory.mkdir(parents=True, exist_ok=True)
        self.normalizer_.save(directory / "normalizer.json")
        write_json(self.features_, directory / "features.json")
        # the BFH ranges the cohort was labelled with: new people are labelled alike
        write_json(self.clinical_ranges_, directory / "clinical_ranges.json")
        self.population_.save(directory / POPULATION_FILE)
        if self.marker_scaler_ is not None:
            self.marker_scaler_.save(directory / MARKER_SCALER)
        methods = {name: m.to_spec(directory, name) for name, m in self.methods_.items()}
        spec = {"features": self.features_, "methods": methods,
                "absolute": {outcome: {cand: m.to_dict() for cand, m in models.items()}
                             for outcome, models in self.absolute_.items()}}
        self._saved = directory, spec
        return spec

    @classmethod
    def load(cls, directory: Path, spec: dict[str, Any], device: str = "auto") -> SexModel:
        """The sex's folder as :meth:`save` wrote it; files are checked against their checksums."""
        directory = Path(directory)
        sex = directory.name
        norm = QuantileNormalizer.load(directory / "normalizer.json")
        if norm.features_ != spec["features"]:
            raise InputError("normalizer and risk model disagree on the features", file=directory)
        ranges = directory / "clinical_ranges.json"
        if ranges.is_file():
            records = read_json(ranges)
        else:  # saved before the ranges were (MODEL_VERSION < 3)
            log.warning("%s: no clinical_ranges.json; labelling BFH with the default P0 ranges",
                        directory)
            records = [dataclasses.asdict(r) for r in ranges_for(sex, P0_RANGES)]
        model = cls(sex)
        model._reset(spec["features"], norm, records)
        if (directory / MARKER_SCALER).is_file():
            model.marker_scaler_ = MarkerScaler.load(directory / MARKER_SCALER)
        if (directory / POPULATION_FILE).is_file():
            model.population_ = PopulationSummary.load(directory / POPULATION_FILE)
        model.methods_ = {name: _load_method(entry, directory, model.features_, device)
                          for name, entry in spec["methods"].items()}
        model.absolute_ = {outcome: {cand: absolute.load_model(m) for cand, m in models.items()}
                           for outcome, models in spec.get("absolute", {}).items()}
        model._saved = directory, spec
        return model

    def _new_people(self, as_read: pd.DataFrame, frame: pd.DataFrame,
                    age_groups: tuple[tuple[int, int], ...], report: dict[str, Any],
                    directory: Path | None) -> _NewPeople:
        groups, report["ages_outside_groups"] = assign_age_groups(
            frame["age"].to_numpy(float), age_groups)
        normalized = pd.DataFrame(self.normalizer_.transform(frame[self.features_].to_numpy(float)),
                                  columns=self.features_)
        normalized["age_group"] = groups
        labels = assign_classes(frame, self.sex, ranges_from_records(self.clinical_ranges_))
        return _NewPeople(frame, as_read, normalized, groups, labels, self.sex, self.features_,
                          self.marker_scaler_, directory / MARKER_SCALER if directory else None)

    def score(self, baseline: pd.DataFrame, *, age_groups: tuple[tuple[int, int], ...],
              source: Path | None = None, allow_out_of_range: bool = False, impute: bool = True,
              max_imputed_share: float = MAX_IMPUTED_SHARE) -> Scores:
        """Rows (``COLUMNS``), participants (eid, sex, imputed_features, imputed), unscorable
        (eid, sex, reason) and the report of this sex's people in ``baseline``."""
        features, sex = self.features_, self.sex
        frame = baseline.loc[baseline["sex"] == SEX_CODE[sex]].reset_index(drop=True)
        for name in features:
            if name not in frame.columns or (len(frame) and frame[name].isna().all()):
                raise InputError(f"the model needs {name!r} and the export has no values for it",
                                 file=source, field=_ukb_field(name))
        reasons = _unscorable(frame, features, impute, max_imputed_share)
        keep = reasons == ""
        n_missing = frame[features].isna().sum(axis=1).to_numpy()
        unscorable = pd.DataFrame({"eid": frame.loc[~keep, "eid"].to_numpy(np.int64), "sex": sex,
                                   "reason": reasons[~keep]})
        report = {"participants": len(frame), "scored": int(keep.sum()),
                  "imputed": int((keep & (n_missing > 0)).sum()),
                  "unscorable": int((~keep).sum()),
                  "left_out_missing_values": int((~keep).sum())}
        # units first, on the values as read (missing ones are ignored)
        shares = check_units(frame.loc[keep], self.normalizer_, source,
                             allow_out_of_range=allow_out_of_range)
        report["out_of_range_share"] = {k: v for k, v in shares.items() if v > 0}
        # PhenoAge reads the markers as measured (an imputed CRP is no CRP), the rest imputed
        as_read = frame.loc[keep].reset_index(drop=True)
        frame, counts, names = impute_median(as_read, self.normalizer_)
        people = pd.DataFrame({"eid": frame["eid"].to_numpy(np.int64), "sex": sex,
                               "imputed_features": counts, "imputed": names})
        if frame.empty:
            return Scores(pd.DataFrame(columns=list(COLUMNS)), people, unscorable, report,
                          predict_none())
        new = self._new_people(as_read, frame, age_groups, report,
                               self._saved[0] if self._saved else None)
        out, report["not_scored"] = [], {}
        for method, fitted in self.methods_.items():
            res = fitted.score(new, method)
            scored = np.isfinite(res["distance"].to_numpy(float))
            first = (res["mode"] == res["mode"].iloc[0]).to_numpy()
            if (~scored & first).any():  # a method some people cannot get (PhenoAge without CRP)
                report["not_scored"][method] = int((~scored & first).sum())
            out.append(res.loc[scored])
        rows = pd.concat(out, ignore_index=True)[list(COLUMNS)]
        return Scores(rows, people, unscorable, report, self._absolute_new(new, rows))

    def _absolute_new(self, new: _NewPeople, rows: pd.DataFrame) -> pd.DataFrame:
        """Every saved absolute-risk candidate on new people (nothing refitted)."""
        if not self.absolute_:
            return predict_none()
        eids = new.frame["eid"].to_numpy(np.int64)
        dist = rows.loc[(rows["method"] == "raw_euclidean") & (rows["mode"] == "calibrated"),
                        ["eid", "distance"]]
        raw = new.as_read.copy()
        raw["age"] = new.frame["age"].to_numpy(float)
        try:
            markers = new.marker()[self.features_]
        except InputError:
            markers = None
        X = _covariates(new.frame["age"].to_numpy(float), eids, dist if len(dist) else None,
                        raw, markers)
        return absolute.predict_all(self.absolute_, X, eids).assign(sex=self.sex,
                                                                     partition="new")


# ----------------------------------------------------------------------------- every sex

def _config_from(data: dict[str, Any]) -> RiskConfig:
    names = {f.name for f in dataclasses.fields(RiskConfig)}
    return RiskConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()
                         if k in names})


class RiskModel:
    """The fitted risk model of every sex (module docstring).

    Parameters: ``config`` (:class:`~sphr.risk.config.RiskConfig`: methods, modes, pooling,
    seeds, the device SPHR embeds on) and ``age_groups`` (the cohort's). Fitted attributes:
    ``sexes_`` (sex -> :class:`SexModel`), ``skipped_`` and ``unscored_`` ("sex/method" ->
    why), ``version_``; after ``fit`` also ``rows_`` (the ``risk_groups`` rows of every
    fitted participant), after ``load`` ``path_`` (the folder it was read from).
    """

    def __init__(self, config: RiskConfig | None = None,
                 age_groups: tuple[tuple[int, int], ...] = DEFAULT_AGE_GROUPS) -> None:
        self.config = config
        self.age_groups = age_groups

    @property
    def _groups(self) -> tuple[tuple[int, int], ...]:
        return tuple(tuple(int(v) for v in g) for g in self.age_groups)

    def _init_fitted(self, version: int) -> None:
        self.sexes_: dict[str, SexModel] = {}
        self.skipped_: dict[str, str] = {}
        self.unscored_: dict[str, dict[str, Any]] = {}
        self.version_, self.path_ = version, None

    def fit(self, inputs: Sequence[CohortInputs]) -> RiskModel:
        """Fit each sex of ``inputs`` (one :class:`CohortInputs` per sex)."""
        config = self.config or RiskConfig()
        config.check()
        self._init_fitted(MODEL_VERSION)
        if not inputs:
            raise InputError("no cohort to fit the risk model on")
        rows = []
        for inp in inputs:
            sex = SexModel(inp.sex).fit(inp, config, self._groups)
            self.sexes_[inp.sex] = sex
            self.skipped_.update({f"{inp.sex}/{m}": why for m, why in sex.skipped_.items()})
            self.unscored_.update({f"{inp.sex}/{m}": v for m, v in sex.unscored_.items()})
            rows.append(sex.rows_)
        self.rows_ = pd.concat(rows, ignore_index=True) if len(rows) > 1 else rows[0]
        self.absolute_rows_ = pd.concat([s.absolute_rows_ for s in self.sexes_.values()],
                                        ignore_index=True)
        return self

    def save(self, directory: str | Path) -> Path:
        """``directory/risk_model.json`` and one folder per sex (module docstring)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        sexes = {sex: m.save(directory / sex) for sex, m in self.sexes_.items()}
        spec = {"version": self.version_, "age_groups": [list(g) for g in self._groups],
                "config": dataclasses.asdict(self.config or RiskConfig()), "sexes": sexes,
                "skipped": self.skipped_, "unscored": self.unscored_}
        return write_json(spec, directory / MODEL_FILE)

    @classmethod
    def load(cls, path: str | Path, device: str | None = None) -> RiskModel:
        """The model saved in ``path`` (RUN, RUN/risk or the model folder); SPHR embeds on
        ``device`` (None: the device it was fitted with)."""
        directory = find_model_dir(path)
        spec = read_json(directory / MODEL_FILE)
        config = _config_from(spec.get("config", {}))
        model = cls(config, tuple(tuple(g) for g in spec["age_groups"]))
        model._init_fitted(spec.get("version", MODEL_VERSION))
        for sex, sex_spec in spec["sexes"].items():
            model.sexes_[sex] = SexModel.load(directory / sex, sex_spec, device or config.device)
        model.skipped_ = dict(spec.get("skipped", {}))
        model.unscored_ = dict(spec.get("unscored", {}))
        model.path_ = directory
        return model

    @classmethod
    def combine(cls, models: Sequence[RiskModel]) -> RiskModel:
        """One model of the sexes of ``models`` (each fitted or loaded alone; nothing refitted):
        the settings and age groups of the first."""
        if not models:
            raise InputError("no risk models to combine")
        out = cls(models[0].config, models[0].age_groups)
        out._init_fitted(models[0].version_)
        for m in models:
            out.sexes_.update(m.sexes_)
            out.skipped_.update(m.skipped_)
            out.unscored_.update(m.unscored_)
        return out

    def score(self, baseline: pd.DataFrame, *, source: str | Path | None = None,
              allow_out_of_range: bool = False, impute: bool = True,
              max_imputed_share: float = MAX_IMPUTED_SHARE) -> Scores:
        """Every sex of the model on ``baseline`` (``ingest/baseline.parquet``'s columns, UKB
        units): the rows of every method and mode, the participants, the unscorable and the
        report. ``source``: the export, named in errors and the report."""
        source = Path(source) if source is not None else None
        frames, people, lost, risks = [], [], [], []
        report: dict[str, Any] = {"export": str(source), "model": str(self.path_), "sexes": {}}
        for sex, model in self.sexes_.items():
            res = model.score(baseline, age_groups=self._groups, source=source,
                              allow_out_of_range=allow_out_of_range, impute=impute,
                              max_imputed_share=max_imputed_share)
            frames.append(res.rows)
            people.append(res.participants)
            lost.append(res.unscorable)
            risks.append(res.absolute)
            report["sexes"][sex] = res.report
        fitted = [SEX_CODE[s] for s in self.sexes_]
        other = baseline.loc[~baseline["sex"].isin(fitted)]
        reason = np.where(other["sex"].isna(), "sex missing", "sex not in the fitted model")
        lost.append(pd.DataFrame({"eid": other["eid"].to_numpy(np.int64),
                                  "sex": other["sex"].astype(str).to_numpy(), "reason": reason}))
        report["left_out_sex_not_fitted"] = len(other)
        rows = pd.concat(frames, ignore_index=True)
        report["rows"] = len(rows)
        unscorable = pd.concat([f for f in lost if len(f)] or [lost[-1]], ignore_index=True)
        risks = [r for r in risks if len(r)] or [predict_none()]
        return Scores(rows, pd.concat(people, ignore_index=True), unscorable, report,
                      pd.concat(risks, ignore_index=True))
