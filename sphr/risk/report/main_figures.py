"""The main report's figures, made to be printed: full axes on every panel, at most two
panels a figure, the colour-blind-safe group palette (:data:`sphr.report.GROUP_COLORS`, with
a line style per group so the groups stay apart in grey too).

* :func:`km_plot`: Kaplan-Meier risk by group, a panel per sex, numbers at risk below, no
  band for a group under :data:`BAND_MIN_N`;
* :func:`gain_plot`: the beyond-age gain dC per outcome (death first) and method, age alone
  as the line at 0;
* :func:`decision_plot`: net benefit against treat-all and treat-none (Vickers 2006).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sphr.report import (
    FULL_WIDTH,
    GROUP_COLORS,
    SEX_MARKERS,
    Figure,
    figure,
    new_figure,
    style_axes,
    styled,
    text_width,
)
from sphr.risk.intervals import GROUPS
from sphr.risk.report.frames import outcome_order
from sphr.risk.report.names import is_reference, ordered, short_name

#: the smallest group drawn with a confidence band (a band on fewer people is noise)
BAND_MIN_N = 20
#: one line style per group: the groups stay apart printed in grey
GROUP_STYLES: dict[str, str] = {"Normal": "-", "Lower Risk": "--", "Higher Risk": "-."}
#: years at which the numbers at risk are printed
AT_RISK_YEARS: tuple[float, ...] = (0, 2, 4, 6, 8, 10)
SEX_TITLES: dict[str, str] = {"female": "Women", "male": "Men"}


def _at_risk(t: np.ndarray, years: tuple[float, ...]) -> list[int]:
    return [int((t >= y).sum()) for y in years]


@styled
def km_plot(frame: pd.DataFrame, method: str, outcome: str, horizon: float = 10.0) -> Figure:
    """Kaplan-Meier risk of ``outcome`` by ``method``'s groups, a panel per sex, with the
    numbers still followed under each panel."""
    from sphr.survival import km_curve

    f = frame.loc[(frame["method"] == method) & (frame["outcome"] == outcome)]
    sexes = sorted(f["sex"].unique())
    # the at-risk rows sit 0.42 + 0.13 k axes heights below the axes (about 1.15 in for the
    # third group): the bottom margin holds all of them (it cut Higher Risk's row off)
    rows_h = 0.15 * (len(GROUPS) + 1)
    fig, axes = new_figure(FULL_WIDTH, 2.45 + rows_h, ncols=max(1, len(sexes)), squeeze=False,
                           left=0.95, right=0.15, top=0.3, bottom=0.6 + rows_h, wspace=1.15)
    what = outcome.replace("_", " ")
    for ax, sex in zip(axes[0], sexes, strict=False):
        style_axes(ax)
        top = 0.0
        for k, g in enumerate(GROUPS):
            d = f.loc[(f["sex"] == sex) & (f["group"] == g)]
            t, e = d["time_years"].to_numpy(float), d["event"].to_numpy(bool)
            if len(t):
                c = km_curve(t, e, min_at_risk=5)
                ax.step(c["time_years"], 100 * c["cum_inc"], where="post", lw=1.4,
                        color=GROUP_COLORS[g], ls=GROUP_STYLES[g], label=f"{g} (n={len(t):,})")
                if len(t) >= BAND_MIN_N:
                    ax.fill_between(c["time_years"], 100 * c["low"], 100 * c["high"],
                                    step="post", color=GROUP_COLORS[g], alpha=0.15, lw=0)
                top = max(top, 100 * float(np.nanmax(c["cum_inc"])))
            for x, n in zip(AT_RISK_YEARS, _at_risk(t, AT_RISK_YEARS), strict=True):
                ax.text(x, -0.42 - 0.13 * k, f"{n:,}", transform=ax.get_xaxis_transform(),
                        ha="center", va="top", fontsize=6.5, color=GROUP_COLORS[g])
            ax.text(-0.1, -0.42 - 0.13 * k, g, transform=ax.transAxes, ha="right", va="top",
                    fontsize=6.5, color=GROUP_COLORS[g])
        ax.text(-0.1, -0.42 + 0.13, "at risk", transform=ax.transAxes, ha="right", va="top",
                fontsize=6.5, color="#333333")
        ax.set_xlim(0, horizon)
        ax.set_xticks(AT_RISK_YEARS)
        ax.set_ylim(0, max(2.0, 1.15 * top))
        ax.set_xlabel("years since baseline", labelpad=1)
        ax.set_ylabel(f"{what} (%, Kaplan-Meier)")
        ax.set_title(f"{SEX_TITLES.get(sex, sex)}: {what} by group", pad=3)
        ax.legend(loc="upper left", fontsize=6.5, handlelength=2.2)
    return figure(fig, f"Kaplan-Meier {what} by group of {short_name(method)}, per sex")


def _gain_rows(gain: pd.DataFrame) -> list[tuple[str, str | None, str | None]]:
    """(label, outcome, method) from top to bottom: an outcome header, then its methods."""
    rows: list[tuple[str, str | None, str | None]] = []
    for outcome in outcome_order(gain["outcome"]):
        rows.append((outcome.replace("_", " "), outcome, None))
        methods = ordered(gain.loc[gain["outcome"] == outcome, "method"].unique())
        rows += [(short_name(m) + (" *" if is_reference(m) else ""), outcome, m)
                 for m in methods]
    return rows


@styled
def gain_plot(gain: pd.DataFrame) -> Figure:
    """dC with its 95% interval per outcome and method, a panel per sex; the line at 0 is
    age alone, references (*) shaded."""
    sexes = sorted(gain["sex"].unique())
    rows = _gain_rows(gain)
    labels = [r[0] for r in rows]
    y = np.arange(len(rows))[::-1].astype(float)
    fig, axes = new_figure(FULL_WIDTH, 0.118 * len(rows) + 0.75, ncols=max(1, len(sexes)),
                           squeeze=False, left=text_width(labels, 7) + 0.1, right=0.12,
                           top=0.3, bottom=0.45, wspace=text_width(labels, 7) + 0.25)
    for ax, sex in zip(axes[0], sexes, strict=False):
        g = gain.loc[gain["sex"] == sex].set_index(["outcome", "method"])
        ax.axvline(0, color="black", lw=0.8, ls="--", zorder=1)
        finite = [0.0]
        for yy, (_, outcome, m) in zip(y, rows, strict=True):
            if m is None:
                ax.axhline(yy - 0.5, color="#bbbbbb", lw=0.5)
                continue
            if is_reference(m):
                ax.axhspan(yy - 0.5, yy + 0.5, color="#efefef", zorder=0, lw=0)
            r = g.loc[(outcome, m)] if (outcome, m) in g.index else None
            if r is None or not np.isfinite(r["dc"]):
                ax.text(0, yy, "too few", fontsize=5.5, color="#777777", va="center",
                        ha="left")
                continue
            ax.errorbar([r["dc"]], [yy], xerr=[[max(r["dc"] - r["dc_low"], 0)],
                                              [max(r["dc_high"] - r["dc"], 0)]],
                        fmt=SEX_MARKERS.get(sex, "o"), color="#0072B2" if not is_reference(m)
                        else "#555555", ms=3.2, capsize=1.5, elinewidth=0.9)
            finite += [v for v in (r["dc_low"], r["dc_high"]) if np.isfinite(v)]
        lim = max(0.02, 1.1 * max(abs(v) for v in finite))
        ax.set_xlim(-lim, lim)
        ax.set_ylim(-0.6, len(rows) - 0.4)
        ax.set_yticks(y, labels)
        for tick, (_, _, m) in zip(ax.get_yticklabels(), rows, strict=True):
            tick.set_fontweight("bold" if m is None else "normal")
            tick.set_fontsize(7)
        ax.tick_params(axis="y", length=0)
        ax.grid(True, axis="x", color="#e6e6e6", lw=0.6)
        ax.set_xlabel("dC = C(age + score) - C(age)")
        ax.set_title(f"{SEX_TITLES.get(sex, sex)}: gain over age", pad=3)
    return figure(fig, "forest plot: gain in C over age per outcome and method")


@styled
def decision_plot(curves: pd.DataFrame, label: str, outcome: str) -> Figure:
    """Net benefit of the absolute risk against treat-all and treat-none, a panel per sex
    (``curves``: sex, threshold, model, treat_all)."""
    sexes = sorted(curves["sex"].unique())
    fig, axes = new_figure(FULL_WIDTH, 2.2, ncols=max(1, len(sexes)), squeeze=False,
                           left=0.7, right=0.15, top=0.3, bottom=0.45, wspace=0.75)
    for ax, sex in zip(axes[0], sexes, strict=False):
        style_axes(ax)
        c = curves.loc[curves["sex"] == sex]
        x = 100 * c["threshold"].to_numpy(float)
        ax.plot(x, c["model"], color="#0072B2", lw=1.5, label=label)
        ax.plot(x, c["treat_all"], color="#D55E00", lw=1.1, ls="--", label="treat all")
        ax.axhline(0, color="black", lw=0.9, ls=":", label="treat none")
        top = float(np.nanmax(np.r_[c["model"], c["treat_all"], 0.001]))
        ax.set_ylim(-0.25 * top, 1.15 * top)
        ax.set_xlim(0, x.max())
        ax.set_xlabel(f"threshold: predicted 10-year risk of {outcome.replace('_', ' ')} (%)")
        ax.set_ylabel("net benefit")
        ax.set_title(f"{SEX_TITLES.get(sex, sex)}: decision curve", pad=3)
        ax.legend(loc="upper right", fontsize=6.5)
    return figure(fig, f"decision curve of the 10-year risk of {outcome}")
