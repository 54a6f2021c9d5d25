"""``DistanceModel``: references and intervals per age group of one sex, for one distance method
and mode (:class:`sphr.risk.model.RiskModel` holds one per method and mode of each sex).

``fit`` takes a cohort training frame (``cohorts/<sex>/train.parquet``) and uses
only its bona fide healthy rows that are real (``label == 2`` and not
``augmented``) for the space (e.g. a covariance), the references r_g and the
age standardization of the score; it never sees test rows because it is never
given them. Mode ``calibrated`` also takes the calibration frame
(``cohorts/<sex>/calibration.parquet``): the bounds come from its BFH rows'
distances, which are out of sample for every fit (:mod:`sphr.risk.calibration`).

**Decision (small groups)**: an age group with fewer than ``min_group_size`` real
BFH training members borrows the members of its neighbouring age groups,
nearest first (the lower neighbour first on a tie), until it has enough; the
groups used are recorded as ``pooled_groups``. Each group keeps its own
reference and intervals.

**Age outside every group**: participants carry the ``age_group`` written by
``sphr cohorts``; a frame with only ages is grouped with
:func:`sphr.cohorts.age.assign_age_groups` (nearest-group rule: a 35-year-old
joins 36-45, a 76-year-old 66-75). An ``age_group`` name the model does not know
is an ``InputError``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError

from sphr.cohorts.age import DEFAULT_AGE_GROUPS, assign_age_groups, group_names
from sphr.errors import ConfigError, InputError
from sphr.health_distance import health_distance, health_reference
from sphr.labels import BONA_FIDE_HEALTHY
from sphr.risk.calibration import (
    LOWER_LEVEL,
    NORMAL_LEVEL,
    STANDARDIZATION_PARTS,
    STANDARDIZATIONS,
    TAIL_BOUND,
    TAIL_BOUNDS,
    AgeStandardizer,
    CalibratedBounds,
    Healthy,
    _midpoint,
    calibrate,
    pooled_windows,
)
from sphr.risk.centiles import HealthyCentiles
from sphr.risk.config import METHODS
from sphr.risk.intervals import (
    LOWER_Q,
    MODES,
    NORMAL_Q,
    Intervals,
    assign_groups,
    paper_intervals,
)
from sphr.risk.spaces import Space, build_space

OUTPUT_COLUMNS: tuple[str, ...] = ("age_group", "distance", "score", "group", "normal_low",
                                   "normal_high", "lower_low", "lower_high", "centile")
#: fewest calibration BFH rows for the calibrated bounds (the run's pre-flight check reads it)
MIN_CALIBRATION_BFH = 3
#: the interval columns (a NaN low is "no lower bound": the calibrated mode is one-sided)
INTERVAL_COLUMNS: tuple[str, ...] = ("normal_low", "normal_high", "lower_low", "lower_high")


def age_groups_of(frame: pd.DataFrame, age_groups: tuple[tuple[int, int], ...]) -> np.ndarray:
    """The frame's ``age_group`` column, or groups from ``age_years`` / ``age``."""
    if "age_group" in frame.columns and frame["age_group"].notna().all():
        return frame["age_group"].astype(str).to_numpy(object)
    for col in ("age_years", "age"):
        if col in frame.columns:
            return assign_age_groups(frame[col].to_numpy(float), age_groups)[0]
    raise InputError("need an age_group, age_years or age column to pick the age reference",
                     field="age_group")


def ages_of(frame: pd.DataFrame) -> np.ndarray | None:
    """The frame's ages (``age_years`` or ``age``), or None: the age groups' midpoints then."""
    for col in ("age_years", "age"):
        if col in frame.columns:
            return frame[col].to_numpy(float)
    return None


def bfh_rows(frame: pd.DataFrame) -> np.ndarray:
    """Mask of the real (not augmented) bona fide healthy rows of a cohort frame."""
    for col in ("label", "augmented"):
        if col not in frame.columns:
            raise InputError(f"cohort frame has no {col!r} column", field=col)
    return (frame["label"].to_numpy() == BONA_FIDE_HEALTHY) & ~frame["augmented"].to_numpy(bool)


def _distance(Z: np.ndarray, r: np.ndarray) -> np.ndarray:
    """The health distance in float64 (the risk stage's precision) to one reference."""
    return health_distance(np.asarray(Z, np.float64), np.asarray(r, np.float64))


def stratum_record(space: Space, mode: str, X: np.ndarray, Z: np.ndarray, own: int,
                   window: list[str]) -> dict[str, Any]:
    """One age group's entry of a fitted model: its reference (the embedded median BFH
    profile), the distances of the BFH percentile profiles (mode ``paper``'s intervals) and
    the percentiles of its own BFH's distances. ``X``: the reference rows, ``Z``: the group's
    own BFH embedded."""
    qs = (*NORMAL_Q, *LOWER_Q)
    profiles = dict(zip(qs, np.percentile(X, qs, axis=0), strict=True))
    G = {q: space.transform(p[None, :])[0] for q, p in profiles.items()}
    r = health_reference(X, reference="embedded_median_profile", embed=space.transform)
    # a space with its own fixed reference (homeostatic dysregulation: the young
    # reference's mean) maps that reference to the origin
    r = np.zeros_like(r) if getattr(space, "origin_reference", False) else r
    pdist = {q: float(_distance(G[q][None, :], r)[0]) for q in qs}
    own_d = _distance(Z, r)
    iv = paper_intervals(pdist.__getitem__) if mode == "paper" else None
    return {"n_bfh": own, "n_reference": int(X.shape[0]), "pooled_groups": window,
            "reference": r.tolist(),
            "percentile_distances": {str(q): d for q, d in pdist.items()},
            "bfh_distance_percentiles": dict(zip(
                ("1", "2.5", "50", "97.5", "99"),
                np.percentile(own_d, (1, 2.5, 50, 97.5, 99)).tolist(), strict=True)),
            "intervals": iv.as_dict() if iv else None}


class DistanceModel(BaseEstimator):
    """Health distance to the age group's BFH reference, and its risk group (Appendix B).

    Parameters: the ``method`` and ``mode``, the ``features`` (columns of the frames given),
    the age groups and pooling sizes, and ``space``, the method's representation (a space of
    :mod:`sphr.risk.spaces`, fitted here on the BFH rows; ``None``: built for the method;
    a representation fitted by an earlier stage inside it is not refitted). Fitted
    attributes: ``space_``, ``strata_`` (per age group: reference, BFH counts, pooled
    groups, percentile distances, intervals), ``standardizer_`` and, in mode
    ``calibrated``, ``bounds_``.

    ``score_samples`` is the distance standardized for age among healthy people
    (``standardization``, one of :data:`sphr.risk.calibration.STANDARDIZATIONS`; mode
    ``paper`` has no calibration rows and standardizes on the training BFH in the same form):
    comparable across ages, so it is the continuous score the discrimination metrics use.
    """

    def __init__(self, method: str, mode: str, features: list[str], *,
                 age_groups: tuple[tuple[int, int], ...] = DEFAULT_AGE_GROUPS,
                 min_group_size: int = 10, standardize_min_group: int = 30,
                 standardization: str = "training_groups", tail_bound: str = TAIL_BOUND,
                 space: Space | None = None) -> None:
        self.method, self.mode = method, mode
        self.features = features
        self.age_groups = age_groups
        self.min_group_size = min_group_size
        self.standardize_min_group = standardize_min_group
        self.standardization, self.tail_bound = standardization, tail_bound
        self.space = space

    def _check_params(self) -> None:
        if self.method not in METHODS:
            raise ConfigError(f"unknown risk method {self.method!r}: choose from "
                              f"{', '.join(METHODS)}")
        if self.mode not in MODES:
            raise ConfigError(f"unknown risk mode {self.mode!r}: choose from {', '.join(MODES)}")
        if self.min_group_size < 2:
            raise ConfigError("min_group_size must be at least 2")
        for name, value, allowed in (("standardization", self.standardization, STANDARDIZATIONS),
                                     ("tail bound", self.tail_bound, TAIL_BOUNDS)):
            if value not in allowed:
                raise ConfigError(f"unknown {name} {value!r}: choose from {', '.join(allowed)}")

    @property
    def _groups(self) -> tuple[tuple[int, int], ...]:
        return tuple(tuple(g) for g in self.age_groups)

    def _matrix(self, frame: pd.DataFrame) -> np.ndarray:
        missing = [f for f in self.features if f not in frame.columns]
        if missing:
            raise InputError(f"missing feature column(s) {missing[:5]}", field=missing[0])
        return frame[list(self.features)].to_numpy(np.float64)

    def fit(self, train: pd.DataFrame, calibration: pd.DataFrame | None = None) -> DistanceModel:
        """References from the real BFH rows of ``train``; calibrated bounds from the BFH rows
        of ``calibration`` (required in mode ``calibrated``, ignored in mode ``paper``)."""
        self._check_params()
        bfh = bfh_rows(train)
        if bfh.sum() < 2:
            raise InputError("need at least 2 real bona fide healthy training rows, "
                             f"got {bfh.sum()}")
        frame = train.loc[bfh]
        X = self._matrix(frame)
        groups = age_groups_of(frame, self._groups)
        ages = frame["age_years"].to_numpy(float) if "age_years" in frame.columns else None
        space = self.space if self.space is not None else build_space(self.method,
                                                                      list(self.features))
        self.space_ = space.fit(X, ages=ages)
        self._fit_strata(X, groups)
        self.bounds_: CalibratedBounds | None = None
        if self.mode == "calibrated":
            self._calibrate(frame, calibration)
        else:  # Eq. A.4's own intervals: the score for the metrics, from training BFH
            own, _ = self.distance(frame)
            self.standardizer_ = AgeStandardizer(
                group_names(self._groups), self.standardize_min_group,
                STANDARDIZATION_PARTS[self.standardization][1]).fit(own, groups,
                                                                    ages_of(frame))
        return self

    def _fit_strata(self, X: np.ndarray, groups: np.ndarray) -> None:
        """The reference (and in mode paper the intervals) of every age group, from BFH rows
        ``X`` in the method's input and their age groups, through the fitted space."""
        Z = self.space_.transform(X)
        names = group_names(self._groups)
        unknown = sorted(set(groups) - set(names))
        if unknown:
            raise InputError(f"age groups {unknown} are not in the model's {names}",
                             field="age_group")
        counts = [int((groups == g).sum()) for g in names]
        self.strata_: dict[str, dict[str, Any]] = {}
        for name, window in zip(names, pooled_windows(counts, self.min_group_size), strict=True):
            members = np.isin(groups, [names[j] for j in window])
            self.strata_[name] = stratum_record(self.space_, self.mode, X[members],
                                                Z[members], counts[names.index(name)],
                                                [names[j] for j in window])

    def _calibrate(self, train_bfh: pd.DataFrame, calibration: pd.DataFrame | None) -> None:
        """The age standardizer and the bounds (:func:`sphr.risk.calibration.calibrate`) from
        the real BFH rows ``train_bfh`` and the calibration partition's BFH."""
        if calibration is None or calibration.empty:
            raise InputError("mode 'calibrated' needs the calibration partition "
                             "(cohorts/<sex>/calibration.parquet; re-run `sphr cohorts`)")
        cal = calibration.loc[bfh_rows(calibration)]
        if len(cal) < MIN_CALIBRATION_BFH:
            raise InputError(f"need {MIN_CALIBRATION_BFH}+ calibration BFH rows, got {len(cal)}")
        self.standardizer_, self.bounds_ = calibrate(
            self.standardization, group_names(self._groups), healthy_of(self, train_bfh),
            healthy_of(self, cal), self.standardize_min_group, self.tail_bound)
        _calibrated_intervals(self)

    def reanchored(self, train: pd.DataFrame, calibration: pd.DataFrame | None, *,
                   space: Space | None = None, references: bool = True,
                   standardizer: bool = True, bounds: bool = True) -> DistanceModel:
        """A copy fitted anew on another population's BFH rows for the parts named
        (:func:`reanchored_copy`)."""
        return reanchored_copy(self, train, calibration, space=space, references=references,
                               standardizer=standardizer, bounds=bounds)

    def intervals(self, age_group: str) -> Intervals:
        d = self.strata_[age_group]["intervals"]
        lows = [-np.inf if d[k] is None else float(d[k]) for k in ("normal_low", "lower_low")]
        return Intervals(lows[0], d["normal_high"], lows[1], d["lower_high"],
                         tuple(d["repairs"]))

    def distance(self, frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        """(health distance, age group) of every row."""
        if not getattr(self, "strata_", None):
            raise NotFittedError("this DistanceModel is not fitted yet: call fit first")
        groups = age_groups_of(frame, self._groups)
        unknown = sorted(set(groups) - set(self.strata_))
        if unknown:
            raise InputError(f"age groups {unknown} are not in the fitted model "
                             f"({', '.join(self.strata_)})", field="age_group")
        Z = self.space_.transform(self._matrix(frame))
        refs = {g: np.asarray(self.strata_[g]["reference"], np.float64) for g in set(groups)}
        return health_distance(np.asarray(Z, np.float64), refs, groups), groups

    def score_samples(self, frame: pd.DataFrame) -> np.ndarray:
        """The age-standardized distance of every row (larger is worse)."""
        d, groups = self.distance(frame)
        return self.standardizer_.transform(d, groups, ages_of(frame))

    def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
        """distance, score, group and the interval used, one row per input row (same order);
        mode ``calibrated``: the bounds in the person's own distance units."""
        s, groups = self.distance(frame)
        if self.mode == "calibrated" and getattr(self, "centiles_", None) is not None:
            return centile_rows(self.centiles_, s, groups, ages_of(frame))
        c, sc = (self.standardizer_.location_scale(groups, ages_of(frame)) if len(s)
                 else (np.empty(0), np.empty(0)))
        out = pd.DataFrame({"age_group": groups, "distance": s, "score": (s - c) / sc,
                            "group": np.empty(len(s), dtype=object)})
        for col in (*INTERVAL_COLUMNS, "centile"):
            out[col] = np.nan
        if self.mode == "calibrated" and len(s):
            out["group"] = self.bounds_.groups(out["score"].to_numpy())
            out["normal_high"] = c + sc * self.bounds_.normal.value
            out["lower_high"] = c + sc * max(self.bounds_.lower.value, self.bounds_.normal.value)
            return out
        return _paper_groups(self, s, groups, out)

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "mode": self.mode, "features": list(self.features),
                "age_groups": [list(g) for g in self._groups],
                "min_group_size": self.min_group_size, "strata": self.strata_,
                "standardization": self.standardization, "tail_bound": self.tail_bound,
                "standardizer": self.standardizer_.to_dict() if self.standardizer_ else None,
                "bounds": self.bounds_.as_dict() if self.bounds_ else None,
                "centiles": _centiles_dict(getattr(self, "centiles_", None))}

    @classmethod
    def from_dict(cls, data: dict[str, Any], space: Space) -> DistanceModel:
        """The model :meth:`to_dict` saved, with its fitted ``space`` (nothing refitted)."""
        model = cls(data["method"], data["mode"], data["features"],
                    age_groups=tuple(tuple(g) for g in data["age_groups"]),
                    min_group_size=data["min_group_size"],
                    standardization=data["standardization"], tail_bound=data["tail_bound"],
                    space=space)
        model._check_params()
        model.space_ = space
        model.strata_ = data["strata"]
        model.standardizer_ = (AgeStandardizer.from_dict(data["standardizer"],
                                                         group_names(model._groups))
                               if data.get("standardizer") else None)
        model.bounds_ = (CalibratedBounds.from_dict(data["bounds"]) if data.get("bounds")
                         else None)
        model.centiles_ = HealthyCentiles.from_dict(data["centiles"]) if data.get("centiles") \
            else None
        return model


def _calibrated_intervals(model: DistanceModel) -> None:
    """Each age group's bounds in distance units at the group's midpoint age: the
    standardizer's inverse of the calibrated bounds on the standardized score (a
    standardization linear in age moves them within the group; each person's own bounds
    are in :meth:`transform`'s columns)."""
    names = list(model.strata_)
    centers, scales = model.standardizer_.location_scale(np.array(names, object))
    for name, c, sc in zip(names, centers, scales, strict=True):
        st = model.strata_[name]
        st["intervals"] = {"normal_low": None,
                           "normal_high": c + sc * model.bounds_.normal.value,
                           "lower_low": None,
                           "lower_high": c + sc * model.bounds_.lower.value,
                           "repairs": []}


def reanchored_copy(model: DistanceModel, train: pd.DataFrame,
                    calibration: pd.DataFrame | None, *, space: Space | None = None,
                    references: bool = True, standardizer: bool = True, bounds: bool = True
                    ) -> DistanceModel:
    """A copy fitted anew on another population's BFH rows, for the parts named: the
    age-group references (``train``'s real BFH), the age standardizer (the same rows, or the
    calibration BFH for a standardization of source ``calibration``) and the calibrated
    bounds (``calibration``'s BFH, rows no other part has seen).
    The space is kept (``space``: the same space with a new centre, where its reference
    is its origin); the rest is the fitted model's."""
    import copy

    out = copy.copy(model)
    out.space_ = space if space is not None else model.space_
    out.strata_ = copy.deepcopy(model.strata_)
    frame = train.loc[bfh_rows(train)]
    if references:
        out._fit_strata(out._matrix(frame), age_groups_of(frame, model._groups))
    if model.mode == "calibrated" and standardizer and bounds:
        out._calibrate(frame, calibration)
        return out
    if standardizer:  # the anchor BFH, in the model's form
        own, groups = out.distance(frame)
        out.standardizer_ = AgeStandardizer(
            group_names(model._groups), model.standardize_min_group,
            model.standardizer_.form).fit(own, groups, ages_of(frame))
    if model.mode == "calibrated":
        if bounds:
            cal = calibration.loc[bfh_rows(calibration)]
            out.bounds_ = CalibratedBounds.fit(out.score_samples(cal), model.tail_bound)
        _calibrated_intervals(out)
    return out


def _paper_groups(model: DistanceModel, s: np.ndarray, groups: np.ndarray,
                  out: pd.DataFrame) -> pd.DataFrame:
    """Mode ``paper``: each age group's two-sided intervals (Eq. A.5) and the group they give."""
    for g in np.unique(groups):
        rows = np.flatnonzero(groups == g)
        iv = model.intervals(g)
        out.loc[rows, "group"] = assign_groups(s[rows], iv)
        for col in INTERVAL_COLUMNS:
            v = getattr(iv, col)
            out.loc[rows, col] = v if np.isfinite(v) else np.nan
    return out


def _centiles_dict(centiles: HealthyCentiles | None) -> dict[str, Any] | None:
    return centiles.to_dict() if centiles is not None else None


def centile_rows(centiles: HealthyCentiles, values: np.ndarray, groups: np.ndarray,
                 ages: np.ndarray | None) -> pd.DataFrame:
    """The rows of a score read against the healthy-reference centiles (docs/METHODS.md,
    "Healthy-reference centiles"): ``score`` is the centile's normal score (comparable across
    ages), ``centile`` the share of healthy people of the same sex and age closer to healthy
    (x100), the group from it, and the person's own 95% and 99% bounds in score units. A
    person without a value (NaN) gets no group."""
    values = np.asarray(values, np.float64)
    if ages is None:
        ages = np.array([_midpoint(g) for g in groups], np.float64)
    ages = np.asarray(ages, np.float64)
    out = pd.DataFrame({"age_group": np.asarray(groups, object), "distance": values,
                        "score": np.nan, "group": np.full(len(values), None, dtype=object),
                        "normal_low": np.nan, "normal_high": np.nan, "lower_low": np.nan,
                        "lower_high": np.nan, "centile": np.nan})
    ok = np.isfinite(values) & np.isfinite(ages)
    if ok.any():
        v, a = values[ok], ages[ok]
        out.loc[ok, "score"] = centiles.z(v, a)
        out.loc[ok, "group"] = centiles.groups(v, a)
        out.loc[ok, "centile"] = centiles.centile(v, a)
        out.loc[ok, "normal_high"] = centiles.bound(a, NORMAL_LEVEL)
        out.loc[ok, "lower_high"] = centiles.bound(a, LOWER_LEVEL)
    return out


def healthy_of(model: DistanceModel, frame: pd.DataFrame) -> Healthy:
    """The distances, age groups and ages of ``frame``'s rows under a fitted model."""
    d, groups = model.distance(frame)
    return Healthy(d, groups, ages_of(frame))
