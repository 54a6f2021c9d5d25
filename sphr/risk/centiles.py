"""Healthy-reference centiles: where a person's score lies among healthy people of the same
sex and age, continuously in age (docs/METHODS.md, "Healthy-reference centiles").

Normative modelling's way (Cole's LMS, GAMLSS, brain charts), calibrated the way conformal
methods are. Among the bona fide healthy people whose scores no fit has seen:

1. **Location and scale in age.** m(age) by least squares on a natural (restricted) cubic
   spline in age, knots at Harrell's quantiles, so linear beyond the outer knots (an age
   outside the reference's is extrapolated on a line, not a cubic); s(age) the same basis
   fitted to the absolute residuals, times sqrt(pi / 2) (a normal's SD per mean absolute
   deviation), floored at a tenth of their mean so it never reaches 0. Fewer ages or people
   than the spline needs: fewer knots, a line, a constant (``form_used_`` says which).
2. **Shape.** The residuals r = (score - m(age)) / s(age), Yeo-Johnson at its
   maximum-likelihood lambda, standardized: z, a normal score comparable across ages.
3. **p**, the share of healthy people of that sex and age farther out. ``conformal``:
   (1 + #{r_i >= r}) / (n + 1) over the reference's own residuals; for a new healthy person
   exchangeable with them, P(p <= a) <= a (Vovk et al. 2005), but no p is below 1 / (n + 1),
   so with fewer than 99 healthy people no one can be beyond the 99% centile. ``parametric``:
   1 - Phi(z), defined however few people, exact only if the shape fits. ``hybrid`` (the
   default): conformal up to the :data:`HYBRID_TAIL` largest reference residuals, where five
   points still pin the empirical tail; beyond them the normal tail of z, scaled to meet the
   conformal p there, so p is continuous and falls with the score. The parametric part is
   approximate: the pre-registered rule judges it by the share of new healthy people beyond
   each bound.

Groups: Normal at or below the 95% bound, Lower Risk up to the 99% bound, Higher Risk
beyond (``bound``): the score at which p reaches 5% and 1% at the person's age.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import stats
from sklearn.base import BaseEstimator

from sphr.errors import ConfigError, InputError
from sphr.risk.calibration import LOWER_LEVEL, NORMAL_LEVEL, conformal_rank, yeo_johnson_inverse

#: the forms of the location and scale in age
CENTILE_FORMS: tuple[str, ...] = ("spline", "line")
#: how p is read off the healthy people's residuals (module docstring)
TAIL_METHODS: tuple[str, ...] = ("conformal", "parametric", "hybrid")
#: the largest reference residuals beyond which ``hybrid`` takes the normal tail
HYBRID_TAIL = 5
#: Harrell's knot quantiles of a restricted cubic spline (Regression Modeling Strategies, 2.4.6)
KNOT_QUANTILES: dict[int, tuple[float, ...]] = {3: (0.10, 0.50, 0.90),
                                                4: (0.05, 0.35, 0.65, 0.95),
                                                5: (0.05, 0.275, 0.50, 0.725, 0.95)}
#: fewest people per coefficient of the location and the scale
PEOPLE_PER_COEFFICIENT = 10
_MAD_TO_SD = math.sqrt(math.pi / 2)


def spline_basis(ages: np.ndarray, knots: np.ndarray) -> np.ndarray:
    """[1, age, the k - 2 restricted cubic terms] (Harrell's parametrisation, scaled by the
    outer knots' span squared so the columns are of the order of age); [1, age] for two knots
    or fewer, [1] with none."""
    a = np.asarray(ages, np.float64)
    if knots.size == 0:
        return np.ones((a.size, 1))
    cols = [np.ones_like(a), a]
    if knots.size >= 3:
        t, k = knots, knots.size
        span = (t[-1] - t[0]) ** 2

        def cube(x: np.ndarray) -> np.ndarray:
            return np.maximum(x, 0.0) ** 3

        last = t[k - 1] - t[k - 2]
        for j in range(k - 2):
            cols.append((cube(a - t[j]) - cube(a - t[k - 2]) * (t[k - 1] - t[j]) / last
                         + cube(a - t[k - 1]) * (t[k - 2] - t[j]) / last) / span)
    return np.column_stack(cols)


def _knots(ages: np.ndarray, form: str, knots: int) -> tuple[np.ndarray, str]:
    """(knots, the form used): as many knots as the distinct ages and people allow."""
    distinct = np.unique(ages).size
    if form == "spline":
        for k in range(min(knots, max(KNOT_QUANTILES)), 2, -1):
            t = np.unique(np.quantile(ages, KNOT_QUANTILES.get(k, KNOT_QUANTILES[5])))
            if t.size == k and distinct > k and ages.size >= PEOPLE_PER_COEFFICIENT * k:
                return t, f"spline ({k} knots)"
    if distinct >= 2 and ages.size >= PEOPLE_PER_COEFFICIENT * 2:
        return np.array([ages.min(), ages.max()]), "line"
    return np.empty(0), "constant"


def _check(scores: Any, ages: Any) -> tuple[np.ndarray, np.ndarray]:
    s, a = np.asarray(scores, np.float64).ravel(), np.asarray(ages, np.float64).ravel()
    if s.shape != a.shape:
        raise InputError(f"{s.size} scores but {a.size} ages")
    bad = ~(np.isfinite(s) & np.isfinite(a))
    if bad.any():
        raise InputError(f"{int(bad.sum())} of {s.size} people have no finite score or age")
    return s, a


class HealthyCentiles(BaseEstimator):
    """Healthy-reference centiles of one score and sex (module docstring). Parameters: the
    ``form`` of location and scale in age (:data:`CENTILE_FORMS`), the spline's ``knots``,
    the ``tail`` (:data:`TAIL_METHODS`), ``folds`` for ``crossfitted_p_`` (0: none) and
    ``random_state``. Fitted: ``n_``, ``knots_``, ``form_used_``, ``location_coef_``,
    ``scale_coef_``, ``scale_floor_``, ``lambda_``, ``z_mean_``, ``z_sd_``, ``reference_``
    (the sorted residuals) and ``crossfitted_p_`` (each fitting person's p from the model
    fitted without their fold; empty with ``folds=0``)."""

    def __init__(self, form: str = "spline", knots: int = 4, tail: str = "hybrid",
                 folds: int = 0, random_state: int = 0) -> None:
        self.form, self.knots, self.tail = form, knots, tail
        self.folds, self.random_state = folds, random_state

    def _check_params(self) -> None:
        for name, value, allowed in (("form", self.form, CENTILE_FORMS),
                                     ("tail", self.tail, TAIL_METHODS)):
            if value not in allowed:
                raise ConfigError(f"centile {name} {value!r}: choose from {', '.join(allowed)}")
        if self.knots < 3 and self.form == "spline":
            raise ConfigError(f"a spline needs at least 3 knots, got {self.knots}")

    def fit(self, scores: Any, ages: Any, folds: np.ndarray | None = None) -> HealthyCentiles:
        """Fit on healthy people's out-of-sample scores and ages; ``folds``: each person's
        fold for ``crossfitted_p_`` (default: ``self.folds`` folds dealt in age order)."""
        self._check_params()
        s, a = _check(scores, ages)
        if s.size < 3:
            raise InputError(f"need at least 3 healthy people's scores, got {s.size}")
        self._fit_model(s, a)
        self.crossfitted_p_ = self._crossfitted(s, a, folds)
        return self

    def _fit_model(self, s: np.ndarray, a: np.ndarray) -> None:
        self.n_ = int(s.size)
        self.knots_, self.form_used_ = _knots(a, self.form, self.knots)
        B = spline_basis(a, self.knots_)
        self.location_coef_ = np.linalg.lstsq(B, s, rcond=None)[0]
        absres = np.abs(s - B @ self.location_coef_)
        self.scale_coef_ = np.linalg.lstsq(B, absres, rcond=None)[0]
        self.scale_floor_ = float(max(absres.mean() / 10, 1e-12))
        r = self.residual(s, a)
        self.reference_ = np.sort(r)
        if np.ptp(r) > 0:
            self.lambda_ = float(stats.yeojohnson_normmax(r))
        else:
            self.lambda_ = 1.0
        t = stats.yeojohnson(r, self.lambda_)
        self.z_mean_, self.z_sd_ = float(t.mean()), float(t.std(ddof=1) or 1.0)

    def _crossfitted(self, s: np.ndarray, a: np.ndarray, folds: np.ndarray | None
                     ) -> np.ndarray:
        if folds is None:
            if self.folds < 2:
                return np.empty(0)
            # dealt in age order from a seeded start: every fold spans every age
            rng = np.random.default_rng(np.random.SeedSequence([self.random_state, 7]))
            order = np.argsort(a + rng.uniform(0, 1e-6, a.size), kind="stable")
            folds = np.empty(a.size, np.int64)
            folds[order] = (np.arange(a.size) + rng.integers(self.folds)) % self.folds
        folds = np.asarray(folds, np.int64)
        p = np.full(s.size, np.nan)
        for k in np.unique(folds):
            held = folds == k
            if (~held).sum() < 3:
                continue
            other = HealthyCentiles(self.form, self.knots, self.tail, 0, self.random_state)
            p[held] = other.fit(s[~held], a[~held]).p_healthy(s[held], a[held])
        return p

    # ------------------------------------------------------------------ reading a score

    def location_scale(self, ages: Any) -> tuple[np.ndarray, np.ndarray]:
        """(m(age), s(age)) of every age given."""
        B = spline_basis(np.asarray(ages, np.float64).ravel(), np.asarray(self.knots_))
        scale = np.maximum(B @ self.scale_coef_, self.scale_floor_) * _MAD_TO_SD
        return B @ self.location_coef_, scale

    def residual(self, scores: Any, ages: Any) -> np.ndarray:
        m, sd = self.location_scale(ages)
        return (np.asarray(scores, np.float64).ravel() - m) / sd

    def _z_of_residual(self, r: np.ndarray) -> np.ndarray:
        return (stats.yeojohnson(np.asarray(r, np.float64), self.lambda_) - self.z_mean_) \
            / self.z_sd_

    def z(self, scores: Any, ages: Any) -> np.ndarray:
        """The standardized score: a normal score among healthy people of every age."""
        return self._z_of_residual(self.residual(scores, ages))

    def _p_of_residual(self, r: np.ndarray) -> np.ndarray:
        ref, n = np.asarray(self.reference_), self.n_
        conformal = (1 + n - np.searchsorted(ref, r, side="left")) / (n + 1)
        if self.tail == "conformal":
            return conformal
        tail = stats.norm.sf(self._z_of_residual(r))
        if self.tail == "parametric":
            return np.clip(tail, np.finfo(float).tiny, 1.0)
        join = ref[max(n - HYBRID_TAIL, 0)]
        p_join = (1 + n - np.searchsorted(ref, join, side="left")) / (n + 1)
        scaled = p_join * tail / max(float(stats.norm.sf(self._z_of_residual(np.array([join]))[0])),
                                     np.finfo(float).tiny)
        return np.where(r > join, np.clip(scaled, np.finfo(float).tiny, p_join), conformal)

    def p_healthy(self, scores: Any, ages: Any) -> np.ndarray:
        """The share of healthy people of the same sex and age farther out, in (0, 1]."""
        s, a = _check(scores, ages)
        return self._p_of_residual(self.residual(s, a))

    def centile(self, scores: Any, ages: Any) -> np.ndarray:
        """100 (1 - p): "farther from healthy than this many of 100 healthy people"."""
        return 100.0 * (1.0 - self.p_healthy(scores, ages))

    def _residual_bound(self, level: float) -> float:
        """The residual at which p reaches 1 - ``level`` (inf: none can be beyond)."""
        ref, n = np.asarray(self.reference_), self.n_
        rank = conformal_rank(n, level)
        if self.tail == "conformal":
            return float(ref[rank - 1]) if rank <= n else math.inf
        join_index = max(n - HYBRID_TAIL, 0)
        if self.tail == "hybrid" and rank - 1 <= join_index:
            return float(ref[rank - 1])
        target = 1.0 - level
        if self.tail == "hybrid":
            join = ref[join_index]
            p_join = (1 + n - np.searchsorted(ref, join, side="left")) / (n + 1)
            target *= float(stats.norm.sf(self._z_of_residual(np.array([join]))[0])) / p_join
        z = float(stats.norm.isf(min(target, 1.0)))
        return yeo_johnson_inverse(z * self.z_sd_ + self.z_mean_, self.lambda_)

    def bound(self, ages: Any, level: float) -> np.ndarray:
        """The score of the ``level`` centile at each age (0.95: Normal's upper end)."""
        m, sd = self.location_scale(ages)
        return m + sd * self._residual_bound(level)

    def groups(self, scores: Any, ages: Any) -> np.ndarray:
        """Normal / Lower Risk / Higher Risk from the 95% and 99% bounds at each age."""
        from sphr.risk.intervals import HIGHER_RISK, LOWER_RISK, NORMAL

        s, a = _check(scores, ages)
        r = self.residual(s, a)
        normal, lower = self._residual_bound(NORMAL_LEVEL), self._residual_bound(LOWER_LEVEL)
        return np.where(r <= normal, NORMAL,
                        np.where(r <= max(lower, normal), LOWER_RISK, HIGHER_RISK)).astype(object)

    # ------------------------------------------------------------------ persistence

    def to_dict(self) -> dict[str, Any]:
        """Everything scoring needs, JSON-ready (no person's age; the residuals are needed for
        the conformal p, rounded to 6 digits)."""
        return {"form": self.form, "knots": self.knots, "tail": self.tail,
                "folds": self.folds, "random_state": self.random_state, "n": self.n_,
                "form_used": self.form_used_, "knot_ages": np.asarray(self.knots_).tolist(),
                "location_coef": np.asarray(self.location_coef_).tolist(),
                "scale_coef": np.asarray(self.scale_coef_).tolist(),
                "scale_floor": self.scale_floor_, "lambda": self.lambda_,
                "z_mean": self.z_mean_, "z_sd": self.z_sd_,
                "reference": np.round(self.reference_, 6).tolist()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HealthyCentiles:
        out = cls(data["form"], data["knots"], data["tail"], data["folds"],
                  data["random_state"])
        out._check_params()
        out.n_, out.form_used_ = int(data["n"]), data["form_used"]
        out.knots_ = np.asarray(data["knot_ages"], np.float64)
        out.location_coef_ = np.asarray(data["location_coef"], np.float64)
        out.scale_coef_ = np.asarray(data["scale_coef"], np.float64)
        out.scale_floor_, out.lambda_ = float(data["scale_floor"]), float(data["lambda"])
        out.z_mean_, out.z_sd_ = float(data["z_mean"]), float(data["z_sd"])
        out.reference_ = np.asarray(data["reference"], np.float64)
        out.crossfitted_p_ = np.empty(0)
        return out


def calibration_error(p: np.ndarray, levels: tuple[float, ...] = (0.05, 0.01)
                      ) -> dict[str, dict[str, float | int | list[float]]]:
    """For new healthy people's p: per level, the share with p <= level, n and the central
    binomial 95% range of that share under exact calibration (the yardstick of a bound)."""
    p = np.asarray(p, np.float64)
    p = p[np.isfinite(p)]
    out = {}
    for level in levels:
        lo, hi = (stats.binom.ppf((0.025, 0.975), p.size, level) / p.size if p.size
                  else (math.nan, math.nan))
        out[f"{level:g}"] = {"share": float((p <= level).mean()) if p.size else math.nan,
                             "n": int(p.size), "range": [float(lo), float(hi)]}
    return out
