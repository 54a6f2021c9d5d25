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

The estimators are :mod:`sphr.survival`'s (one implementation each, shared with the other
stages); this module chooses the populations and builds the tables.
"""

from __future__ import annotations

import contextlib
import zlib
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import pandas as pd

from sphr.errors import InputError
from sphr.risk.config import RiskConfig
from sphr.risk.intervals import GROUPS, HIGHER_RISK, LOWER_RISK, NORMAL
from sphr.survival import (
    CensoringKM,
    auroc_td_weighted,
    c_index_weighted,
    cumulative_incidence,
    hazard_ratio,
    percentile_interval,
    resample_counts,
)

#: consistent group colours in every figure
GROUP_COLOURS: dict[str, str] = {NORMAL: "#2e8b57", LOWER_RISK: "#f0a30a", HIGHER_RISK: "#d62728"}
DEFAULT_GRID: tuple[float, ...] = tuple(np.round(np.arange(0.0, 12.01, 0.5), 2))
SCORE_COLUMNS = ("eid", "sex", "method", "score", "group", "age_years")
OUTCOME_COLUMNS = ("eid", "outcome", "event", "time_years", "prevalent")


def _check(frame: pd.DataFrame, columns: Sequence[str], name: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InputError(f"{name} is missing column(s) {missing}; it has {list(frame.columns)}",
                         field=", ".join(missing))


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
            cache: dict[bytes, CensoringKM] = {}
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
                row["c_index_low"], row["c_index_high"] = (
                    percentile_interval(ci[1:]) if enough else (np.nan, np.nan))
                key = ok.tobytes()
                if enough and key not in cache:
                    cache[key] = CensoringKM(t, e, w)
                for h in horizons:
                    col = _horizon_name(h)
                    auc = (auroc_td_weighted(t, e, sc, h, w, cache[key], min_events)
                           if enough else np.full(1, np.nan))
                    row[col] = float(auc[0])
                    row[f"{col}_low"], row[f"{col}_high"] = percentile_interval(auc[1:])
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
    if (k_n + k_h >= min_events and k_n > 0 and k_h > 0
            and min(normal.sum(), higher.sum()) >= min_events):
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
