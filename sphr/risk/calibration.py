"""Out-of-sample thresholds: one-sided split-conformal bounds on calibration scores.

A score s (a health distance, PhenoAge acceleration, a predicted risk; larger
is worse) is fitted on training rows; the *calibration* rows, which no fit has
seen, give the bound. For n exchangeable calibration scores the split-conformal
upper bound at level q is the ceil((n + 1) q)-th smallest score: a new person
from the same population falls at or below it with probability >= q
(docs/METHODS.md, "Calibrated risk groups").

With few calibration people that rank can exceed n (n < q / (1 - q): 19 for
95%, 99 for 99%), and the conformal bound is infinite. **Decision**: then the
bound is the one-sided normal prediction bound of log(score - shift) (a
log-normal tail, Student t quantile, widened by sqrt(1 + 1/n)), and the method
used is recorded, so a reader can tell an exact conformal bound from a
parametric one.
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
    #: "conformal" (rank ceil((n + 1) level)) or "lognormal" (parametric fallback)
    method: str

    def as_dict(self) -> dict:
        return {"value": self.value, "level": self.level, "n": self.n, "method": self.method}


def conformal_rank(n: int, level: float) -> int:
    """1-based rank of the split-conformal bound; > n means the bound is infinite."""
    return math.ceil((n + 1) * level - 1e-12)


def upper_bound(scores: np.ndarray, level: float) -> Bound:
    """One-sided upper bound at ``level`` from calibration scores (see module docstring)."""
    from scipy.stats import t as student_t

    s = np.sort(np.asarray(scores, dtype=np.float64))
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    if s.size < 3 or not np.isfinite(s).all():
        raise InputError(f"need at least 3 finite calibration scores, got {s.size}")
    k = conformal_rank(s.size, level)
    if k <= s.size:
        return Bound(float(s[k - 1]), level, int(s.size), "conformal")
    # shift so that the log is defined for scores that may be <= 0 (accelerations)
    shift = min(0.0, float(s[0])) - 1e-9 - 0.05 * float(np.ptp(s) or 1.0)
    logs = np.log(s - shift)
    n = s.size
    bound = logs.mean() + student_t.ppf(level, n - 1) * logs.std(ddof=1) * math.sqrt(1 + 1 / n)
    return Bound(float(np.exp(bound) + shift), level, int(n), "lognormal")


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


class AgeStandardizer:
    """Per age group location and scale of a score among the training BFH, so one pooled
    calibration set serves every age group (a few dozen calibration BFH per sex cannot give
    per-group percentiles).

    **Decision**: z = (s - median_g) / (IQR_g / 1.349), median and IQR of the *training*
    real BFH scores of age group g, borrowing neighbouring groups until ``min_group_size``
    members (nearest first). These are fits, so they come from training rows; the
    calibration rows only set the bounds on z. Robust statistics because a score's tail is
    what the bound is about and must not move the centre.
    """

    def __init__(self, group_names: list[str], min_group_size: int = 30) -> None:
        self.group_names = list(group_names)
        self.min_group_size = min_group_size
        self.center_: dict[str, float] = {}
        self.scale_: dict[str, float] = {}
        self.pooled_: dict[str, list[str]] = {}

    def fit(self, scores: np.ndarray, groups: np.ndarray) -> AgeStandardizer:
        scores, groups = np.asarray(scores, np.float64), np.asarray(groups, object)
        if scores.size < 3:
            raise InputError(f"need at least 3 training BFH scores, got {scores.size}")
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

    def transform(self, scores: np.ndarray, groups: np.ndarray) -> np.ndarray:
        groups = np.asarray(groups, object)
        unknown = sorted(set(groups) - set(self.center_))
        if unknown:
            raise InputError(f"age groups {unknown} are not in the fitted standardizer",
                             field="age_group")
        c = np.array([self.center_[g] for g in groups], np.float64)
        s = np.array([self.scale_[g] for g in groups], np.float64)
        return (np.asarray(scores, np.float64) - c) / s if len(groups) else np.empty(0)

    def to_dict(self) -> dict:
        return {"min_group_size": self.min_group_size, "center": self.center_,
                "scale": self.scale_, "pooled_groups": self.pooled_}

    @classmethod
    def from_dict(cls, data: dict, group_names: list[str]) -> AgeStandardizer:
        out = cls(group_names, data["min_group_size"])
        out.center_, out.scale_ = dict(data["center"]), dict(data["scale"])
        out.pooled_ = dict(data.get("pooled_groups", {}))
        return out


@dataclass(frozen=True)
class CalibratedBounds:
    """The Normal and Lower Risk bounds on the age-standardized score z."""

    normal: Bound
    lower: Bound

    @classmethod
    def fit(cls, calibration_z: np.ndarray) -> CalibratedBounds:
        return cls(upper_bound(calibration_z, NORMAL_LEVEL),
                   upper_bound(calibration_z, LOWER_LEVEL))

    def groups(self, z: np.ndarray) -> np.ndarray:
        return calibrated_groups(z, self.normal.value, self.lower.value)

    def as_dict(self) -> dict:
        return {"normal": self.normal.as_dict(), "lower": self.lower.as_dict()}

    @classmethod
    def from_dict(cls, data: dict) -> CalibratedBounds:
        return cls(Bound(**data["normal"]), Bound(**data["lower"]))
