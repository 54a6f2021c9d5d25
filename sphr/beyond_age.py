"""The beyond-age yardstick: what a score says about an outcome that age does not.

The risk groups promise "higher risk than healthy people *of your age and sex*", so a score is
judged by what it adds to age, never by its C-index alone (a score that drifts with age gains
or loses C through age, not through health). One implementation, used by every stage and
benchmark (docs/METHODS.md, "The beyond-age yardstick"):

* **dC** = C(age + score) - C(age): Harrell's C of the linear predictor of a Cox model on age
  and the score, minus that of a Cox model on age alone. Both models are **cross-fitted** on
  the rows evaluated (``folds`` folds stratified by event, seeded): each row's linear
  predictor comes from the models fitted on the other folds, so no row is scored by a fit that
  saw it, and C counts the pairs within a fold (a Cox predictor has no intercept, so two
  folds' predictors are on different scales). The interval is a paired participant
  bootstrap: both Cs on the same resamples.
* the **age-adjusted hazard ratio per SD** of the score (Cox on age and score / SD(score),
  Wald interval);
* **Spearman** of the score with age, among everyone and among the bona fide healthy (BFH):
  a score standardized for age should not track age among healthy people;
* **group ordering**: per risk group n, Kaplan-Meier risk by the horizon, and the
  age-adjusted hazard ratio of Lower and of Higher Risk against Normal. Groups are
  *ordered* when both ratios exceed 1 and Higher's is at least Lower's; a comparison needs
  >= 10 people and >= 5 events in each group it involves, otherwise it is "too few". Where
  only one of Lower / Higher has enough, the verdict rests on that one against Normal (said
  in ``basis``); where neither has, on everyone outside Normal pooled.

Imports no stage: only numpy, pandas, scipy and :mod:`sphr.survival`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from sphr.stats import spearman
from sphr.survival import (
    c_index_weighted,
    cox_efron,
    cox_wald,
    hazard_ratio,
    km_cumulative,
    percentile_interval,
    resample_counts,
)

__all__ = [
    "GROUP_MIN_EVENTS",
    "GROUP_MIN_N",
    "ORDERING_STATUSES",
    "BeyondAge",
    "beyond_age",
    "beyond_age_table",
    "crossfit_predictors",
    "group_ordering",
    "ordering_table",
    "paired_figures",
    "spearman",
]

#: the smallest group (people, events) any estimate is made from
GROUP_MIN_N, GROUP_MIN_EVENTS = 10, 5
#: the group-ordering verdicts
ORDERING_STATUSES = ("ordered", "not ordered", "too few")
NORMAL, LOWER, HIGHER = "Normal", "Lower Risk", "Higher Risk"


@dataclass(frozen=True)
class BeyondAge:
    """One score's gain over age on one set of rows (NaN where it cannot be estimated)."""

    n: int
    events: int
    c_age: float
    c_age_score: float
    dc: float
    dc_low: float
    dc_high: float
    hr_per_sd: float
    hr_low: float
    hr_high: float
    hr_p: float
    spearman_age: float
    spearman_age_bfh: float
    n_bfh: int

    def as_dict(self) -> dict[str, float | int]:
        return asdict(self)


def _folds(event: np.ndarray, folds: int, seed: int) -> np.ndarray:
    """A fold per row, drawn within events and non-events so every fold has events."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x0A6E]))
    fold = np.empty(event.size, int)
    for value in (False, True):
        idx = rng.permutation(np.flatnonzero(event == value))
        fold[idx] = np.arange(idx.size) % folds
    return fold


def _linear_predictor(frame: pd.DataFrame, fit_rows: np.ndarray, covariates: list[str]
                      ) -> np.ndarray | None:
    """The Cox model's linear predictor on every row of ``frame``, fitted on ``fit_rows``; a
    tiny ridge keeps a score collinear with age estimable (it then ranks as age does)."""
    fit_on = frame.loc[fit_rows]
    fit = cox_efron(fit_on["time"].to_numpy(float), fit_on["event"].to_numpy(bool),
                    fit_on[covariates].to_numpy(float), ridge=1e-6)
    if fit is None:
        return None
    return frame[covariates].to_numpy(float) @ fit[0]


def crossfit_predictors(time: np.ndarray, event: np.ndarray, age: np.ndarray,
                        score: np.ndarray, *, folds: int = 5, seed: int = 0,
                        cache: dict | None = None
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(age alone, age + score, fold): each row's Cox linear predictor from the models fitted
    on the other folds. The score is scaled to unit SD first (the fit's conditioning, not its
    ranking). NaN rows where a fold's fit fails. A Cox linear predictor has no intercept, so
    predictors of different folds are not on one scale: compare them within a fold only.
    ``cache``: a dict kept across calls on the same rows (several scores), so the age-alone
    models are fitted once."""
    s = np.asarray(score, float)
    sd = s.std() or 1.0
    frame = pd.DataFrame({"time": np.asarray(time, float), "event": np.asarray(event, int),
                          "age": np.asarray(age, float), "score": (s - s.mean()) / sd})
    e = frame["event"].to_numpy(bool)
    fold = _folds(e, max(2, min(folds, int(e.sum()))), seed)
    key = (*(frame[c].to_numpy().tobytes() for c in ("time", "event", "age")), folds, seed)
    cached = (cache or {}).get(key)
    lp_age = np.full(len(frame), np.nan) if cached is None else cached
    lp_both = np.full(len(frame), np.nan)
    for k in np.unique(fold):
        held, fit_rows = fold == k, fold != k
        for out, cov in ((lp_age, ["age"]), (lp_both, ["age", "score"])):
            if out is lp_age and cached is not None:
                continue
            lp = _linear_predictor(frame, fit_rows, cov)
            if lp is not None:
                out[held] = lp[held]
    if cache is not None:
        cache[key] = lp_age
    return lp_age, lp_both, fold


def _hr_per_sd(t: np.ndarray, e: np.ndarray, age: np.ndarray, s: np.ndarray
               ) -> tuple[float, float, float, float]:
    sd = s.std()
    if not sd > 0:
        return (np.nan,) * 4
    return cox_wald(t, e, {"age": age, "score": (s - s.mean()) / sd})["score"]


def beyond_age(time: np.ndarray, event: np.ndarray, age: np.ndarray, score: np.ndarray, *,
               bfh: np.ndarray | None = None, folds: int = 5, n_bootstrap: int = 1000,
               seed: int = 0, resamples: np.ndarray | None = None, cache: dict | None = None
               ) -> tuple[BeyondAge, np.ndarray]:
    """The yardstick of one score on the rows given (rows without a finite score or age are
    left out): (figures, bootstrap draws of dC). ``resamples``: multiplicities (B, n) over the
    rows given, to pair draws across scores (default: ``n_bootstrap`` drawn from ``seed``);
    ``cache``: see :func:`crossfit_predictors`."""
    t, e = np.asarray(time, float), np.asarray(event, bool)
    a, s = np.asarray(age, float), np.asarray(score, float)
    b = np.zeros(t.size, bool) if bfh is None else np.asarray(bfh, bool)
    ok = np.isfinite(s) & np.isfinite(a) & np.isfinite(t)
    if resamples is None:
        resamples = resample_counts(np.random.default_rng([seed, 1]), t.size, n_bootstrap)
    n, ev = int(ok.sum()), int(e[ok].sum())
    nan = float("nan")
    rho_bfh = spearman(s[ok & b], a[ok & b])
    if n < GROUP_MIN_N or ev < GROUP_MIN_EVENTS:
        return BeyondAge(n, ev, nan, nan, nan, nan, nan, nan, nan, nan, nan,
                         spearman(s[ok], a[ok]), rho_bfh, int((ok & b).sum())), \
            np.full(len(resamples), np.nan)
    t, e, a, s = t[ok], e[ok], a[ok], s[ok]
    lp_age, lp_both, fold = crossfit_predictors(t, e, a, s, folds=folds, seed=seed,
                                                cache=cache)
    fine = np.isfinite(lp_age) & np.isfinite(lp_both)
    w = np.vstack([np.ones(n), resamples[:, ok]])[:, fine]
    # pairs within a fold: each fold's predictors come from one fit
    c_age = c_index_weighted(t[fine], e[fine], lp_age[fine], w, strata=fold[fine])
    c_both = c_index_weighted(t[fine], e[fine], lp_both[fine], w, strata=fold[fine])
    draws = c_both[1:] - c_age[1:]
    lo, hi = percentile_interval(draws)
    hr = _hr_per_sd(t, e, a, s)
    return BeyondAge(n, ev, float(c_age[0]), float(c_both[0]), float(c_both[0] - c_age[0]),
                     lo, hi, *hr, spearman(s, a), rho_bfh, int((ok & b).sum())), draws


def beyond_age_table(frame: pd.DataFrame, scores: list[str], *, time: str = "time_years",
                     event: str = "event", age: str = "age", bfh: str | None = None,
                     by: str | None = "sex", folds: int = 5, n_bootstrap: int = 1000,
                     seed: int = 0) -> tuple[pd.DataFrame, dict]:
    """:func:`beyond_age` of every score in ``scores`` (columns of ``frame``) per level of
    ``by``: a tidy table (``by``, score, the :class:`BeyondAge` fields) and the dC draws keyed
    (level, score), paired across scores (one stream of resamples per level)."""
    rows, draws = [], {}
    levels = sorted(frame[by].unique()) if by else [None]
    for k, level in enumerate(levels):
        sub = frame if level is None else frame.loc[frame[by] == level]
        counts = resample_counts(np.random.default_rng([seed, k]), len(sub), n_bootstrap)
        figures = paired_figures(sub[time], sub[event], sub[age], {n: sub[n] for n in scores},
                                 bfh=None if bfh is None else sub[bfh], resamples=counts,
                                 folds=folds, seed=seed)
        for name, (fig, d) in figures.items():
            rows.append({**({by: level} if by else {}), "score": name, **fig.as_dict()})
            draws[(level, name)] = d
    return pd.DataFrame(rows), draws


def paired_figures(time: np.ndarray, event: np.ndarray, age: np.ndarray,
                   scores: Mapping[str, np.ndarray], *, resamples: np.ndarray,
                   bfh: np.ndarray | None = None, folds: int = 5, seed: int = 0
                   ) -> dict[str, tuple[BeyondAge, np.ndarray]]:
    """:func:`beyond_age` of several scores of the same people on the same ``resamples``
    (paired draws), the age-alone models fitted once for them all."""
    cache: dict = {}
    return {name: beyond_age(time, event, age, s, bfh=bfh, folds=folds, seed=seed,
                             resamples=resamples, cache=cache) for name, s in scores.items()}


def _group_row(t: np.ndarray, e: np.ndarray, age: np.ndarray, group: np.ndarray, name: str,
               horizon: float) -> dict:
    m = group == name
    return {"group": name, "n": int(m.sum()), "events": int(e[m].sum()),
            "mean_age": float(age[m].mean()) if m.any() else np.nan,
            "risk": km_cumulative(t[m], e[m], horizon) if m.any() else np.nan}


def _enough(row: dict) -> bool:
    return row["n"] >= GROUP_MIN_N and row["events"] >= GROUP_MIN_EVENTS


def _hr_against_normal(t, e, age, member: np.ndarray, normal: np.ndarray) -> tuple:
    both = member | normal
    return hazard_ratio(t[both], e[both], member[both].astype(float), age[both])


def age_standardized_risks(time: np.ndarray, event: np.ndarray, age: np.ndarray,
                           group: np.ndarray, names: list[str], horizon: float
                           ) -> dict[str, float]:
    """Each of ``names``' risk by ``horizon`` had everyone of the frame (all groups, their
    own ages) been in that group: marginal standardization over one Cox model of age and the
    groups (Breslow baseline), fitted on the members of ``names``. The crude Kaplan-Meier
    risk of a group mixes its risk with its ages (Lower Risk may be younger than Normal); the
    standardized risks compare the groups at the same ages, so they point the same way as the
    age-adjusted hazard ratios. NaN where the model cannot be fitted or follow-up ends before
    ``horizon``."""
    t, e, a, g = (np.asarray(time, float), np.asarray(event, bool),
                  np.asarray(age, float), np.asarray(group, object))
    nan = {n: float("nan") for n in names}
    fit_rows = np.isin(g, names) & np.isfinite(a)
    if len(names) < 1 or not e[fit_rows].any() or t[fit_rows].max() < horizon:
        return nan
    dummies = np.column_stack([g[fit_rows] == n for n in names[1:]]).astype(float) \
        if len(names) > 1 else np.empty((int(fit_rows.sum()), 0))
    X = np.column_stack([a[fit_rows], dummies])
    fitted = cox_efron(t[fit_rows], e[fit_rows], X)
    if fitted is None or not np.all(np.isfinite(fitted[0])):
        return nan
    beta = fitted[0]
    tf, ef, lp_fit = t[fit_rows], e[fit_rows], X @ beta
    shift = lp_fit.max()  # conditioning: exp of the largest linear predictor is 1
    risk = np.exp(lp_fit - shift)
    event_times = np.unique(tf[ef & (tf <= horizon)])
    # Breslow: H0(h) = sum over event times of d_j / sum over the risk set of exp(x beta)
    at_risk = np.array([risk[tf >= u].sum() for u in event_times])
    deaths = np.array([np.sum(ef & (tf == u)) for u in event_times])
    h0 = float(np.sum(deaths / at_risk)) * np.exp(-shift)
    everyone = a[np.isfinite(a)]
    out = {}
    for j, name in enumerate(names):
        lp = beta[0] * everyone + (beta[j] if j else 0.0)
        out[name] = float(np.mean(1.0 - np.exp(-h0 * np.exp(lp))))
    return out


def group_ordering(time: np.ndarray, event: np.ndarray, age: np.ndarray, group: np.ndarray,
                   *, horizon: float = 10.0) -> tuple[pd.DataFrame, dict]:
    """Per group (Normal, Lower Risk, Higher Risk, outside Normal): n, events, mean age, the
    Kaplan-Meier risk by ``horizon`` and the age-adjusted hazard ratio against Normal (NaN
    where a group is too small, module docstring); and the verdict ``{"status", "basis"}``."""
    t, e = np.asarray(time, float), np.asarray(event, bool)
    a, g = np.asarray(age, float), np.asarray(group, object)
    outside = np.where(g == NORMAL, NORMAL, "outside Normal")
    rows = [_group_row(t, e, a, g, name, horizon) for name in (NORMAL, LOWER, HIGHER)]
    rows.append(_group_row(t, e, a, outside, "outside Normal", horizon))
    normal = g == NORMAL
    for row in rows[1:]:
        member = (g != NORMAL) if row["group"] == "outside Normal" else g == row["group"]
        hr = (_hr_against_normal(t, e, a, member, normal) if _enough(row) and _enough(rows[0])
              else (np.nan,) * 4)
        row.update(hr=hr[0], hr_low=hr[1], hr_high=hr[2], hr_p=hr[3])
    rows[0].update(hr=1.0, hr_low=np.nan, hr_high=np.nan, hr_p=np.nan)
    shown = [r["group"] for r in rows[:3] if _enough(r)]
    std = (age_standardized_risks(t, e, a, g, shown, horizon) if NORMAL in shown[:1]
           else {})
    for row in rows:
        row["risk_age_standardized"] = std.get(row["group"], np.nan)
    table = pd.DataFrame(rows)
    return table, _ordering_verdict(table)


def _ordering_verdict(table: pd.DataFrame) -> dict:
    by = table.set_index("group")
    lower, higher = by.loc[LOWER, "hr"], by.loc[HIGHER, "hr"]
    if np.isfinite(lower) and np.isfinite(higher):
        ok = lower > 1 and higher > 1 and higher >= lower
        return {"status": ORDERING_STATUSES[0 if ok else 1], "basis": "Lower and Higher Risk"}
    for name, hr in ((HIGHER, higher), (LOWER, lower), ("outside Normal",
                                                        by.loc["outside Normal", "hr"])):
        if np.isfinite(hr):
            return {"status": ORDERING_STATUSES[0 if hr > 1 else 1], "basis": name}
    return {"status": "too few", "basis": "none"}


def ordering_table(frame: pd.DataFrame, *, keys: list[str], time: str = "time_years",
                   event: str = "event", age: str = "age", group: str = "group",
                   horizon: float = 10.0) -> pd.DataFrame:
    """:func:`group_ordering` per combination of ``keys`` (e.g. sex, method, outcome): the
    group rows with the keys, the verdict's ``status`` and ``basis`` on every row."""
    parts = []
    for values, sub in frame.groupby(keys, sort=True):
        values = values if isinstance(values, tuple) else (values,)
        table, verdict = group_ordering(sub[time], sub[event], sub[age], sub[group],
                                        horizon=horizon)
        parts.append(table.assign(**dict(zip(keys, values, strict=True)), **verdict))
    if not parts:
        return pd.DataFrame(columns=[*keys, "group", "n", "events", "mean_age", "risk",
                                     "risk_age_standardized", "hr",
                                     "hr_low", "hr_high", "hr_p", "status", "basis"])
    out = pd.concat(parts, ignore_index=True)
    return out[[*keys, *[c for c in out.columns if c not in keys]]]
