"""Out-of-sample thresholds: one-sided split-conformal bounds on calibration scores.

A score s (a health distance, PhenoAge acceleration, a predicted risk; larger
is worse) is fitted on training rows; the *calibration* rows, which no fit has
seen, give the bound. For n exchangeable calibration scores the split-conformal
upper bound at level q is the ceil((n + 1) q)-th smallest score: a new person
from the same population falls at or below it with probability >= q
(docs/METHODS.md, "Calibrated risk groups").

With few calibration people that rank can exceed n (n < q / (1 - q): 19 for
95%, 99 for 99%), and the conformal bound is infinite. **Decision**: then the
bound is a parametric one, the one-sided normal prediction bound (Student t
quantile, widened by sqrt(1 + 1/n)) of the scores after a transform
(:data:`TAIL_BOUNDS`), and the method used is recorded, so a reader can tell an
exact conformal bound from a parametric one. Which transform is chosen by a
pre-registered simulation (docs/METHODS.md, "The Higher Risk bound with fewer
than 99 calibration BFH"; ``benchmarks/tail_bound.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sphr.errors import InputError

#: levels of the Normal and Lower Risk bounds
NORMAL_LEVEL = 0.95
LOWER_LEVEL = 0.99


@dataclass(frozen=True)
class Bound:
    value: float
    level: float
    n: int
    #: "conformal" (rank ceil((n + 1) level)) or the parametric fallback's name
    #: (:data:`TAIL_BOUNDS`)
    method: str

    def as_dict(self) -> dict:
        return {"value": self.value, "level": self.level, "n": self.n, "method": self.method}


def conformal_rank(n: int, level: float) -> int:
    """1-based rank of the split-conformal bound; > n means the bound is infinite."""
    return math.ceil((n + 1) * level - 1e-12)


#: the parametric fallbacks where the conformal rank exceeds n: the transform the prediction
#: bound is computed after. ``lognormal``: log(score - shift), the shift 5% of the range below
#: the smallest score (written for raw distances; on z centred at 0 the smallest score's log
#: lies far below the others); ``yeo_johnson``: Yeo-Johnson at its maximum-likelihood lambda
#: (any sign, no shift); ``normal``: none
TAIL_BOUNDS = ("lognormal", "yeo_johnson", "normal")
#: each fallback's name in a sentence
TAIL_NAMES = {"lognormal": "log-normal", "yeo_johnson": "Yeo-Johnson", "normal": "normal"}
#: what the report says of each fallback
TAIL_TEXT = {
    "lognormal": "a log-normal prediction bound (on standardized scores it is conservative: in "
                 "a simulation it left under 0.1% of healthy people above the 99% bound for "
                 "symmetric scores, so Higher Risk holds few people)",
    "yeo_johnson": "a normal prediction bound after a Yeo-Johnson transform (in a simulation "
                   "it left 0.6-2.3% of healthy people above the 99% bound, 1% meant)",
    "normal": "a normal prediction bound on the standardized score",
}
#: the fallback the risk stage uses: the pre-registered simulation passed none of the three
#: (docs/notes/SPHR_RISK.md, "The Higher Risk bound with fewer than 99 calibration BFH"), so
#: today's stays; on z it is conservative (0.3% of the demo's held-out BFH above the 99% bound)
TAIL_BOUND = "lognormal"


def upper_bound(scores: np.ndarray, level: float, tail: str = TAIL_BOUND) -> Bound:
    """One-sided upper bound at ``level`` from calibration scores (see module docstring):
    conformal where the rank fits in n, else the ``tail`` fallback of :data:`TAIL_BOUNDS`."""
    s = np.sort(np.asarray(scores, dtype=np.float64))
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    if tail not in TAIL_BOUNDS:
        raise ValueError(f"tail bound {tail!r}: choose one of {', '.join(TAIL_BOUNDS)}")
    if s.size < 3 or not np.isfinite(s).all():
        raise InputError(f"need at least 3 finite calibration scores, got {s.size}")
    k = conformal_rank(s.size, level)
    if k <= s.size:
        return Bound(float(s[k - 1]), level, int(s.size), "conformal")
    return Bound(tail_bound(s, level, tail), level, int(s.size), tail)


def prediction_bound(values: np.ndarray, level: float) -> float:
    """The one-sided normal prediction bound of one new value: mean + t(level, n - 1) SD
    sqrt(1 + 1/n)."""
    from scipy.stats import t as student_t

    n = values.size
    return float(values.mean() + student_t.ppf(level, n - 1) * values.std(ddof=1)
                 * math.sqrt(1 + 1 / n))


def tail_bound(scores: np.ndarray, level: float, tail: str) -> float:
    """The parametric bound ``tail`` (:data:`TAIL_BOUNDS`) of ``scores`` at ``level``."""
    s = np.asarray(scores, dtype=np.float64)
    if tail == "normal":
        return prediction_bound(s, level)
    if tail == "lognormal":
        shift = min(0.0, float(s.min())) - 1e-9 - 0.05 * float(np.ptp(s) or 1.0)
        return float(np.exp(prediction_bound(np.log(s - shift), level)) + shift)
    from scipy.stats import yeojohnson

    if np.ptp(s) == 0:  # one value: no spread to transform
        return float(s[0])
    transformed, lam = yeojohnson(s)
    return yeo_johnson_inverse(prediction_bound(np.asarray(transformed), level), float(lam))


def yeo_johnson_inverse(y: float, lam: float) -> float:
    """The value whose Yeo-Johnson transform at ``lam`` is ``y``; infinite where ``y`` lies
    beyond the transform's range (above -1 / lam for lam < 0, below 1 / (2 - lam) for
    lam > 2)."""
    # log1p / expm1: exact as lambda nears 0 (or 2), where the powers lose every digit
    tiny = np.spacing(1.0)  # scipy's own cut: nearer than this, lambda is 0 (or 2)
    if y >= 0:
        if abs(lam) < tiny:
            return math.expm1(y)
        return math.inf if lam * y <= -1 else math.expm1(math.log1p(lam * y) / lam)
    if abs(lam - 2) < tiny:
        return -math.expm1(-y)
    mu = 2 - lam
    return -math.inf if -mu * y <= -1 else -math.expm1(math.log1p(-mu * y) / mu)


def pooled_windows(counts: list[int], min_size: int) -> list[list[int]]:
    """For each age group index, the group indices whose members form its set: the group
    itself, then its neighbours, nearest first (the lower one first on a tie), until
    ``min_size`` members (the reference of a distance method and the age standardization
    of a score borrow alike)."""
    k = len(counts)
    out = []
    for i in range(k):
        chosen, radius = [i], 1
        while sum(counts[j] for j in chosen) < min_size and len(chosen) < k:
            for j in (i - radius, i + radius):
                if 0 <= j < k:
                    chosen.append(j)
            radius += 1
        out.append(sorted(chosen))
    return out


def calibrated_groups(score: np.ndarray, normal_bound: float, lower_bound: float) -> np.ndarray:
    """Normal at or below the 95% bound, Lower Risk up to the 99% bound, Higher Risk beyond.

    One-sided: a person closer to healthy than most healthy people is not at risk.
    """
    from sphr.risk.intervals import HIGHER_RISK, LOWER_RISK, NORMAL

    s = np.asarray(score, dtype=np.float64)
    if np.isnan(s).any():
        raise ValueError("a risk score is NaN")
    return np.where(s <= normal_bound, NORMAL,
                    np.where(s <= max(lower_bound, normal_bound), LOWER_RISK, HIGHER_RISK)
                    ).astype(object)


#: how a score is made comparable across ages before the calibrated bounds (docs/METHODS.md,
#: "Age standardization"): ``<source>_<form>``, source ``training`` (the training BFH) or
#: ``calibration`` (the calibration BFH, cross-fitted for the bounds), form ``groups`` (median
#: and IQR per age group), ``line`` (a location and a scale linear in age) or ``shift`` (a
#: location linear in age and one scale for every age)
#: each standardization's two parts, (source, form), stated rather than split from its name:
#: the five are the combinations that were built and measured (docs/METHODS.md), so one
#: setting with five named choices, not two settings whose product holds a sixth that is not
STANDARDIZATION_PARTS: dict[str, tuple[str, str]] = {
    "training_groups": ("training", "groups"), "calibration_groups": ("calibration", "groups"),
    "calibration_line": ("calibration", "line"), "training_line": ("training", "line"),
    "calibration_shift": ("calibration", "shift")}
STANDARDIZATIONS: tuple[str, ...] = tuple(STANDARDIZATION_PARTS)
#: the forms of :class:`AgeStandardizer`
FORMS = ("groups", "line", "shift")
#: what each standardization does, in the report's words (its definitions block)
STANDARDIZATION_TEXT: dict[str, str] = {
    "training_groups": "standardized per age group among the training BFH (median and IQR)",
    "calibration_groups": "standardized per age group among the calibration BFH (median and "
                          "IQR; the bounds from each calibration person's z under a "
                          "standardizer fitted without them)",
    "calibration_line": "standardized by a location and a scale linear in age, fitted on the "
                        "calibration BFH (the bounds from cross-fitted z)",
    "training_line": "standardized by a location and a scale linear in age, fitted on the "
                     "training BFH",
    "calibration_shift": "standardized by a location linear in age and one scale for every "
                         "age, fitted on the calibration BFH (the bounds from cross-fitted z)",
}
#: folds of the calibration BFH when they set the standardization too (module docstring)
CALIBRATION_FOLDS = 5
#: the standard deviation of a normal variable per unit of mean absolute deviation
_MAD_TO_SD = math.sqrt(math.pi / 2)


def _midpoint(name: str) -> float:
    lo, _, hi = str(name).partition("-")
    return (float(lo) + float(hi)) / 2


class AgeStandardizer:
    """The location and scale of a score among healthy people, by age, so one pooled
    calibration set serves every age (a few dozen calibration BFH per sex cannot give
    per-group percentiles): z = (s - location(age)) / scale(age).

    ``form="groups"``: median_g and IQR_g / 1.349 of the age group g, borrowing neighbouring
    groups until ``min_group_size`` members (nearest first); robust, because a score's tail
    is what the bound is about and must not move the centre. ``form="line"``: location
    a + b age by least squares and scale (c + d age) sqrt(pi / 2) from the absolute residuals
    on age (a normal's SD per mean absolute deviation), floored at a tenth of their mean: two
    lines over every age, so no group's few members set its own scale. ``form="shift"``: the
    same location line and one scale, the mean absolute residual x sqrt(pi / 2), so z is an
    affine function of the score and age (a Cox model of age + z ranks as age + the score
    does) and no scale line can cross zero. Which rows it is fitted on is the caller's choice
    (:func:`calibrate`).
    """

    def __init__(self, group_names: list[str], min_group_size: int = 30,
                 form: str = "groups") -> None:
        if form not in FORMS:
            raise ValueError(f"form must be one of {', '.join(FORMS)}, got {form!r}")
        self.group_names = list(group_names)
        self.min_group_size = min_group_size
        self.form = form
        self.center_: dict[str, float] = {}
        self.scale_: dict[str, float] = {}
        self.pooled_: dict[str, list[str]] = {}
        self.line_: list[float] = []

    def _ages(self, groups: np.ndarray, ages: np.ndarray | None) -> np.ndarray:
        """The ages given, or each group's midpoint where an age is missing."""
        mid = np.array([_midpoint(g) for g in groups], np.float64)
        if ages is None:
            return mid
        a = np.asarray(ages, np.float64)
        return np.where(np.isfinite(a), a, mid)

    def fit(self, scores: np.ndarray, groups: np.ndarray,
            ages: np.ndarray | None = None) -> AgeStandardizer:
        scores, groups = np.asarray(scores, np.float64), np.asarray(groups, object)
        if scores.size < 3:
            raise InputError(f"need at least 3 healthy people's scores, got {scores.size}")
        if self.form != "groups":
            return self._fit_line(scores, self._ages(groups, ages))
        counts = [int((groups == g).sum()) for g in self.group_names]
        windows = pooled_windows(counts, min(self.min_group_size, scores.size))
        for name, window in zip(self.group_names, windows, strict=True):
            members = [self.group_names[j] for j in window]
            s = scores[np.isin(groups, members)]
            q25, q50, q75 = np.percentile(s, (25, 50, 75))
            # a degenerate spread (all equal) falls back to the whole sample's
            spread = (q75 - q25) or float(np.subtract(*np.percentile(scores, (75, 25)))) or 1.0
            self.center_[name], self.scale_[name] = float(q50), float(spread / 1.349)
            self.pooled_[name] = members
        return self

    def _fit_line(self, scores: np.ndarray, ages: np.ndarray) -> AgeStandardizer:
        design = np.column_stack([np.ones_like(ages), ages])
        if np.ptp(ages) == 0:  # one age: a constant location and scale
            design = design[:, :1]
        loc = np.linalg.lstsq(design, scores, rcond=None)[0]
        resid = np.abs(scores - design @ loc)
        # "shift": one scale for every age, the intercept-only fit of the same residuals
        spread = np.linalg.lstsq(design if self.form == "line" else design[:, :1], resid,
                                 rcond=None)[0]
        loc, spread = np.resize(np.append(loc, 0.0), 2), np.resize(np.append(spread, 0.0), 2)
        self.line_ = [float(loc[0]), float(loc[1]), float(spread[0]), float(spread[1]),
                      float(max(resid.mean() / 10, 1e-12))]
        return self

    def location_scale(self, groups: np.ndarray, ages: np.ndarray | None = None
                       ) -> tuple[np.ndarray, np.ndarray]:
        """(location, scale) for each row's age group (``groups``) and age."""
        groups = np.asarray(groups, object)
        if self.form != "groups":
            a = self._ages(groups, ages)
            b0, b1, g0, g1, floor = self.line_
            return b0 + b1 * a, np.maximum(g0 + g1 * a, floor) * _MAD_TO_SD
        unknown = sorted(set(groups) - set(self.center_))
        if unknown:
            raise InputError(f"age groups {unknown} are not in the fitted standardizer",
                             field="age_group")
        return (np.array([self.center_[g] for g in groups], np.float64),
                np.array([self.scale_[g] for g in groups], np.float64))

    def transform(self, scores: np.ndarray, groups: np.ndarray,
                  ages: np.ndarray | None = None) -> np.ndarray:
        if not len(groups):
            return np.empty(0)
        c, s = self.location_scale(groups, ages)
        return (np.asarray(scores, np.float64) - c) / s

    def to_dict(self) -> dict:
        return {"min_group_size": self.min_group_size, "form": self.form,
                "center": self.center_, "scale": self.scale_, "pooled_groups": self.pooled_,
                "line": self.line_}

    @classmethod
    def from_dict(cls, data: dict, group_names: list[str]) -> AgeStandardizer:
        out = cls(group_names, data["min_group_size"], data.get("form", "groups"))
        out.center_, out.scale_ = dict(data["center"]), dict(data["scale"])
        out.pooled_ = dict(data.get("pooled_groups", {}))
        out.line_ = list(data.get("line", []))
        return out


@dataclass(frozen=True)
class Healthy:
    """A set of bona fide healthy people's scores, age groups and ages (NaN: age unknown)."""

    scores: np.ndarray
    groups: np.ndarray
    ages: np.ndarray | None = None

    def rows(self, mask: np.ndarray) -> Healthy:
        return Healthy(self.scores[mask], self.groups[mask],
                       None if self.ages is None else self.ages[mask])


def _crossfitted_z(make: AgeStandardizer, people: Healthy) -> np.ndarray:
    """Each calibration person's z from the standardizer fitted on the other folds (folds by
    position, so the same rows give the same folds): the bounds then rest on z's that no fit
    of theirs has seen."""
    n = people.scores.size
    fold = np.arange(n) % min(CALIBRATION_FOLDS, n)
    z = np.empty(n)
    for k in np.unique(fold):
        held = fold == k
        rest = people.rows(~held)
        part = AgeStandardizer(make.group_names, make.min_group_size, make.form).fit(
            rest.scores, rest.groups, rest.ages)
        z[held] = part.transform(people.scores[held], people.groups[held],
                                 None if people.ages is None else people.ages[held])
    return z


def calibrate(standardization: str, group_names: list[str], train: Healthy,
              calibration: Healthy, min_group_size: int = 30, tail: str = TAIL_BOUND
              ) -> tuple[AgeStandardizer, CalibratedBounds]:
    """The age standardizer and the calibrated bounds of one score (:data:`STANDARDIZATIONS`).

    Source ``training``: the standardizer is fitted on the training BFH and the bounds on the
    calibration BFH's z. Source ``calibration``: the standardizer new people are measured with
    is fitted on every calibration BFH, and the bounds on the calibration BFH's cross-fitted z
    (:func:`_crossfitted_z`), so no scale that a fit has seen sets the bounds' scale.
    ``tail``: the bounds' fallback where the calibration BFH are too few (:data:`TAIL_BOUNDS`)."""
    if standardization not in STANDARDIZATIONS:
        raise InputError(f"standardization {standardization!r}: choose from "
                         f"{', '.join(STANDARDIZATIONS)}", field="standardization")
    source, form = STANDARDIZATION_PARTS[standardization]
    if calibration.scores.size < 3:
        raise InputError(f"need at least 3 calibration BFH scores, got {calibration.scores.size}")
    fit_on = train if source == "training" else calibration
    std = AgeStandardizer(group_names, min_group_size, form).fit(
        fit_on.scores, fit_on.groups, fit_on.ages)
    z = (std.transform(calibration.scores, calibration.groups, calibration.ages)
         if source == "training" else _crossfitted_z(std, calibration))
    return std, CalibratedBounds.fit(z, tail)


@dataclass(frozen=True)
class CalibratedBounds:
    """The Normal and Lower Risk bounds on the age-standardized score z."""

    normal: Bound
    lower: Bound
    #: the fallback where the conformal rank exceeds n (:data:`TAIL_BOUNDS`); a re-fit of the
    #: bounds (re-anchoring) keeps it
    tail: str = TAIL_BOUND

    @classmethod
    def fit(cls, calibration_z: np.ndarray, tail: str = TAIL_BOUND) -> CalibratedBounds:
        return cls(upper_bound(calibration_z, NORMAL_LEVEL, tail),
                   upper_bound(calibration_z, LOWER_LEVEL, tail), tail)

    def groups(self, z: np.ndarray) -> np.ndarray:
        return calibrated_groups(z, self.normal.value, self.lower.value)

    def as_dict(self) -> dict:
        return {"normal": self.normal.as_dict(), "lower": self.lower.as_dict(),
                "tail": self.tail}

    @classmethod
    def from_dict(cls, data: dict) -> CalibratedBounds:
        return cls(Bound(**data["normal"]), Bound(**data["lower"]), data["tail"])
