"""Does a higher health score come before a recorded disease? Validation on linked outcomes.

:func:`linked_validation` takes one score per participant and method (``scores``: ``eid, sex,
method, score, group, age_years``; larger score = worse) and ``RUN/ingest/outcomes.parquet``
(:mod:`sphr.data.outcomes`), and for every sex, method and outcome, leaving out the prevalent
cases of that outcome, estimates

* **Harrell's C-index** (lifelines ``concordance_index``; a higher score should mean an earlier
  event; pairs tied in time are comparable only when the later one is censored, score ties
  count 1/2);
* the **time-dependent AUROC** at each horizon t, cumulative cases / dynamic controls
  (Heagerty et al. 2000) with inverse-probability-of-censoring weights (Uno et al. 2007; Hung
  & Chiang 2010): cases are events by t, weighted 1 / G(T_i-), controls everyone still event-free
  after t (their common weight 1 / G(t) cancels), G the Kaplan-Meier estimate of the censoring
  distribution (deaths before the event censor it);
* the **hazard ratio** Higher Risk vs Normal from a Cox model adjusted for age (lifelines
  ``CoxPHFitter``; Lower Risk left out) with its Wald 95% interval and p;
* the **cumulative incidence** by group on a time grid: Kaplan-Meier 1 - S(t) with
  lifelines' exponential Greenwood interval, or with ``competing_risk=True`` for the non-death
  outcomes the Aalen-Johansen estimate with death as a competing risk (lifelines
  ``AalenJohansenFitter``).

Intervals of the C-index and the AUROC: participants resampled with replacement
``n_bootstrap`` times (one seeded stream per sex and outcome, the same resamples for every
method), percentile 95% intervals. All resamples are evaluated at once: a resample is a row of
multiplicities w, the C-index is w'(comparable * concordant)w / w'(comparable)w over the event
rows only, the censoring distribution is re-estimated for each resample as a weighted
Kaplan-Meier, so no Python loop runs over resamples. With fewer than ``min_events`` events
(cases, or controls at a horizon) a metric is not estimated (NaN).
"""

from __future__ import annotations

import contextlib
import warnings
import zlib
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import pandas as pd

from sphr.errors import InputError
from sphr.risk.config import RiskConfig
from sphr.risk.discrimination import c_index_weighted, resample_counts
from sphr.risk.intervals import GROUPS, HIGHER_RISK, LOWER_RISK, NORMAL

#: consistent group colours in every figure
GROUP_COLOURS: dict[str, str] = {NORMAL: "#2e8b57", LOWER_RISK: "#f0a30a", HIGHER_RISK: "#d62728"}
DEFAULT_GRID: tuple[float, ...] = tuple(np.round(np.arange(0.0, 12.01, 0.5), 2))
SCORE_COLUMNS = ("eid", "sex", "method", "score", "group", "age_years")
OUTCOME_COLUMNS = ("eid", "outcome", "event", "time_years", "prevalent")
_Z = 1.959964


def _check(frame: pd.DataFrame, columns: Sequence[str], name: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InputError(f"{name} is missing column(s) {missing}; it has {list(frame.columns)}",
                         field=", ".join(missing))


# --------------------------------------------------------------------------- censoring
class _Censoring:
    """Weighted Kaplan-Meier of the censoring distribution for each row of multiplicities."""

    def __init__(self, time: np.ndarray, event: np.ndarray, weights: np.ndarray) -> None:
        order = np.argsort(time, kind="stable")
        t = time[order]
        self.times, start = np.unique(t, return_index=True)
        w = weights[:, order]
        censored = np.add.reduceat(w * ~event[order], start, axis=1)
        total = np.add.reduceat(w, start, axis=1)
        at_risk = total[:, ::-1].cumsum(axis=1)[:, ::-1]  # weight with T >= u_k
        with np.errstate(invalid="ignore", divide="ignore"):
            factor = np.where(at_risk > 0, 1 - censored / at_risk, 1.0)
            self.log_g = np.cumsum(np.log(np.maximum(factor, 0.0)), axis=1)  # log G(u_k)

    def before(self, t: np.ndarray) -> np.ndarray:
        """G(t-) for times ``t`` (R, len(t)): censorings strictly before t."""
        k = np.searchsorted(self.times, t, side="left") - 1
        out = np.where(k >= 0, np.exp(self.log_g[:, np.maximum(k, 0)]), 1.0)
        return out


def auroc_td_weighted(time: np.ndarray, event: np.ndarray, score: np.ndarray, horizon: float,
                      weights: np.ndarray, censoring: _Censoring | None = None,
                      min_events: int = 1) -> np.ndarray:
    """Cumulative/dynamic AUROC at ``horizon`` with IPCW, for each row of multiplicities."""
    t, e, s = np.asarray(time, float), np.asarray(event, bool), np.asarray(score, float)
    w = np.atleast_2d(np.asarray(weights, float))
    cases = np.flatnonzero(e & (t <= horizon))
    controls = np.flatnonzero(t > horizon)
    if cases.size < min_events or controls.size < min_events:
        return np.full(w.shape[0], np.nan)
    g = (censoring or _Censoring(t, e, w)).before(t[cases])
    with np.errstate(divide="ignore"):
        omega = np.where(g > 0, 1.0 / g, 0.0) * w[:, cases]  # (R, cases)
    sc, sk = s[cases][:, None], s[controls][None, :]
    conc = np.where(sc > sk, 1.0, np.where(sc == sk, 0.5, 0.0))  # (cases, controls)
    num = (omega * (w[:, controls] @ conc.T)).sum(axis=1)
    den = omega.sum(axis=1) * w[:, controls].sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / den, np.nan)


def _interval(values: np.ndarray) -> tuple[float, float]:
    finite = values[np.isfinite(values)]
    if finite.size < 2:
        return (np.nan, np.nan)
    lo, hi = np.percentile(finite, (2.5, 97.5))
    return float(lo), float(hi)


# --------------------------------------------------------------------------- hazard ratio
def _risk_set_times(frame: pd.DataFrame) -> pd.DataFrame:
    """The same partial likelihood on fewer distinct times: a censored time moves down to the
    last event time at or before it (it stays in exactly the same risk sets), and a censoring
    before the first event, which is in none, goes. Estimates and standard errors are
    unchanged; lifelines' cost grows with the number of distinct times."""
    events = np.unique(frame.loc[frame["event"] == 1, "time"].to_numpy())
    t = frame["time"].to_numpy()
    k = np.searchsorted(events, t, side="right") - 1
    keep = (k >= 0) & (t > 0)
    out = frame.loc[keep].copy()
    out["time"] = np.where(out["event"] == 1, out["time"], events[k[keep]])
    return out


def hazard_ratio(time: np.ndarray, event: np.ndarray, higher: np.ndarray, age: np.ndarray
                 ) -> tuple[float, float, float, float]:
    """(HR, low, high, p) of ``higher`` (1 Higher Risk, 0 Normal) from a Cox model with age."""
    from lifelines import CoxPHFitter
    from scipy.stats import norm

    frame = _risk_set_times(pd.DataFrame({
        "time": np.asarray(time, float), "event": np.asarray(event, int),
        "higher": np.asarray(higher, float), "age": np.asarray(age, float)}))
    if frame["age"].std() == 0 or not np.isfinite(frame["age"]).all():
        frame = frame.drop(columns="age")
    coef = se = np.nan
    # lifelines' default Newton step overshoots when the effect is strong (a hazard ratio of
    # ~7 diverges): retry with shorter steps before giving up
    for options in (None, {"step_size": 0.5}, {"step_size": 0.2, "max_steps": 200}):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fit = CoxPHFitter().fit(frame, "time", "event", batch_mode=True,
                                        fit_options=options)
            # params and standard errors directly: building lifelines' summary table costs
            # more than the fit; the Wald interval and p below are the summary's
            coef, se = float(fit.params_["higher"]), float(fit.standard_errors_["higher"])
            break
        except Exception:  # ConvergenceError, singular matrices on separation
            continue
    if not (np.isfinite(coef) and np.isfinite(se) and se > 0):
        return (np.nan, np.nan, np.nan, np.nan)
    p = float(2 * norm.sf(abs(coef / se)))
    return (float(np.exp(coef)), float(np.exp(coef - _Z * se)), float(np.exp(coef + _Z * se)),
            p)


# --------------------------------------------------------------------------- cumulative incidence
def _step_at(times: np.ndarray, values: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """A right-continuous step function given at ``times`` (sorted, starting at 0), at ``grid``."""
    k = np.searchsorted(times, grid, side="right") - 1
    return values[np.maximum(k, 0)]


def kaplan_meier(time: np.ndarray, event: np.ndarray, grid: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Kaplan-Meier 1 - S(t) at ``grid`` with the exponential Greenwood 95% interval (the same
    estimate and interval as lifelines' KaplanMeierFitter, tested; numpy because the fitter's
    fixed cost is most of the time of a few hundred small fits)."""
    t, e = np.asarray(time, float), np.asarray(event, bool)
    grid = np.asarray(grid, float)
    times = np.unique(t[e])
    d = np.searchsorted(np.sort(t[e]), times, side="right") - np.searchsorted(
        np.sort(t[e]), times, side="left")
    n = t.size - np.searchsorted(np.sort(t), times, side="left")
    with np.errstate(divide="ignore", invalid="ignore"):
        surv = np.cumprod(1 - d / n)
        green = np.cumsum(d / (n * (n - d)))
    k = np.searchsorted(times, grid, side="right") - 1
    s = np.where(k >= 0, surv[np.maximum(k, 0)] if times.size else 1.0, 1.0)
    g = np.where(k >= 0, green[np.maximum(k, 0)] if times.size else 0.0, 0.0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        sigma = np.sqrt(g) / np.abs(np.log(s))
        s_low = np.where(s < 1, s ** np.exp(_Z * sigma), 1.0)
        s_high = np.where(s < 1, s ** np.exp(-_Z * sigma), 1.0)
    # everyone left had the event (S = 0): the interval collapses there, as S itself
    s_low, s_high = np.where(s > 0, s_low, 0.0), np.where(s > 0, s_high, 0.0)
    return 1 - s, 1 - s_high, 1 - s_low


def cumulative_incidence(time: np.ndarray, event: np.ndarray, grid: np.ndarray, *,
                         competing: np.ndarray | None = None, seed: int = 0
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray, str]:
    """(cum_inc, low, high, estimator) at ``grid`` (NaN beyond the last follow-up time).

    Kaplan-Meier 1 - S(t), or Aalen-Johansen when ``competing`` marks participants whose
    follow-up ended with a competing event (death before the outcome).
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


# --------------------------------------------------------------------------- the tables
DISCRIMINATION_BASE = ("sex", "method", "outcome", "n", "events", "c_index", "c_index_low",
                       "c_index_high")
HAZARD_RATIO_COLUMNS = ("sex", "method", "outcome", "n", "events_normal", "n_normal",
                        "events_higher", "n_higher", "hr", "hr_low", "hr_high", "p",
                        "events_outside", "n_outside", "hr_outside", "hr_outside_low",
                        "hr_outside_high", "p_outside")
INCIDENCE_COLUMNS = ("sex", "method", "outcome", "group", "time_years", "cum_inc", "low", "high",
                     "at_risk", "estimator")


def _horizon_name(h: float) -> str:
    return f"auroc_{h:g}y"


def linked_validation(scores: pd.DataFrame, outcomes: pd.DataFrame, *,
                      n_bootstrap: int = RiskConfig.n_bootstrap_linked,
                      seed: int = RiskConfig.seed, horizons: tuple[float, ...] = (5.0, 10.0),
                      min_events: int = 5, time_grid: Sequence[float] | None = None,
                      competing_risk: bool = False,
                      evaluated_on: Callable[[str, str], bool] | None = None
                      ) -> dict[str, pd.DataFrame]:
    """Discrimination, hazard ratios and cumulative incidence on linked outcomes.

    Returns ``{"discrimination", "hazard_ratio", "cumulative_incidence"}`` (module docstring).
    ``scores``: eid, sex, method, score (float, larger = worse), group (Normal / Lower Risk /
    Higher Risk, may be missing for a method without groups), age_years. ``outcomes``: the
    outcomes.parquet frame. Participants need a score and a non-prevalent outcome row.
    ``evaluated_on(method, outcome)``: whether to evaluate a method on an outcome (a
    supervised comparator only on the outcome it was fitted to); default every pair.
    """
    _check(scores, SCORE_COLUMNS, "scores")
    _check(outcomes, OUTCOME_COLUMNS, "outcomes")
    with _small_blas():
        return _validate(scores, outcomes, n_bootstrap, seed, horizons, min_events, time_grid,
                         competing_risk, evaluated_on or (lambda method, outcome: True))


@contextlib.contextmanager
def _small_blas() -> Iterator[None]:
    """One BLAS thread: the products here are small (resamples x participants x events), so
    threads cost more in start-up and contention (a shared 2-core box: 10x the CPU time) than
    they save."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # threadpoolctl comes with scikit-learn; without it, run as is
        yield
        return
    with threadpool_limits(1, user_api="blas"):
        yield


def _validate(scores: pd.DataFrame, outcomes: pd.DataFrame, n_bootstrap: int, seed: int,
              horizons: tuple[float, ...], min_events: int, time_grid: Sequence[float] | None,
              competing_risk: bool, evaluated_on: Callable[[str, str], bool]
              ) -> dict[str, pd.DataFrame]:
    grid = np.asarray(DEFAULT_GRID if time_grid is None else time_grid, float)
    names = list(dict.fromkeys(outcomes["outcome"]))
    deaths = None
    if competing_risk and "death" in names:
        d = outcomes.loc[outcomes["outcome"] == "death"]
        deaths = d.loc[d["event"] == 1].set_index("eid")["time_years"]
    disc, hrs, inc = [], [], []
    for sex in sorted(scores["sex"].unique(), key=str):
        sub = scores.loc[scores["sex"] == sex]
        wide = sub.pivot_table(index="eid", columns="method", values="score", aggfunc="first")
        methods = list(dict.fromkeys(sub["method"]))
        wide = wide.reindex(columns=methods)
        groups = (sub.dropna(subset=["group"]).pivot_table(
            index="eid", columns="method", values="group", aggfunc="first")
            .reindex(index=wide.index, columns=methods))
        age = sub.groupby("eid")["age_years"].first().reindex(wide.index).to_numpy(float)
        for name in names:
            oc = outcomes.loc[(outcomes["outcome"] == name) & ~outcomes["prevalent"].astype(bool)]
            oc = oc.drop_duplicates("eid").set_index("eid")
            keep = wide.index.isin(oc.index)
            eids = wide.index[keep]
            T = oc.loc[eids, "time_years"].to_numpy(float)
            E = oc.loc[eids, "event"].to_numpy(int).astype(bool)
            S_all, G_all, A = wide.to_numpy(float)[keep], groups.to_numpy(object)[keep], age[keep]
            rng = np.random.default_rng([seed, zlib.crc32(str(sex).encode()),
                                         zlib.crc32(name.encode())])
            counts = resample_counts(rng, len(eids), n_bootstrap) if len(eids) else None
            competing = None
            if deaths is not None and name != "death":
                dt = deaths.reindex(eids).to_numpy(float)
                competing = ~E & np.isfinite(dt) & (dt <= T + 1e-9)
            cache: dict[bytes, _Censoring] = {}
            for j, method in enumerate(methods):
                if not evaluated_on(method, name):
                    continue
                s = S_all[:, j]
                ok = np.isfinite(s)
                t, e, sc = T[ok], E[ok], s[ok]
                n, k = int(ok.sum()), int(e.sum())
                row = {"sex": sex, "method": method, "outcome": name, "n": n, "events": k}
                enough = min(k, n - k) >= min_events
                w = np.vstack([np.ones(n), counts[:, ok]]) if n else np.ones((1, 0))
                ci = c_index_weighted(t, e, sc, w) if enough else np.full(1, np.nan)
                row["c_index"] = float(ci[0])
                row["c_index_low"], row["c_index_high"] = _interval(ci[1:]) if enough else (
                    np.nan, np.nan)
                key = ok.tobytes()
                if enough and key not in cache:
                    cache[key] = _Censoring(t, e, w)
                for h in horizons:
                    col = _horizon_name(h)
                    auc = (auroc_td_weighted(t, e, sc, h, w, cache[key], min_events)
                           if enough else np.full(1, np.nan))
                    row[col] = float(auc[0])
                    row[f"{col}_low"], row[f"{col}_high"] = _interval(auc[1:])
                disc.append(row)
                g = G_all[:, j][ok]
                if not pd.notna(g).any():
                    continue  # a method without groups: no HR, no incidence by group
                hrs.append(_hr_row(sex, method, name, t, e, g, A[ok], min_events))
                inc += _incidence_rows(sex, method, name, t, e, g, grid,
                                       None if competing is None else competing[ok], seed)
    disc_cols = list(DISCRIMINATION_BASE) + [c for h in horizons for c in (
        _horizon_name(h), f"{_horizon_name(h)}_low", f"{_horizon_name(h)}_high")]
    return {
        "discrimination": pd.DataFrame.from_records(disc, columns=disc_cols),
        "hazard_ratio": pd.DataFrame.from_records(hrs, columns=list(HAZARD_RATIO_COLUMNS)),
        "cumulative_incidence": pd.DataFrame.from_records(inc, columns=list(INCIDENCE_COLUMNS)),
    }


def _hr_row(sex, method, name, t, e, g, age, min_events) -> dict:
    normal, higher = g == NORMAL, g == HIGHER_RISK
    k_n, k_h = int(e[normal].sum()), int(e[higher].sum())
    row = {"sex": sex, "method": method, "outcome": name,
           "n": int(normal.sum() + higher.sum()), "events_normal": k_n,
           "n_normal": int(normal.sum()), "events_higher": k_h, "n_higher": int(higher.sum())}
    hr = (np.nan,) * 4
    # a group of one or two people gives a hazard ratio of 40 with an interval to 300: ask
    # for min_events members on each side as well as an event in each
    if k_n + k_h >= min_events and k_n > 0 and k_h > 0 and min(normal.sum(), higher.sum()) >= min_events:
        both = normal | higher
        hr = hazard_ratio(t[both], e[both], higher[both], age[both])
    row.update(zip(("hr", "hr_low", "hr_high", "p"), hr, strict=True))
    # calibrated Higher Risk is beyond the 99% bound of healthy people and can be nearly empty,
    # so the contrast "outside Normal" (Lower + Higher Risk) vs Normal is reported beside it
    outside = ~normal & pd.notna(g)
    k_o = int(e[outside].sum())
    row.update(events_outside=k_o, n_outside=int(outside.sum()))
    hr_o = (np.nan,) * 4
    if k_n + k_o >= min_events and k_n > 0 and k_o > 0 and outside.sum() >= min_events:
        both = normal | outside
        hr_o = hazard_ratio(t[both], e[both], outside[both], age[both])
    row.update(zip(("hr_outside", "hr_outside_low", "hr_outside_high", "p_outside"), hr_o,
                   strict=True))
    return row


def _incidence_rows(sex, method, name, t, e, g, grid, competing, seed) -> list[dict]:
    rows = []
    for group in GROUPS:
        members = g == group
        if not members.any():
            continue
        gt, ge = t[members], e[members]
        est, low, high, estimator = cumulative_incidence(
            gt, ge, grid, competing=None if competing is None else competing[members],
            seed=seed)
        at_risk = (gt[None, :] >= grid[:, None]).sum(axis=1)
        for i, time in enumerate(grid):
            if np.isnan(est[i]):
                continue
            rows.append({"sex": sex, "method": method, "outcome": name, "group": group,
                         "time_years": float(time), "cum_inc": float(est[i]),
                         "low": float(low[i]), "high": float(high[i]),
                         "at_risk": int(at_risk[i]), "estimator": estimator})
    return rows


# --------------------------------------------------------------------------- figure
def plot_cumulative_incidence(table: pd.DataFrame, sex: str, outcome: str,
                              methods: Sequence[str]):
    """Cumulative incidence by group, one panel per method (a matplotlib Figure, Agg)."""
    from sphr.plots import new_figure

    methods = list(methods)
    cols = min(3, max(1, len(methods)))
    rows = -(-len(methods) // cols) if methods else 1
    fig, axes = new_figure(3.6 * cols, 2.9 * rows, nrows=rows, ncols=cols, squeeze=False,
                           sharex=True, sharey=True)
    sub = table.loc[(table["sex"] == sex) & (table["outcome"] == outcome)]
    for ax, method in zip(axes.ravel(), methods, strict=False):
        part = sub.loc[sub["method"] == method]
        for group in GROUPS:
            g = part.loc[part["group"] == group].sort_values("time_years")
            if g.empty:
                continue
            colour = GROUP_COLOURS[group]
            x = g["time_years"].to_numpy()
            ax.step(x, 100 * g["cum_inc"].to_numpy(), where="post", color=colour, lw=1.6,
                    label=f"{group} (n={int(g['at_risk'].iloc[0])})"
                    if "at_risk" in g else group)
            ax.fill_between(x, 100 * g["low"].to_numpy(), 100 * g["high"].to_numpy(),
                            step="post", color=colour, alpha=0.15, lw=0)
        ax.set_title(method, fontsize=9)
        ax.grid(True, color="#e6e6e6", lw=0.6)
        if part.empty:
            ax.text(0.5, 0.5, "not estimated", ha="center", va="center",
                    transform=ax.transAxes, color="#777777")
        else:
            ax.legend(fontsize=7, loc="upper left", frameon=False)
    for ax in axes.ravel()[len(methods):]:
        ax.set_visible(False)
    for ax in axes[-1, :]:
        ax.set_xlabel("Years since baseline")
    for ax in axes[:, 0]:
        ax.set_ylabel("Cumulative incidence (%)")
    fig.suptitle(f"{outcome.replace('_', ' ')}, {sex}", fontsize=10)
    return fig
