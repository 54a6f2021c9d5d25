"""Survival statistics, one implementation each, for every stage.

Shared: imports no stage, so the ingest report, the risk stage and the NHANES adapter use the
same estimators. Times are in any unit; ``event`` is boolean (True: the event, False:
censored); a score is larger = worse (an earlier event expected).

* **Kaplan-Meier** 1 - S(t) with the exponential Greenwood ("log-log") 95% interval, the
  estimate and interval of lifelines' ``KaplanMeierFitter`` (tested): :func:`kaplan_meier` at a
  grid, :func:`km_curve` at the event times (a curve to draw), :func:`km_cumulative` at one
  horizon. Numpy rather than the fitter, whose fixed cost is most of the time of a few hundred
  small fits.
* **Cumulative incidence** with a competing risk: Aalen-Johansen (lifelines'
  ``AalenJohansenFitter``), or Kaplan-Meier without one (:func:`cumulative_incidence`).
* The **censoring distribution** G as a weighted Kaplan-Meier, for each row of resample
  multiplicities at once (:class:`CensoringKM`).
* **Harrell's C**: :func:`c_index` (lifelines ``concordance_index``) and the vectorized form
  :func:`c_index_weighted` for a whole bootstrap (equal to lifelines on each resample, tested),
  with :func:`resample_counts` drawing the resamples.
* The **time-dependent AUROC**, cumulative cases / dynamic controls (Heagerty et al. 2000)
  with inverse-probability-of-censoring weights (Uno et al. 2007; Hung & Chiang 2010):
  :func:`auroc_td_weighted`.
* The **Brier score** at a horizon with inverse-probability-of-censoring weights:
  :func:`brier_weighted`.
* **Cox** proportional hazards (lifelines ``CoxPHFitter``): :func:`cox_fit` (the fit, ridge
  penalty optional), :func:`cox_wald` (hazard ratios with Wald 95% intervals and p of any
  covariates) and :func:`hazard_ratio` (one exposure, adjusted for age). The Wald figures and
  the yardstick's many small fits (:mod:`sphr.beyond_age`) use :func:`cox_efron`, the same
  model by Newton-Raphson in numpy (lifelines' estimates to 1e-5, tested; a fit of a few
  covariates in milliseconds where lifelines' fixed cost is ~40 ms), falling back to
  lifelines' fitter where it does not converge.

Bootstrap weights: a resample is a row of multiplicities w (person i drawn w_i times), so
a statistic of B resamples is B rows of one matrix product, not B calls.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping

import numpy as np
import pandas as pd

__all__ = ["Z95", "CensoringKM", "auroc_td_weighted", "brier_weighted", "c_index",
           "c_index_weighted", "cox_efron", "cox_fit", "cox_wald", "cumulative_incidence",
           "hazard_ratio",
           "kaplan_meier", "km_cumulative", "km_curve", "resample_counts", "risk_set_times"]

#: the two-sided 95% normal quantile of every interval here (lifelines uses 1.959963984...;
#: the difference is below 1e-7 of an interval's width)
Z95 = 1.959964


# --------------------------------------------------------------------------- Kaplan-Meier
def _km_steps(t: np.ndarray, e: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(distinct event times, number at risk there, S, Greenwood sum) at each event time."""
    times = np.unique(t[e])
    te = np.sort(t[e])
    d = np.searchsorted(te, times, side="right") - np.searchsorted(te, times, side="left")
    n = t.size - np.searchsorted(np.sort(t), times, side="left")  # T >= u: still followed
    with np.errstate(divide="ignore", invalid="ignore"):
        surv = np.cumprod(1 - d / n)
        green = np.cumsum(d / (n * (n - d)))  # inf once everyone left has the event (S = 0)
    return times, n, surv, green


def _greenwood_interval(s: np.ndarray, green: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(S low, S high) by the exponential Greenwood formula: symmetric on log(-log S), so the
    interval stays inside [0, 1]; it collapses onto S where S is 1 or 0."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        sigma = np.sqrt(green) / np.abs(np.log(s))
        s_low = np.where(s < 1, s ** np.exp(Z95 * sigma), 1.0)
        s_high = np.where(s < 1, s ** np.exp(-Z95 * sigma), 1.0)
    return np.where(s > 0, s_low, 0.0), np.where(s > 0, s_high, 0.0)


def kaplan_meier(time: np.ndarray, event: np.ndarray, grid: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(1 - S, low, high) at ``grid``: Kaplan-Meier cumulative incidence and its exponential
    Greenwood 95% interval (lifelines' KaplanMeierFitter's, tested). S = 1 before the first
    event and stays at its last value beyond the last follow-up (the caller cuts there)."""
    t, e = np.asarray(time, float), np.asarray(event, bool)
    grid = np.asarray(grid, float)
    times, _, surv, green = _km_steps(t, e)
    k = np.searchsorted(times, grid, side="right") - 1
    s = np.where(k >= 0, surv[np.maximum(k, 0)] if times.size else 1.0, 1.0)
    g = np.where(k >= 0, green[np.maximum(k, 0)] if times.size else 0.0, 0.0)
    s_low, s_high = _greenwood_interval(s, g)
    return 1 - s, 1 - s_high, 1 - s_low


def km_curve(time: np.ndarray, event: np.ndarray, min_at_risk: int = 5) -> pd.DataFrame:
    """Kaplan-Meier 1 - S(t) as a curve to draw: ``time_years, cum_inc, low, high`` at 0 and
    every event time, and at the end of follow-up when that comes later.

    Cut where fewer than ``min_at_risk`` people are still followed (a tail of two people jumps
    to 50% or 100% and means nothing; 1 keeps the whole curve). The interval is NaN where S is
    1 or 0 (a band of width 0 says nothing a reader needs).
    """
    t, e = np.asarray(time, float), np.asarray(event, bool)
    if not len(t):
        return pd.DataFrame({"time_years": [0.0], "cum_inc": [0.0], "low": [0.0], "high": [0.0]})
    end = float(np.sort(t)[-min_at_risk]) if len(t) >= min_at_risk else 0.0
    times, _, s, green = _km_steps(t, e)
    keep = times <= end  # S at an event time depends only on earlier times: cut, not refit
    times, s, green = times[keep], s[keep], green[keep]
    s_lo, s_hi = _greenwood_interval(s, green)
    ok = (s > 0) & (s < 1)
    s_lo, s_hi = np.where(ok, s_lo, np.nan), np.where(ok, s_hi, np.nan)
    out = pd.DataFrame({"time_years": [0.0, *times], "cum_inc": [0.0, *(1 - s)],
                        "low": [0.0, *(1 - s_hi)], "high": [0.0, *(1 - s_lo)]})
    if end > out["time_years"].iloc[-1]:  # followed up beyond the last event
        out = pd.concat([out, out.iloc[[-1]].assign(time_years=end)], ignore_index=True)
    return out


def km_cumulative(time: np.ndarray, event: np.ndarray, horizon: float) -> float:
    """Kaplan-Meier 1 - S(``horizon``); NaN without anyone."""
    if np.asarray(time).size == 0:
        return float("nan")
    return float(kaplan_meier(time, event, np.array([horizon]))[0][0])


# --------------------------------------------------------------------------- competing risk
def _step_at(times: np.ndarray, values: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """A right-continuous step function given at ``times`` (sorted, starting at 0), at ``grid``."""
    k = np.searchsorted(times, grid, side="right") - 1
    return values[np.maximum(k, 0)]


def cumulative_incidence(time: np.ndarray, event: np.ndarray, grid: np.ndarray, *,
                         competing: np.ndarray | None = None, seed: int = 0
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray, str]:
    """(cum_inc, low, high, estimator) at ``grid`` (NaN beyond the last follow-up time).

    Aalen-Johansen when ``competing`` marks participants whose follow-up ended with a
    competing event (e.g. death before the outcome; lifelines' fitter, its interval), else
    Kaplan-Meier 1 - S(t) (:func:`kaplan_meier`): estimator ``aalen_johansen`` /
    ``kaplan_meier``.
    """
    t = np.asarray(time, float)
    e = np.asarray(event, bool)
    grid = np.asarray(grid, float)
    beyond = np.where(grid > (t.max() if t.size else -1), np.nan, 0.0)
    if competing is not None and np.asarray(competing, bool).any() and e.any():
        from lifelines import AalenJohansenFitter

        code = np.where(e, 1, np.where(np.asarray(competing, bool), 2, 0))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # it jitters tied times (seeded) and says so
            fit = AalenJohansenFitter(seed=seed).fit(t, code, event_of_interest=1)
        times = fit.cumulative_density_.index.to_numpy(float)
        est = _step_at(times, fit.cumulative_density_.iloc[:, 0].to_numpy(), grid)
        ci = fit.confidence_interval_.to_numpy()
        ci_t = fit.confidence_interval_.index.to_numpy(float)
        low = _step_at(ci_t, np.fmin(ci[:, 0], ci[:, 1]), grid)
        high = _step_at(ci_t, np.fmax(ci[:, 0], ci[:, 1]), grid)
        return (est + beyond, np.nan_to_num(low) + beyond, np.nan_to_num(high) + beyond,
                "aalen_johansen")
    est, low, high = kaplan_meier(t, e, grid)
    return est + beyond, low + beyond, high + beyond, "kaplan_meier"


# --------------------------------------------------------------------------- censoring
class CensoringKM:
    """Weighted Kaplan-Meier of the censoring distribution G, for each row of multiplicities
    ``weights`` (R, n): a censoring is the "event", an event censors it.

    Ties as the reverse Kaplan-Meier of prodlim (pec, riskRegression) and scikit-survival
    take them: at a time u with both, the events come first, so someone with the event at u
    is not at risk of being censored at u. With T = [1, 1, 2, 3], E = [1, 0, 1, 0], G(1) is
    1 - 1/3 = 2/3 (keeping the event in the risk set would give 3/4 and IPCW weights that no
    longer sum to n; docs/OUTCOMES.md, "Validation on linked outcomes").
    """

    def __init__(self, time: np.ndarray, event: np.ndarray, weights: np.ndarray) -> None:
        time, event = np.asarray(time, float), np.asarray(event, bool)
        order = np.argsort(time, kind="stable")
        t = time[order]
        self.times, start = np.unique(t, return_index=True)
        w = np.atleast_2d(np.asarray(weights, float))[:, order]
        censored = np.add.reduceat(w * ~event[order], start, axis=1)
        total = np.add.reduceat(w, start, axis=1)
        # weight with T >= u_k, less the events at u_k (they happened first)
        at_risk = total[:, ::-1].cumsum(axis=1)[:, ::-1] - (total - censored)
        with np.errstate(invalid="ignore", divide="ignore"):
            factor = np.where(at_risk > 0, 1 - censored / at_risk, 1.0)
            self.log_g = np.cumsum(np.log(np.maximum(factor, 0.0)), axis=1)  # log G(u_k)

    def before(self, t: np.ndarray) -> np.ndarray:
        """G(t-) for times ``t`` (R, len(t)): censorings strictly before t."""
        k = np.searchsorted(self.times, t, side="left") - 1
        return np.where(k >= 0, np.exp(self.log_g[:, np.maximum(k, 0)]), 1.0)


# --------------------------------------------------------------------------- discrimination
def resample_counts(rng: np.random.Generator, n: int, n_bootstrap: int) -> np.ndarray:
    """Multiplicities (B, n) of ``n_bootstrap`` participant resamples with replacement."""
    idx = rng.integers(0, n, size=(n_bootstrap, n))
    flat = (idx + np.arange(n_bootstrap)[:, None] * n).ravel()
    return np.bincount(flat, minlength=n_bootstrap * n).reshape(n_bootstrap, n)


def percentile_interval(values: np.ndarray) -> tuple[float, float]:
    """The 2.5th and 97.5th percentiles of the finite bootstrap ``values``; NaNs with fewer
    than two."""
    finite = values[np.isfinite(values)]
    if finite.size < 2:
        return (np.nan, np.nan)
    lo, hi = np.percentile(finite, (2.5, 97.5))
    return float(lo), float(hi)


def c_index(time: np.ndarray, event: np.ndarray, score: np.ndarray) -> float:
    """Harrell's C (lifelines): a higher score should mean an earlier event (lifelines wants
    survival-like predictions, so the score is negated); NaN without an event or a
    comparable pair."""
    from lifelines.utils import concordance_index

    if np.asarray(event).sum() == 0:
        return float("nan")
    try:
        return float(concordance_index(time, -np.asarray(score, float), event))
    except ZeroDivisionError:  # no comparable pair (e.g. a small resample)
        return float("nan")


def c_index_weighted(time: np.ndarray, event: np.ndarray, score: np.ndarray,
                     weights: np.ndarray, strata: np.ndarray | None = None) -> np.ndarray:
    """Harrell's C for each row of multiplicities ``weights`` (R, n), with lifelines' tie rules
    (i before j is comparable if i had the event and T_i < T_j, or T_i = T_j and j is
    censored; a score tie counts 0.5); NaN without a comparable pair.

    A bootstrap resample repeats people, so each pair counts w_i w_j times (copies of one
    person are never comparable with each other): every resample in one matrix product
    instead of one lifelines call each (equal to them; tested). Only event rows can start a
    comparable pair, so the matrices are (events, n). Every term is a multiple of 0.5, so the
    sums are exact and the result does not depend on the order of summation.
    ``strata``: only pairs within one stratum count (e.g. the folds of a cross-fit, whose
    scores come from different fits and are comparable only within a fold).
    """
    t, e, s = np.asarray(time, float), np.asarray(event, bool), np.asarray(score, float)
    w = np.atleast_2d(np.asarray(weights, float))
    ev = np.flatnonzero(e)
    if ev.size == 0:
        return np.full(w.shape[0], np.nan)
    ti, si = t[ev][:, None], s[ev][:, None]
    comparable = (ti < t[None, :]) | ((ti == t[None, :]) & ~e[None, :])
    if strata is not None:
        st = np.asarray(strata)
        comparable &= st[ev][:, None] == st[None, :]
    concordant = np.where(si > s[None, :], 1.0, np.where(si == s[None, :], 0.5, 0.0))
    num = ((w @ (comparable * concordant).T) * w[:, ev]).sum(axis=1)
    den = ((w @ comparable.T.astype(float)) * w[:, ev]).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / den, np.nan)


def auroc_td_weighted(time: np.ndarray, event: np.ndarray, score: np.ndarray, horizon: float,
                      weights: np.ndarray, censoring: CensoringKM | None = None,
                      min_events: int = 1) -> np.ndarray:
    """Cumulative/dynamic AUROC at ``horizon`` with IPCW, for each row of multiplicities.

    Cases: events by ``horizon``, weighted 1 / G(T_i-); controls: everyone still event-free
    after it (their common weight 1 / G(horizon) cancels); a score tie counts 0.5. NaN with
    fewer than ``min_events`` cases or controls. ``censoring``: G fitted on the same rows and
    weights, to share it between scores and horizons.
    """
    t, e, s = np.asarray(time, float), np.asarray(event, bool), np.asarray(score, float)
    w = np.atleast_2d(np.asarray(weights, float))
    cases = np.flatnonzero(e & (t <= horizon))
    controls = np.flatnonzero(t > horizon)
    if cases.size < min_events or controls.size < min_events:
        return np.full(w.shape[0], np.nan)
    g = (censoring or CensoringKM(t, e, w)).before(t[cases])
    with np.errstate(divide="ignore"):
        omega = np.where(g > 0, 1.0 / g, 0.0) * w[:, cases]  # (R, cases)
    sc, sk = s[cases][:, None], s[controls][None, :]
    conc = np.where(sc > sk, 1.0, np.where(sc == sk, 0.5, 0.0))  # (cases, controls)
    num = (omega * (w[:, controls] @ conc.T)).sum(axis=1)
    den = omega.sum(axis=1) * w[:, controls].sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / den, np.nan)


def brier_weighted(time: np.ndarray, event: np.ndarray, risk: np.ndarray, horizon: float,
                   weights: np.ndarray) -> np.ndarray:
    """The Brier score of a predicted risk by ``horizon`` with inverse-probability-of-censoring
    weights (Graf et al. 1999, Stat Med 18:2529), for each row of multiplicities ``weights``
    (R, n): an event by the horizon scores (1 - risk)^2 / G(T-), anyone followed to it
    event-free risk^2 / G(horizon-), and someone censored before it 0 (their weight goes to the
    others through G). G is the censoring Kaplan-Meier of the same rows and weights."""
    t, e, p = np.asarray(time, float), np.asarray(event, bool), np.asarray(risk, float)
    w = np.atleast_2d(np.asarray(weights, float))
    g = CensoringKM(t, e, w)
    case = e & (t <= horizon)
    # event-free through the horizon; someone censored exactly there (follow-up cut at the
    # horizon) is a control too, so the controls' weight is G(horizon-)
    alive = (t > horizon) | (~e & (t >= horizon))
    g_case = g.before(t)  # (R, n); used where case
    g_h = g.before(np.array([horizon]))[:, 0]
    with np.errstate(divide="ignore", invalid="ignore"):
        term = np.where(case[None, :], (1 - p)[None, :] ** 2 / g_case, 0.0) + \
            np.where(alive[None, :], p[None, :] ** 2 / g_h[:, None], 0.0)
        return (w * np.nan_to_num(term, posinf=0.0)).sum(axis=1) / w.sum(axis=1)


# --------------------------------------------------------------------------- Cox
def risk_set_times(frame: pd.DataFrame) -> pd.DataFrame:
    """The same partial likelihood on fewer distinct times: a censored time moves down to the
    last event time at or before it (it stays in exactly the same risk sets), and a censoring
    before the first event, which is in none, goes. Estimates and standard errors are
    unchanged; lifelines' cost grows with the number of distinct times."""
    events = np.unique(frame.loc[frame["event"] == 1, "time"].to_numpy())
    t = frame["time"].to_numpy()
    k = np.searchsorted(events, t, side="right") - 1
    keep = k >= 0  # an event at time 0 stays: it has a risk set (everyone)
    out = frame.loc[keep].copy()
    out["time"] = np.where(out["event"] == 1, out["time"], events[k[keep]])
    return out


def _efron_terms(t: np.ndarray, e: np.ndarray, X: np.ndarray, beta: np.ndarray
                 ) -> tuple[float, np.ndarray, np.ndarray]:
    """Efron's log partial likelihood, its gradient and Hessian at ``beta``; rows sorted by
    time. Each event at a time with d events is the l-th (l = 0..d-1) of its tie group and
    its risk set is the people still followed less l / d of the group's own weight."""
    xb = X @ beta
    w = np.exp(xb - xb.max())  # a common factor: cancels in every ratio below
    wx, wxx = w[:, None] * X, w[:, None, None] * X[:, :, None] * X[:, None, :]
    times, first = np.unique(t, return_index=True)
    # sums over the risk set {T >= time}: reverse cumulative sums read at each time's first row
    s0, s1, s2 = (np.cumsum(a[::-1], axis=0)[::-1][first] for a in (w, wx, wxx))
    ev = np.flatnonzero(e)
    group = np.searchsorted(times, t[ev])
    d = np.bincount(group, minlength=times.size)
    e0 = np.bincount(group, weights=w[ev], minlength=times.size)
    e1 = np.stack([np.bincount(group, weights=wx[ev, j], minlength=times.size)
                   for j in range(X.shape[1])], axis=1)
    e2 = np.zeros_like(s2)
    np.add.at(e2, group, wxx[ev])
    rank = np.arange(ev.size) - np.searchsorted(group, group)  # l within the tie group
    phi = rank / d[group]
    z0 = s0[group] - phi * e0[group]
    z1 = s1[group] - phi[:, None] * e1[group]
    z2 = s2[group] - phi[:, None, None] * e2[group]
    loglik = float(xb[ev].sum() - (np.log(z0) + xb.max()).sum())
    grad = X[ev].sum(axis=0) - (z1 / z0[:, None]).sum(axis=0)
    m = z1 / z0[:, None]
    hess = -(z2 / z0[:, None, None] - m[:, :, None] * m[:, None, :]).sum(axis=0)
    return loglik, grad, hess


def cox_efron(time: np.ndarray, event: np.ndarray, X: np.ndarray, ridge: float = 0.0,
              max_steps: int = 50) -> tuple[np.ndarray, np.ndarray] | None:
    """(coefficients, standard errors) of a Cox model with Efron's ties by Newton-Raphson with
    step halving: the model of :func:`cox_fit` (lifelines' estimates, tested), in numpy, for
    the many small fits of a cross-fit (lifelines' fixed cost is most of a small fit's time).
    ``ridge``: a penalty ridge / 2 * ||beta||^2 (a score equal to age stays estimable). None
    when it does not converge."""
    order = np.argsort(np.asarray(time, float), kind="stable")
    t, e = np.asarray(time, float)[order], np.asarray(event, bool)[order]
    X = np.asarray(X, float).reshape(len(t), -1)[order]
    if not e.any():
        return None
    mu, sd = X.mean(axis=0), X.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    Z = (X - mu) / sd  # conditioning only: the estimates are mapped back below
    beta = np.zeros(Z.shape[1])
    pen = ridge * sd ** 2  # the penalty on the original scale's coefficients
    ll, g, h = _efron_terms(t, e, Z, beta)
    for _ in range(max_steps):
        g, h = g - pen * beta, h - np.diag(pen)
        try:
            step = np.linalg.solve(h, -g)
        except np.linalg.LinAlgError:  # a constant or collinear column without a ridge
            return None
        if not np.all(np.isfinite(step)):
            return None
        for _ in range(30):  # halve until the penalized likelihood does not fall
            new = beta + step
            ll_new, g_new, h_new = _efron_terms(t, e, Z, new)
            if ll_new - 0.5 * (pen * new ** 2).sum() >= ll - 0.5 * (pen * beta ** 2).sum() - 1e-12:
                break
            step = step / 2
        beta, ll, g, h = new, ll_new, g_new, h_new
        if np.max(np.abs(step)) < 1e-10:
            break
    else:
        return None
    try:
        cov = np.linalg.inv(-(h - np.diag(pen)))
    except np.linalg.LinAlgError:
        return None
    return beta / sd, np.sqrt(np.clip(np.diag(cov), 0, None)) / sd


def cox_fit(frame: pd.DataFrame, penalizer: float | np.ndarray = 0.0):
    """lifelines' CoxPHFitter on ``frame`` (time, event, covariates), or None; ``penalizer``:
    lifelines' ridge penalty (one value, or one per covariate in column order).

    Its default Newton step overshoots when an effect is strong (a hazard ratio of ~7
    diverges): retry with shorter steps before giving up."""
    from lifelines import CoxPHFitter

    for options in (None, {"step_size": 0.5}, {"step_size": 0.2, "max_steps": 200}):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return CoxPHFitter(penalizer=penalizer).fit(
                    frame, "time", "event", batch_mode=True, fit_options=options)
        except Exception:  # ConvergenceError, singular matrices on separation
            continue
    return None


def cox_wald(time: np.ndarray, event: np.ndarray, covariates: Mapping[str, np.ndarray]
             ) -> dict[str, tuple[float, float, float, float]]:
    """(HR, low, high, p) of every covariate from one Cox model (Efron ties): exp(coef), the
    Wald 95% interval exp(coef +- 1.96 se) and two-sided p; all NaN when the fit fails.
    A name's value is NaN too where the fit dropped it (e.g. a column lifelines rejects)."""
    frame = risk_set_times(pd.DataFrame({
        "time": np.asarray(time, float), "event": np.asarray(event, int),
        **{k: np.asarray(v, float) for k, v in covariates.items()}}))
    return _wald(frame, list(covariates))


def _estimates(frame: pd.DataFrame, names: list[str]) -> dict[str, tuple[float, float]]:
    """name -> (coef, se): :func:`cox_efron` where it converges with finite estimates, else
    lifelines' fitter (its retries with shorter steps); NaN where both fail."""
    X = frame[names].to_numpy(float)
    fast = (cox_efron(frame["time"].to_numpy(float), frame["event"].to_numpy(bool), X)
            if np.isfinite(X).all() and len(frame) else None)
    if fast is not None and np.all(np.isfinite(fast[0])) and np.all(np.isfinite(fast[1])):
        return {n: (float(c), float(e)) for n, c, e in zip(names, *fast, strict=True)}
    fit = cox_fit(frame)
    # params and standard errors directly: building lifelines' summary table costs more than
    # the fit; the interval and p are the summary's (Z95 aside)
    return {n: (float(fit.params_[n]), float(fit.standard_errors_[n]))
            if fit is not None and n in fit.params_.index else (np.nan, np.nan) for n in names}


def _wald(frame: pd.DataFrame, names: list[str]) -> dict[str, tuple[float, float, float, float]]:
    from scipy.stats import norm

    out = {}
    for name, (coef, se) in _estimates(frame, names).items():
        if not (np.isfinite(coef) and np.isfinite(se) and se > 0):
            out[name] = (np.nan, np.nan, np.nan, np.nan)
            continue
        p = float(2 * norm.sf(abs(coef / se)))
        out[name] = (float(np.exp(coef)), float(np.exp(coef - Z95 * se)),
                     float(np.exp(coef + Z95 * se)), p)
    return out


def hazard_ratio(time: np.ndarray, event: np.ndarray, exposure: np.ndarray, age: np.ndarray
                 ) -> tuple[float, float, float, float]:
    """(HR, low, high, p) of ``exposure`` (1 exposed, e.g. Higher Risk; 0 reference, e.g.
    Normal) from a Cox model adjusted for age; unadjusted where age is constant or missing
    among the people the model keeps (it cannot be estimated there)."""
    frame = risk_set_times(pd.DataFrame({
        "time": np.asarray(time, float), "event": np.asarray(event, int),
        "exposure": np.asarray(exposure, float), "age": np.asarray(age, float)}))
    if frame["age"].std() == 0 or not np.isfinite(frame["age"]).all():
        frame = frame.drop(columns="age")
    return _wald(frame, [c for c in ("exposure", "age") if c in frame])["exposure"]
