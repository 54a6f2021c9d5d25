"""Scoring new people with a fitted sex (module docstring of :mod:`sphr.risk.model`, "Score"):
nothing is refitted. The units are checked first (:mod:`sphr.risk.model.units`), missing
values imputed with the training medians (:mod:`sphr.risk.impute`), and every saved method
and absolute-risk candidate applied."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pandas as pd

from sphr.cohorts.age import assign_age_groups
from sphr.cohorts.normalize import MarkerScaler, QuantileNormalizer
from sphr.cohorts.ranges import assign_classes, ranges_from_records
from sphr.errors import InputError
from sphr.labels import SEX_CODE
from sphr.risk import absolute
from sphr.risk.impute import impute_median
from sphr.risk.model.frames import COLUMNS, NewPeople, Scores, covariates, predict_none
from sphr.risk.model.methods import DistanceMethod, ScoreMethod
from sphr.risk.model.persistence import MARKER_SCALER
from sphr.risk.model.units import check_units, ukb_field

#: more than this share of a participant's fitted features missing: not scored (too little data)
MAX_IMPUTED_SHARE = 0.5


class ScorableSex(Protocol):
    """The fitted parts of a sex that scoring reads (:class:`~sphr.risk.model.SexModel`)."""

    sex: str
    features_: list[str]
    normalizer_: QuantileNormalizer
    clinical_ranges_: list[dict[str, Any]]
    marker_scaler_: MarkerScaler | None
    methods_: dict[str, DistanceMethod | ScoreMethod]
    absolute_: dict[str, dict[str, Any]]


def unscorable(frame: pd.DataFrame, features: list[str], impute: bool,
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


def new_people(model: ScorableSex, as_read: pd.DataFrame, frame: pd.DataFrame,
               age_groups: tuple[tuple[int, int], ...], report: dict[str, Any],
               directory: Path | None) -> NewPeople:
    """``frame`` (imputed) and ``as_read`` in every form the saved methods read; the ages
    outside every age group are counted in ``report``."""
    groups, report["ages_outside_groups"] = assign_age_groups(
        frame["age"].to_numpy(float), age_groups)
    normalized = pd.DataFrame(model.normalizer_.transform(frame[model.features_].to_numpy(float)),
                              columns=model.features_)
    normalized["age_group"] = groups
    # the class from the markers as measured: a filled P0 marker cannot make anyone bona fide
    # healthy, as in the cohort step (docs/METHODS.md, "Missing markers")
    labels = assign_classes(as_read, model.sex, ranges_from_records(model.clinical_ranges_))
    return NewPeople(frame, as_read, normalized, groups, labels, model.sex, model.features_,
                     model.marker_scaler_, directory / MARKER_SCALER if directory else None)


def score_sex(model: ScorableSex, baseline: pd.DataFrame, *,
              age_groups: tuple[tuple[int, int], ...], directory: Path | None = None,
              source: Path | None = None, allow_out_of_range: bool = False, impute: bool = True,
              max_imputed_share: float = MAX_IMPUTED_SHARE) -> Scores:
    """Rows (``COLUMNS``), participants (eid, sex, imputed_features, imputed), unscorable
    (eid, sex, reason) and the report of the sex's people in ``baseline``; ``directory``: the
    folder the model was read from (named in errors)."""
    features, sex = model.features_, model.sex
    frame = baseline.loc[baseline["sex"] == SEX_CODE[sex]].reset_index(drop=True)
    for name in features:
        if name not in frame.columns or (len(frame) and frame[name].isna().all()):
            raise InputError(f"the model needs {name!r} and the export has no values for it",
                             file=source, field=ukb_field(name))
    reasons = unscorable(frame, features, impute, max_imputed_share)
    keep = reasons == ""
    n_missing = frame[features].isna().sum(axis=1).to_numpy()
    lost = pd.DataFrame({"eid": frame.loc[~keep, "eid"].to_numpy(np.int64), "sex": sex,
                         "reason": reasons[~keep]})
    report = {"participants": len(frame), "scored": int(keep.sum()),
              "imputed": int((keep & (n_missing > 0)).sum()),
              "unscorable": int((~keep).sum()),
              "left_out_missing_values": int((~keep).sum())}
    # units first, on the values as read (missing ones are ignored)
    shares = check_units(frame.loc[keep], model.normalizer_, source,
                         allow_out_of_range=allow_out_of_range)
    report["out_of_range_share"] = {k: v for k, v in shares.items() if v > 0}
    # PhenoAge reads the markers as measured (an imputed CRP is no CRP), the rest imputed
    as_read = frame.loc[keep].reset_index(drop=True)
    frame, counts, names = impute_median(as_read, model.normalizer_)
    people = pd.DataFrame({"eid": frame["eid"].to_numpy(np.int64), "sex": sex,
                           "imputed_features": counts, "imputed": names})
    if frame.empty:
        return Scores(pd.DataFrame(columns=list(COLUMNS)), people, lost, report,
                      predict_none())
    new = new_people(model, as_read, frame, age_groups, report, directory)
    out, report["not_scored"] = [], {}
    for method, fitted in model.methods_.items():
        res = fitted.score(new, method)
        scored = np.isfinite(res["distance"].to_numpy(float))
        first = (res["mode"] == res["mode"].iloc[0]).to_numpy()
        if (~scored & first).any():  # a method some people cannot get (PhenoAge without CRP)
            report["not_scored"][method] = int((~scored & first).sum())
        out.append(res.loc[scored])
    rows = pd.concat(out, ignore_index=True)[list(COLUMNS)]
    return Scores(rows, people, lost, report, _absolute_new(model, new, rows))


def _absolute_new(model: ScorableSex, new: NewPeople, rows: pd.DataFrame) -> pd.DataFrame:
    """Every saved absolute-risk candidate on new people (nothing refitted)."""
    if not model.absolute_:
        return predict_none()
    eids = new.frame["eid"].to_numpy(np.int64)
    dist = rows.loc[(rows["method"] == "raw_euclidean") & (rows["mode"] == "calibrated"),
                    ["eid", "distance"]]
    raw = new.as_read.copy()
    raw["age"] = new.frame["age"].to_numpy(float)
    try:
        markers = new.marker()[model.features_]
    except InputError:
        markers = None
    X = covariates(new.frame["age"].to_numpy(float), eids, dist if len(dist) else None,
                   raw, markers)
    return absolute.predict_all(model.absolute_, X, eids).assign(sex=model.sex,
                                                                  partition="new")
