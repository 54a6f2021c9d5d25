"""The frames the risk model reads and gives: a sex's cohort inputs (:class:`CohortInputs`),
its participants, the rows of ``risk_groups`` (:data:`COLUMNS`), what scoring gives
(:class:`Scores`), new people in every form the saved methods read (:class:`NewPeople`) and
the covariates of the absolute-risk models."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from sphr.cohorts.normalize import MarkerScaler, QuantileNormalizer
from sphr.errors import InputError
from sphr.risk import absolute

#: the stable columns of risk_groups.parquet / .csv, in order
COLUMNS: tuple[str, ...] = ("eid", "sex", "age_years", "age_group", "method", "mode", "distance",
                            "score", "group", "normal_low", "normal_high", "lower_low",
                            "lower_high", "centile", "partition", "fold", "label")


def no_fold(n: int) -> pd.Series:
    """The ``fold`` column of rows no cross-fit fold scored (the single split, new people)."""
    return pd.Series(pd.array([pd.NA] * n, dtype="Int64"))
PARTITIONS: tuple[str, ...] = ("train", "calibration", "test")


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
    #: eid + the markers the cohort step filled (``cohorts/<sex>/imputed.parquet``), so
    #: the training population is summarized on measured values only
    imputed: pd.DataFrame | None = None
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
    """What :meth:`RiskModel.score_cohort` gives, as ``sphr score`` writes it."""

    rows: pd.DataFrame          # COLUMNS, one row per participant, method and mode
    participants: pd.DataFrame  # eid, sex, imputed_features, imputed
    unscorable: pd.DataFrame    # eid, sex, reason
    report: dict[str, Any]
    #: absolute risk of every candidate (:func:`sphr.risk.absolute.predict_all` + sex,
    #: partition); :func:`sphr.risk.absolute.shipped` picks the shipped rows
    absolute: pd.DataFrame


def predict_none() -> pd.DataFrame:
    """The absolute-risk rows of nobody (the columns of :func:`sphr.risk.absolute.predict_all`
    with sex and partition)."""
    return absolute.predict_all({}, pd.DataFrame(), np.array([], np.int64)).assign(
        sex=pd.Series(dtype=object), partition=pd.Series(dtype=object))


def covariates(age: np.ndarray, eids: np.ndarray, distance: pd.DataFrame | None,
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


@dataclass
class NewPeople:
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
                          label=self.labels, age_years=self.frame["age"].to_numpy(float),
                          fold=no_fold(len(res)).to_numpy())

    def marker(self) -> pd.DataFrame:
        """The features in the marker space of the saved model."""
        if self.scaler is None:
            raise InputError("missing marker scaler of the risk model", file=self.scaler_file)
        out = pd.DataFrame(self.scaler.transform(self.frame[self.features].to_numpy(float)),
                           columns=self.features)
        out["age_group"] = self.groups
        return out
