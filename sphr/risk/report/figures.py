"""The risk report's matplotlib figures (PNG data URIs through :func:`sphr.report.figure`):
group shares, forest plots, cumulative curves by group, shares by age group, distance
distributions with the thresholds drawn and the validation table's shape."""

from __future__ import annotations

import textwrap

import numpy as np
import pandas as pd

from sphr.report import (
    FULL_WIDTH,
    GROUP_COLORS,
    METHOD_COLORS,
    SEX_MARKERS,
    Figure,
    figure,
    new_figure,
    style_axes,
    styled,
    text_width,
)
from sphr.risk.intervals import GROUPS, HIGHER_RISK, LOWER_RISK
from sphr.risk.report.names import age_order, is_reference, ordered, short_name
from sphr.risk.validation.curves import OUTCOME, shares


def _grid(n: int) -> tuple[int, int]:
    ncols = n if n <= 5 else 4
    return int(np.ceil(n / max(ncols, 1))), max(ncols, 1)


def _fig_legend(fig, handles, labels, *, y: float, ncol: int, top: bool = False, **kw) -> None:
    """A legend across the figure at ``y`` inches from its bottom (or top)."""
    h = fig.get_size_inches()[1]
    fig.legend(handles, labels, loc="upper center" if top else "lower center", ncol=ncol,
               bbox_to_anchor=(0.5, (1 - y / h) if top else y / h), frameon=False,
               handlelength=1.4, columnspacing=1.2, **kw)


@styled
def share_plot(rows: pd.DataFrame, mode: str) -> Figure:
    """Stacked bars: % of participants in each group, one bar per method, a panel per sex."""
    sub = rows[rows["mode"] == mode]
    sexes = sorted(sub["sex"].unique())
    methods = ordered(sub["method"].unique())
    labels = [short_name(m) for m in methods]
    fig, axes = new_figure(FULL_WIDTH, 0.165 * len(methods) + 0.95, ncols=max(1, len(sexes)),
                           sharey=True, squeeze=False, left=text_width(labels) + 0.12,
                           top=0.6, bottom=0.42, wspace=0.25, right=0.15)
    y = np.arange(len(methods))[::-1]
    for ax, sex in zip(axes[0], sexes, strict=False):
        s = shares(sub[sub["sex"] == sex], ["method"]).set_index("method").reindex(methods)
        left = np.zeros(len(methods))
        for g in GROUPS:
            v = s[g].fillna(0).to_numpy(float)
            ax.barh(y, v, left=left, color=GROUP_COLORS[g], label=g, height=0.72,
                    edgecolor="white", linewidth=0.4)
            for yy, ll, vv in zip(y, left, v, strict=True):
                if vv >= 9:
                    ax.text(ll + vv / 2, yy, f"{vv:.0f}", ha="center", va="center",
                            fontsize=6.5, color="white" if g != LOWER_RISK else "black")
            left += v
        ax.set_xlim(0, 100)
        ax.set_xlabel("participants (%)")
        n = int(sub.loc[sub["sex"] == sex, "eid"].nunique())
        ax.set_title(f"{sex.capitalize()} (n={n:,})")
    axes[0][0].set_yticks(y, labels)
    handles, names = axes[0][0].get_legend_handles_labels()
    _fig_legend(fig, handles, names, y=0.02, ncol=3, top=True)
    return figure(fig, f"group shares, mode {mode}")


@styled
def forest_plot(disc: pd.DataFrame, outcome: str = OUTCOME) -> Figure:
    """One row per method; AUROC (visit 1), C-index (visits 1-3) and risk ratio Higher vs
    Normal with 95% CIs; both sexes in each panel (marker shape), references shaded."""
    import matplotlib.ticker as mticker

    d = disc[disc["outcome"] == outcome]
    sexes = sorted(d["sex"].unique())
    methods = ordered(d["method"].unique())
    labels = [short_name(m) + (" *" if is_reference(m) else "") for m in methods]
    panels = [("auroc", "AUROC\nnew diagnosis at visit 1", "AUROC (0.5 = chance)", 0.5),
              ("c_index", "C-index\ntime to it, visits 1-3", "Harrell's C (0.5 = chance)", 0.5),
              ("rr_higher_vs_normal", "Risk ratio\nHigher Risk vs Normal, visit 1",
               "risk ratio, log scale\n(1 = no difference)", 1.0)]
    fig, axes = new_figure(FULL_WIDTH, 0.22 * len(methods) + 1.45, ncols=3, sharey=True,
                           squeeze=False, left=text_width(labels) + 0.12, top=0.42,
                           bottom=1.0, wspace=0.22, right=0.12)
    y = np.arange(len(methods))[::-1].astype(float)
    offsets = {s: (0.15 - 0.3 * k / max(1, len(sexes) - 1)) if len(sexes) > 1 else 0.0
               for k, s in enumerate(sexes)}
    ref_rows = [yy for yy, m in zip(y, methods, strict=True) if is_reference(m)]
    for ax, (col, title, xlabel, null) in zip(axes[0], panels, strict=True):
        for yy in ref_rows:
            ax.axhspan(yy - 0.5, yy + 0.5, color="#efefef", zorder=0, lw=0)
        ax.axvline(null, color="black", lw=0.8, ls="--", zorder=1)
        finite = []
        for sex in sexes:
            s = d[d["sex"] == sex].set_index("method").reindex(methods)
            lo_col, hi_col = ("rr_low", "rr_high") if col.startswith("rr") else \
                (f"{col}_low", f"{col}_high")
            if not {col, lo_col, hi_col} <= set(s.columns):
                continue
            finite += _forest_points(ax, s, methods, y + offsets[sex], (col, lo_col, hi_col),
                                     null, sex, filled=sex == sexes[0])
        ax.set_title(title, fontsize=8)
        ax.set_xlabel(xlabel)
        ax.set_ylim(-0.6, len(methods) - 0.4)
        if col.startswith("rr"):
            ax.set_xscale("log")
            lo_x, hi_x = min([0.25, *finite]) / 1.3, max([4.0, *finite]) * 1.3
            ax.set_xlim(lo_x, hi_x)
            ticks = [t for t in (0.01, 0.03, 0.1, 0.3, 1, 3, 10, 30, 100, 300)
                     if lo_x <= t <= hi_x]
            ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
            ax.xaxis.set_minor_locator(mticker.NullLocator())
        else:
            ax.set_xlim(0, 1)
            ax.set_xticks([0, 0.25, 0.5, 0.75, 1], ["0", ".25", ".5", ".75", "1"])
        ax.grid(True, axis="x", color="#e6e6e6", lw=0.6)
        ax.set_axisbelow(True)
        ax.tick_params(axis="y", length=0)
    sizes = {}
    for sex in sexes:
        r = d[d["sex"] == sex]
        sizes[sex] = (f"{sex}: {int(r['n'].max())} people at visit 1 "
                      f"({int(r['events'].max())} new diagnoses); "
                      f"{int(r['n_survival'].max())} over visits 1-3 "
                      f"({int(r['events_survival'].max())})")
    _forest_labels(fig, axes[0][0], y, labels, methods, sizes)
    return figure(fig, "forest plot: AUROC, C-index and risk ratio per method")


@styled
def linked_forest_plot(disc: pd.DataFrame, hr: pd.DataFrame | None, outcome: str,
                        horizon: str = "auroc_10y") -> Figure:
    """One row per method: C-index, time-dependent AUROC and the age-adjusted hazard ratio of
    the people outside Normal vs Normal, for one linked outcome; both sexes per panel."""

    d = disc[disc["outcome"] == outcome]
    h = hr[hr["outcome"] == outcome] if hr is not None and len(hr) else None
    if horizon not in d or d[horizon].isna().all():
        horizon = "auroc_5y"
    years = horizon.removeprefix("auroc_").removesuffix("y")
    sexes = sorted(d["sex"].unique())
    methods = ordered(d["method"].unique())
    labels = [short_name(m) + (" *" if is_reference(m) else "") for m in methods]
    what = outcome.replace("_", " ")
    panels = [(d, "c_index", "c_index_low", "c_index_high", f"C-index\ntime to {what}",
               "Harrell's C (0.5 = chance)", 0.5),
              (d, horizon, f"{horizon}_low", f"{horizon}_high",
               f"AUROC\n{what} within {years} years", "AUROC (0.5 = chance)", 0.5)]
    if h is not None:
        panels.append((h, "hr_outside", "hr_outside_low", "hr_outside_high",
                       "Hazard ratio, age-adjusted\noutside Normal vs Normal",
                       "hazard ratio, log scale\n(1 = no difference)", 1.0))
    fig, axes = new_figure(FULL_WIDTH, 0.22 * len(methods) + 1.45, ncols=len(panels),
                           sharey=True, squeeze=False, left=text_width(labels) + 0.12,
                           top=0.42, bottom=1.0, wspace=0.22, right=0.12)
    y = np.arange(len(methods))[::-1].astype(float)
    for ax, panel in zip(axes[0], panels, strict=True):
        _forest_panel(ax, panel, methods, sexes, y)
    sizes = {}
    for sex in sexes:
        r = d[d["sex"] == sex]
        sizes[sex] = (f"{sex}: {int(r['n'].max())} held-out people, "
                      f"{int(r['events'].max())} with {what}")
    _forest_labels(fig, axes[0][0], y, labels, methods, sizes)
    return figure(fig, f"forest plot: C-index, AUROC and hazard ratio per method, {what}")


def _forest_panel(ax, panel, methods: list[str], sexes: list[str], y: np.ndarray) -> None:
    """One panel of a forest plot: estimate and 95% interval per method and sex."""
    import matplotlib.ticker as mticker

    frame, col, lo_col, hi_col, title, xlabel, null = panel
    offsets = {s: (0.15 - 0.3 * k / max(1, len(sexes) - 1)) if len(sexes) > 1 else 0.0
               for k, s in enumerate(sexes)}
    for yy, m in zip(y, methods, strict=True):
        if is_reference(m):
            ax.axhspan(yy - 0.5, yy + 0.5, color="#efefef", zorder=0, lw=0)
    ax.axvline(null, color="black", lw=0.8, ls="--", zorder=1)
    finite = []
    for sex in sexes:
        f = frame[frame["sex"] == sex].drop_duplicates("method").set_index("method")
        f = f.reindex(methods)
        # age alone has no hazard ratio against itself: its empty cell is not "n/e"
        finite += _forest_points(ax, f, methods, y + offsets[sex], (col, lo_col, hi_col), null,
                                 sex, filled=sex == sexes[0],
                                 quiet=("age",) if null == 1.0 else ())
    ax.set_title(title, fontsize=8)
    ax.set_xlabel(xlabel)
    ax.set_ylim(-0.6, len(methods) - 0.4)
    if null == 1.0:
        ax.set_xscale("log")
        lo_x, hi_x = min([0.5, *finite]) / 1.2, max([2.0, *finite]) * 1.2
        ax.set_xlim(lo_x, hi_x)
        ticks = [t for t in (0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32) if lo_x <= t <= hi_x]
        ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
        ax.xaxis.set_minor_locator(mticker.NullLocator())
    else:
        ax.set_xlim(0.3, 1)
        ax.set_xticks([0.3, 0.5, 0.7, 0.9], [".3", ".5", ".7", ".9"])
    ax.grid(True, axis="x", color="#e6e6e6", lw=0.6)
    ax.set_axisbelow(True)
    ax.tick_params(axis="y", length=0)


def _forest_labels(fig, ax, y: np.ndarray, labels: list[str], methods: list[str],
                   sizes: dict[str, str]) -> None:
    """A forest plot's method names (coloured as their points, references grey) and its
    legend: one marker per sex, first filled, with ``sizes[sex]`` as its text."""
    from matplotlib.lines import Line2D

    ax.set_yticks(y, labels)
    for tick, m in zip(ax.get_yticklabels(), methods, strict=True):
        tick.set_color("#555555" if is_reference(m) else METHOD_COLORS.get(m, "#333333"))
    first = next(iter(sizes), None)
    handles = [Line2D([], [], marker=SEX_MARKERS.get(sex, "o"), ls="", color="#333333",
                      mfc="#333333" if sex == first else "white", label=text)
               for sex, text in sizes.items()]
    _fig_legend(fig, handles, [h.get_label() for h in handles], y=0.02, ncol=1, fontsize=7)


def _forest_points(ax, frame: pd.DataFrame, methods: list[str], y: np.ndarray,
                   cols: tuple[str, str, str], null: float, sex: str, *, filled: bool,
                   quiet: tuple[str, ...] = ()) -> list[float]:
    """One sex's estimate and 95% interval per method (``frame`` indexed by method) at rows
    ``y``; a method without an estimate is marked "n/e" unless it is a ``quiet`` reference.
    Returns the finite values drawn, for the axis limits."""
    finite: list[float] = []
    for yy, m in zip(y, methods, strict=True):
        v, lo, hi = (float(frame.at[m, c]) if c in frame else np.nan for c in cols)
        if not np.isfinite(v):
            if not (is_reference(m) and m in quiet):
                ax.text(null, yy, "n/e", fontsize=5.5, color="#777777", ha="center",
                        va="center", zorder=3,
                        bbox={"boxstyle": "square,pad=0.05", "fc": "white", "ec": "none"})
            continue
        color = METHOD_COLORS.get(m, "#333333")
        err = [[max(v - lo, 0)], [max(hi - v, 0)]] if np.isfinite(lo) else None
        ax.errorbar([v], [yy], xerr=err, fmt=SEX_MARKERS.get(sex, "o"), color=color, ms=3.6,
                    capsize=1.8, elinewidth=1.0, zorder=2, mfc=color if filled else "white",
                    mew=1.0)
        finite += [x for x in (v, lo, hi) if np.isfinite(x)]
    return finite


@styled
def cumulative_plot(curves: pd.DataFrame, sex: str, title: str,
                     ylabel: str = "new diagnosis (%)") -> Figure:
    """Cumulative share with a new diagnosis by group (1 - Kaplan-Meier, 95% band), one
    panel per method."""
    c = curves[curves["sex"] == sex]
    methods = ordered(c["method"].unique())
    nrows, ncols = _grid(len(methods))
    fig, axes = new_figure(FULL_WIDTH, 1.55 * nrows + 0.75, nrows=nrows, ncols=ncols,
                           sharex=True, sharey=True, squeeze=False, left=0.5, top=0.42,
                           bottom=0.4, wspace=0.12, hspace=0.3)
    ymax = 0.0
    for ax, m in zip(axes.ravel(), methods, strict=False):
        style_axes(ax)
        for g in GROUPS:
            k = c[(c["method"] == m) & (c["group"] == g)].sort_values("time_years")
            if "at_risk" in k:  # linked records on a time grid: stop where < 5 are followed
                k = k[k["at_risk"].fillna(0) >= 5]
            if k.empty:
                continue
            n = int(k["n"].iloc[0]) if "n" in k else None
            if n is not None:
                label = f"{g}: {int(k['events'].iloc[0])}/{n}"
            else:
                label = f"{g}: n={int(k['at_risk'].iloc[0])}" if "at_risk" in k else g
            t = k["time_years"].to_numpy(float)
            ax.step(t, 100 * k["cum_inc"].to_numpy(float), where="post",
                    color=GROUP_COLORS[g], lw=1.5, label=label)
            if n is None or n >= 5:
                ax.fill_between(t, 100 * k["low"].to_numpy(float),
                                100 * k["high"].to_numpy(float), step="post",
                                color=GROUP_COLORS[g], alpha=0.13, lw=0)
            ymax = max(ymax, 100 * float(np.nanmax(k["cum_inc"])))
        ax.set_title(short_name(m), color=METHOD_COLORS.get(m, "black"), fontsize=7.5, pad=2)
        ax.legend(loc="upper left", fontsize=6.2, handlelength=1.0, borderaxespad=0.2,
                  labelspacing=0.2)
    for ax in axes.ravel()[len(methods):]:
        ax.axis("off")
    for ax in axes[:, 0]:
        ax.set_ylabel(ylabel)
    for ax in axes[-1, :]:
        ax.set_xlabel("years since baseline")
    axes[0, 0].set_ylim(0, min(100, max(10.0, 1.7 * ymax)))
    fig.suptitle(title, fontsize=8.5, fontweight="bold", y=1 - 0.08 / fig.get_size_inches()[1],
                 va="top")
    return figure(fig, f"cumulative new diagnoses by group, {sex}")


@styled
def age_share_plot(rows: pd.DataFrame, mode: str = "calibrated") -> Figure:
    """% Lower Risk and % Higher Risk by age group, a line per method, a row per sex."""
    sub = rows[rows["mode"] == mode]
    sexes = sorted(sub["sex"].unique())
    methods = ordered(sub["method"].unique())
    ages = age_order(sub["age_group"].astype(str))
    n_leg = int(np.ceil(len(methods) / 5))
    fig, axes = new_figure(FULL_WIDTH, 1.85 * len(sexes) + 0.75 + 0.16 * n_leg,
                           nrows=max(1, len(sexes)), ncols=2, sharex=True, squeeze=False,
                           left=0.5, top=0.25, bottom=0.45 + 0.16 * n_leg, wspace=0.55,
                           hspace=0.35)
    tab = shares(sub, ["sex", "method", "age_group"])
    tab["age_group"] = tab["age_group"].astype(str)
    x = np.arange(len(ages))
    for i, sex in enumerate(sexes):
        for j, g in enumerate((LOWER_RISK, HIGHER_RISK)):
            ax = axes[i, j]
            style_axes(ax)
            for m in methods:
                t = tab[(tab["sex"] == sex) & (tab["method"] == m)].set_index("age_group")
                v = t.reindex(ages)[g].to_numpy(float)
                ax.plot(x, v, marker="o", ms=2.8, lw=1.2, color=METHOD_COLORS.get(m, "#333"),
                        ls=":" if is_reference(m) else "-", label=short_name(m))
            ax.set_title(f"{sex.capitalize()}: {g}", color=GROUP_COLORS[g], pad=3)
            ax.set_ylabel("% of the age group")
            ax.set_ylim(bottom=0)
    for ax in axes[-1]:
        ax.set_xticks(x, ages)
        ax.set_xlabel("age group (years)")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    _fig_legend(fig, handles, labels, y=0.02, ncol=5, fontsize=7)
    return figure(fig, "group shares by age group")


def _stacked_hist(ax, values: dict[str, np.ndarray], edges: np.ndarray) -> None:
    bottom = np.zeros(len(edges) - 1)
    for g in GROUPS:
        v = values.get(g)
        if v is None or not len(v):
            continue
        counts, _ = np.histogram(np.clip(v, edges[0], edges[-1]), bins=edges)
        ax.stairs(bottom + counts, edges, baseline=bottom, fill=True, color=GROUP_COLORS[g],
                  label=g)
        bottom = bottom + counts


@styled
def distance_plot(rows: pd.DataFrame, thresholds: pd.DataFrame, sex: str,
                   mode: str = "calibrated") -> Figure:
    """Stacked histogram of the score by group, one panel per method, bounds drawn.

    Mode ``calibrated``: the age-standardized score with the Normal (95%) and Lower Risk
    (99%) bounds, one value per method. Mode ``paper``: the distance over the age group's
    Normal upper bound (the intervals differ by age group), 1 = that bound.
    """
    import matplotlib.ticker as mticker

    sub = rows[(rows["sex"] == sex) & (rows["mode"] == mode)]
    methods = ordered(sub["method"].unique())
    nrows, ncols = _grid(len(methods))
    fig, axes = new_figure(FULL_WIDTH, 1.45 * nrows + 1.15, nrows=nrows, ncols=ncols,
                           squeeze=False, left=0.55, top=0.4, bottom=0.78, wspace=0.38,
                           hspace=0.42)
    th = thresholds[(thresholds["sex"] == sex) & (thresholds["mode"] == mode)]
    for ax, m in zip(axes.ravel(), methods, strict=False):
        style_axes(ax)
        r = sub[sub["method"] == m]
        if mode == "calibrated":
            x = r["score"].to_numpy(float)
            t = th[th["method"] == m]
            bounds = [(float(t["z_normal"].iloc[0]), "--", "Normal bound (95%)"),
                      (float(t["z_lower"].iloc[0]), ":", "Lower Risk bound (99%)")] \
                if len(t) and "z_normal" in t else []
        else:
            x = (r["distance"] / r["normal_high"].where(r["normal_high"] > 0)).to_numpy(float)
            bounds = [(1.0, "--", "Normal upper bound")]
        ok = np.isfinite(x)
        ax.set_title(short_name(m), color=METHOD_COLORS.get(m, "black"), fontsize=7.5, pad=2)
        if not ok.any():
            continue
        # a centile-read score has its bounds per person (risk_groups), not one z here
        bounds = [b for b in bounds if np.isfinite(b[0])]
        lo = float(np.percentile(x[ok], 0.2))
        hi = max([float(np.percentile(x[ok], 99.8)), *(b[0] * 1.08 for b in bounds)])
        edges = np.linspace(min(lo, 0.0) if mode == "paper" else lo, hi, 45)
        groups = r["group"].to_numpy(object)[ok]
        _stacked_hist(ax, {g: x[ok][groups == g] for g in GROUPS}, edges)
        for value, ls, label in bounds:
            ax.axvline(value, color="black", lw=0.9, ls=ls, label=label)
        ax.xaxis.set_major_locator(mticker.MaxNLocator(4))
    for ax in axes.ravel()[len(methods):]:
        ax.axis("off")
    for ax in axes[:, 0]:
        ax.set_ylabel("participants")
    xlabel = ("age-standardized score: (distance - healthy people's centre at that age) / "
              "their spread (values beyond the axis are in the last bin)" if mode == "calibrated"
              else "distance / the age group's Normal upper bound (values beyond the axis are "
                   "in the last bin)")
    h = fig.get_size_inches()[1]
    fig.text(0.5, 0.3 / h, xlabel, ha="center", va="bottom", fontsize=7.5)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    _fig_legend(fig, handles, labels, y=0.02, ncol=5, fontsize=7)
    fig.suptitle(f"{sex.capitalize()}, mode {mode}", fontsize=8.5, fontweight="bold",
                 y=1 - 0.06 / h, va="top")
    return figure(fig, f"distances {sex} {mode}")


@styled
def validation_plot(validation: pd.DataFrame, mode: str) -> Figure:
    """% with any new condition at visit 1 per group and method (Wilson 95% CI)."""
    v = validation[(validation["mode"] == mode) & (validation["condition"] == "any")]
    sexes = sorted(v["sex"].unique())
    fig, axes = new_figure(FULL_WIDTH, 2.0 * max(1, len(sexes)) + 0.55,
                           nrows=max(1, len(sexes)), squeeze=False, left=0.55, top=0.45,
                           bottom=0.42, hspace=0.75)
    for ax, sex in zip(axes[:, 0], sexes, strict=False):
        style_axes(ax)
        s = v[v["sex"] == sex]
        methods = ordered(s["method"].unique())
        x = np.arange(len(methods))
        for k, g in enumerate(GROUPS):
            r = s[s["group"] == g].set_index("method").reindex(methods)
            y = 100 * r["rate"].to_numpy(float)
            err = np.abs(100 * r[["rate_low", "rate_high"]].to_numpy(float).T - y)
            ax.bar(x + (k - 1) * 0.27, np.nan_to_num(y), 0.27, color=GROUP_COLORS[g], label=g,
                   yerr=np.nan_to_num(err), capsize=1.5, error_kw={"elinewidth": 0.7})
        ax.set_xticks(x, ["\n".join(textwrap.wrap(short_name(m), 12)) for m in methods],
                      fontsize=7)
        ax.set_ylabel("any new condition (%)")
        ax.set_title(f"{sex.capitalize()}, mode {mode}: new condition at visit 1, Wilson 95% CI",
                     pad=3)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    _fig_legend(fig, handles, labels, y=0.02, ncol=3, top=True)
    return figure(fig, f"validation {mode}")
