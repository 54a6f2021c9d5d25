"""The risk report people forward: ``report.html`` (self-contained) and ``report.pdf`` (A4).

Rendered from ``sphr/report/templates/risk.html.j2``; inline CSS, every figure a
PNG data URI, no network reference. Reading order (the reader first, the
method's bookkeeping last):

1. **Summary**: the cohort (n per sex, ages, export file and date, model
   version), the share of people in each group per sex, and the figure that
   answers "does Higher Risk develop more new disease than Normal, per method?"
   (a forest plot of AUROC, C-index and risk ratio with 95% CIs, references
   marked; or, when linked records are given, their cumulative incidence by
   group), with a paragraph generated from the numbers (:func:`summary_sentences`).
2. New diagnoses over the repeat visits (instances 1-3), by group, per sex.
3. Group shares by age group.
4. Distance distributions with the thresholds drawn.
5. Appendix (``<details>``, opened when printed): definitions, discrimination,
   calibration (held-out BFH in Normal), validation (Table 4), share tables,
   mode ``paper`` figures, thresholds.

:func:`write_report` also prints ``report.pdf`` with headless Chromium
(:func:`sphr.report.print_pdf`; skipped with one log line where there is none)
and writes ``report_summary.png``, the central figure, for the Dagster asset's
metadata. :func:`render_png` screenshots a report for tests and scripts.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sphr.io import write_bytes, write_text
from sphr.report import (
    FULL_WIDTH,
    GROUP_COLORS,
    METHOD_COLORS,
    SEX_MARKERS,
    Figure,
    figure,
    find_chromium,
    new_figure,
    print_pdf,
    render,
    render_png,
    style_axes,
    styled,
    table,
    text_width,
)
from sphr.risk.config import DISPLAY
from sphr.risk.curves import OUTCOME, cumulative_new_diagnosis, shares
from sphr.risk.intervals import GROUPS, HIGHER_RISK, LOWER_Q, LOWER_RISK, NORMAL, NORMAL_Q
from sphr.risk.paper import PAPER_TIME_CORRELATION, paper_cell
from sphr.risk.supervised import is_supervised
from sphr.risk.validation import higher_vs_normal, wide_table

__all__ = ["COLORS", "METHOD_ORDER", "REFERENCES", "find_chromium", "render_png",
           "summary_paragraph", "summary_sentences", "write_report"]

log = logging.getLogger(__name__)

#: every figure and table lists methods in this order: the distances, then the references
METHOD_ORDER: tuple[str, ...] = ("raw_euclidean", "mahalanobis", "homeostatic_dysregulation",
                                 "p0_euclidean", "deep_patient", "sphr", "sphr_age_line",
                                 "sphr_young", "sphr_joint", "phenoage",
                                 "supervised_xgboost", "age")
#: scores shown beside the distances for scale, not as peers: PhenoAge acceleration (what
#: researchers already use), the supervised ceilings (they see the outcome) and age alone
REFERENCES: frozenset[str] = frozenset({"phenoage", "supervised_xgboost", "age"})


def is_reference(method: str) -> bool:
    """A reference, not a peer of the distances: :data:`REFERENCES` and every supervised
    comparator (``supervised_death``, ...)."""
    return method in REFERENCES or is_supervised(method)
COLORS = GROUP_COLORS
#: figure labels: short enough for a panel, the tables keep the full names
SHORT: dict[str, str] = {"mahalanobis": "Mahalanobis", "supervised_xgboost": "Supervised ceiling",
                         "sphr_joint": "SPHR + markers",
                         "phenoage": "PhenoAge accel.", "homeostatic_dysregulation":
                         "Homeostatic dysreg."}


def _name(method: str) -> str:
    if method in DISPLAY:
        return DISPLAY[method]
    if is_supervised(method):
        return f"Supervised XGBoost: {method.removeprefix('supervised_').replace('_', ' ')} " \
               "(uses outcome)"
    return method


def _ordered(methods) -> list[str]:
    """The report's method order; supervised comparators of linked outcomes sit where the
    repeat-visit one does (before age alone), the rest at the end."""
    present = set(methods)
    order = []
    for m in METHOD_ORDER:
        if m == "supervised_xgboost":
            order += sorted(x for x in present if is_supervised(x) and x not in METHOD_ORDER)
        order.append(m)
    return [m for m in order if m in present] + sorted(present - set(order))


def _age_order(groups) -> list[str]:
    def start(g: str) -> float:
        try:
            return float(str(g).split("-")[0])
        except ValueError:
            return float("inf")

    return sorted(set(groups), key=start)


def _ci(v: float, lo: float, hi: float) -> str:
    return "-" if pd.isna(v) else (f"{v:.2f} [{lo:.2f}-{hi:.2f}]" if pd.notna(lo) else f"{v:.2f}")


def _span(values: pd.Series) -> str:
    lo, hi = 100 * values.min(), 100 * values.max()
    return f"{lo:.0f}%" if round(lo) == round(hi) else f"{lo:.0f}-{hi:.0f}%"


def _share_sentence(sex: str, rows: pd.DataFrame) -> str | None:
    r = rows.loc[(rows["sex"] == sex) & (rows["mode"] == "calibrated")
                 & ~rows["method"].map(is_reference).astype(bool)]
    if r.empty:
        return None
    frac = r.groupby("method")["group"].value_counts(normalize=True).unstack(fill_value=0.0)
    frac = frac.reindex(columns=list(GROUPS), fill_value=0.0)
    people = r.drop_duplicates("eid")
    text = (f"{sex.capitalize()} (n={len(people):,}, aged {people['age_years'].min():.0f}-"
            f"{people['age_years'].max():.0f}): {_span(frac[NORMAL])} Normal, "
            f"{_span(frac[LOWER_RISK])} Lower Risk, {_span(frac[HIGHER_RISK])} Higher Risk "
            "across methods")
    shipped = next((m for m in ("sphr_joint", "sphr") if m in frac.index), None)
    if shipped:
        s = frac.loc[shipped]
        text += (f" ({_short(shipped)} {100 * s[NORMAL]:.0f} / {100 * s[LOWER_RISK]:.0f} / "
                 f"{100 * s[HIGHER_RISK]:.0f}%)")
    return text + "."


def _heldout_sentence(sex: str, heldout: pd.DataFrame, named: bool = True) -> str | None:
    g = heldout[(heldout["mode"] == "calibrated") & (heldout["partition"] == "test")
                & (heldout["sex"] == sex)]
    if g.empty:
        return None
    lo, hi = g["normal_share"].min(), g["normal_share"].max()
    return (f"{sex.capitalize() + ': o' if named else 'O'}f the held-out bona fide healthy "
            f"(n={int(g['n'].max())}), {100 * lo:.0f}-{100 * hi:.0f}% land in Normal "
            "(target 95%).")


def _auroc_sentence(d: pd.DataFrame) -> str:
    events, n = int(d["events"].max()), int(d["n"].max())
    g = d.dropna(subset=["auroc"])
    peers = g[~g["method"].map(is_reference).astype(bool)]
    if peers.empty:
        return (f"At the first repeat visit {events} of {n} held-out people had a new "
                "diagnosis: too few for an AUROC.")
    best = peers.loc[peers["auroc"].idxmax()]
    above = [_name(m) for m in _ordered(peers.loc[peers["auroc_low"] > 0.5, "method"])]
    text = (f"At the first repeat visit (n={int(best['n'])}, {int(best['events'])} new "
            f"diagnoses) the highest AUROC is {_name(best['method'])} at {best['auroc']:.2f} "
            f"(95% CI {best['auroc_low']:.2f}-{best['auroc_high']:.2f}). ")
    text += (("Methods whose interval lies above chance: " + ", ".join(above) + ".")
             if above else "No method's 95% interval lies above chance (0.5).")
    return text


def _c_index_sentence(d: pd.DataFrame) -> str | None:
    if "c_index" not in d:
        return None
    g = d[~d["method"].map(is_reference).astype(bool)].dropna(subset=["c_index"])
    if g.empty:
        return None
    best = g.loc[g["c_index"].idxmax()]
    above = [_name(m) for m in _ordered(g.loc[g["c_index_low"] > 0.5, "method"])]
    return (f"Over visits 1-3 ({int(best['n_survival'])} people, "
            f"{int(best['events_survival'])} new diagnoses) the best C-index is "
            f"{_name(best['method'])} {best['c_index']:.2f} "
            f"({best['c_index_low']:.2f}-{best['c_index_high']:.2f}); "
            + (f"above chance: {', '.join(above)}." if above else "none above chance."))


def _risk_ratio_sentence(d: pd.DataFrame) -> str | None:
    if "rr_higher_vs_normal" not in d:
        return None
    g = d[~d["method"].map(is_reference).astype(bool)]
    est = g.dropna(subset=["rr_higher_vs_normal"])
    if est.empty:
        return ("Nobody with a repeat visit was in Higher Risk under any method, so whether "
                "Higher Risk develops more new disease than Normal cannot be told yet.")
    est = est.set_index("method").loc[_ordered(est["method"])].reset_index()
    parts = [f"{_name(r.method)} {r.rr_higher_vs_normal:.2f} ({r.rr_low:.2f}-"
             f"{r.rr_high:.2f}, {int(r.n_higher)} in Higher Risk)" for r in est.itertuples()]
    above = [_name(m) for m in est.loc[est["rr_low"] > 1, "method"]]
    text = "Risk ratio Higher Risk vs Normal: " + "; ".join(parts) + ", "
    text += (f"more new disease in Higher Risk beyond chance with {', '.join(above)}."
             if above else "no interval above 1.")
    if len(g) > len(est):
        text += f" The other {len(g) - len(est)} method(s) had nobody in Higher Risk."
    return text


def _reference_sentence(d: pd.DataFrame) -> str | None:
    parts = []
    for m in ("supervised_xgboost", "phenoage", "age"):
        r = d[d["method"] == m]
        if r.empty:
            continue
        r = r.iloc[0]
        for col, what in (("auroc", "AUROC"), ("c_index", "C-index")):
            if col in r and pd.notna(r[col]):
                parts.append(f"{SHORT.get(m, _name(m)).lower() if m != 'phenoage' else _name(m)} "
                             f"{what} {r[col]:.2f}")
                break
    return ("For scale: " + ", ".join(parts) + ".") if parts else None


def _linked_sentence(sex: str, linked: dict[str, pd.DataFrame] | None) -> str | None:
    """C-index and age-adjusted hazard ratio on the main linked outcome (:func:`main_outcome`)."""
    outcome = main_outcome(linked)
    if outcome is None or linked.get("discrimination") is None:
        return None
    disc = linked["discrimination"]
    d = disc[(disc["sex"] == sex) & (disc["outcome"] == outcome)].dropna(subset=["c_index"])
    if d.empty:
        return None
    what = outcome.replace("_", " ")
    peers = d[~d["method"].map(is_reference).astype(bool)]
    text = (f"{what.capitalize()} (linked records; {int(d['n'].max()):,} held-out people, "
            f"{int(d['events'].max())} events): ")
    if len(peers):
        best = peers.loc[peers["c_index"].idxmax()]
        text += (f"the best C-index among the distances is {_name(best['method'])} "
                 f"{best['c_index']:.2f} ({best['c_index_low']:.2f}-{best['c_index_high']:.2f})")
    said = {"age": "age alone", "phenoage": "PhenoAge acceleration"}
    refs = [f"{said.get(r.method, 'the supervised comparator (it sees the outcome)')} "
            f"{r.c_index:.2f}" for r in d[d["method"].map(is_reference).astype(bool)].itertuples()]
    if refs:
        text += "; for scale, " + ", ".join(refs)
    hr = (linked.get("hazard_ratio") if linked else None)
    if hr is not None and len(hr) and "hr_outside" in hr:
        g = hr[(hr["sex"] == sex) & (hr["outcome"] == outcome)
               & ~hr["method"].map(is_reference).astype(bool)].dropna(subset=["hr_outside"])
        above = [_name(m) for m in _ordered(g.loc[g["hr_outside_low"] > 1, "method"])]
        text += (". Outside Normal vs Normal, age-adjusted hazard ratio above 1 for "
                 + (", ".join(above) if above else "no distance method"))
    return text + "."


def _validated(disc: pd.DataFrame) -> bool:
    """Whether anybody was validated at a repeat visit (people, or people over visits 1-3)."""
    cols = [c for c in ("n", "n_survival") if c in disc.columns]
    return bool((disc[cols].fillna(0).to_numpy() > 0).any()) if cols else False


def summary_sentences(discrimination: pd.DataFrame | None, heldout: pd.DataFrame,
                      outcome: str = OUTCOME, rows: pd.DataFrame | None = None,
                      linked: dict[str, pd.DataFrame] | None = None) -> list[str]:
    """Plain-language reading of the numbers, per sex (generated, never hand-written claims).

    ``rows`` (risk_groups) adds the group shares; ``discrimination`` the AUROC, C-index,
    risk ratio and reference sentences; ``heldout`` the calibration check.
    """
    disc = None
    if discrimination is not None and len(discrimination):
        disc = discrimination[discrimination["outcome"] == outcome]
    sexes = []
    for frame in (rows, heldout, disc):
        if frame is not None and len(frame):
            sexes += [s for s in frame["sex"].unique() if s not in sexes]
    out: list[str] = []
    for sex in sorted(sexes):
        mine: list[str | None] = []
        if rows is not None and len(rows):
            mine.append(_share_sentence(sex, rows))
        mine.append(_heldout_sentence(sex, heldout, named=not mine or mine[0] is None))
        mine.append(_linked_sentence(sex, linked))
        d = disc[(disc["sex"] == sex) & (disc["method"] != "age")] if disc is not None else None
        # nobody validated at a repeat visit (a cohort without one): nothing to say of it
        if d is not None and len(d) and _validated(d):
            mine += [_auroc_sentence(d), _c_index_sentence(d), _risk_ratio_sentence(d),
                     _reference_sentence(disc[disc["sex"] == sex])]
        mine_ = [m for m in mine if m]
        if mine_ and not mine_[0].startswith(sex.capitalize()):
            mine_[0] = f"{sex.capitalize()}: {mine_[0]}"
        out += mine_
    return out


def summary_paragraph(discrimination: pd.DataFrame | None, heldout: pd.DataFrame,
                      rows: pd.DataFrame | None = None, outcome: str = OUTCOME,
                      linked: dict[str, pd.DataFrame] | None = None) -> str:
    """The summary's one paragraph: :func:`summary_sentences` joined."""
    return " ".join(summary_sentences(discrimination, heldout, outcome, rows=rows,
                                      linked=linked))


# ---------------------------------------------------------------- figures

def _short(method: str) -> str:
    if method not in SHORT and is_supervised(method):
        return "Supervised: " + method.removeprefix("supervised_").replace("_", " ")
    return SHORT.get(method, _name(method))


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
def _share_plot(rows: pd.DataFrame, mode: str) -> Figure:
    """Stacked bars: % of participants in each group, one bar per method, a panel per sex."""
    sub = rows[rows["mode"] == mode]
    sexes = sorted(sub["sex"].unique())
    methods = _ordered(sub["method"].unique())
    labels = [_short(m) for m in methods]
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
def _forest_plot(disc: pd.DataFrame, outcome: str = OUTCOME) -> Figure:
    """One row per method; AUROC (visit 1), C-index (visits 1-3) and risk ratio Higher vs
    Normal with 95% CIs; both sexes in each panel (marker shape), references shaded."""
    import matplotlib.ticker as mticker

    d = disc[disc["outcome"] == outcome]
    sexes = sorted(d["sex"].unique())
    methods = _ordered(d["method"].unique())
    labels = [_short(m) + (" *" if is_reference(m) else "") for m in methods]
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


def main_outcome(linked: dict[str, pd.DataFrame] | None) -> str | None:
    """The linked outcome the summary shows: the one with the most events among the
    validated people (both sexes), so that a cohort followed for death shows death."""
    disc = (linked or {}).get("discrimination")
    if disc is None or disc.empty:
        curves = (linked or {}).get("cumulative_incidence")
        return None if curves is None or curves.empty else str(curves["outcome"].iloc[0])
    events = disc.groupby(["outcome", "sex"])["events"].max().groupby("outcome").sum()
    return str(events.idxmax()) if events.max() > 0 else None


@styled
def _linked_forest_plot(disc: pd.DataFrame, hr: pd.DataFrame | None, outcome: str,
                        horizon: str = "auroc_10y") -> Figure:
    """One row per method: C-index, time-dependent AUROC and the age-adjusted hazard ratio of
    the people outside Normal vs Normal, for one linked outcome; both sexes per panel."""

    d = disc[disc["outcome"] == outcome]
    h = hr[hr["outcome"] == outcome] if hr is not None and len(hr) else None
    if horizon not in d or d[horizon].isna().all():
        horizon = "auroc_5y"
    years = horizon.removeprefix("auroc_").removesuffix("y")
    sexes = sorted(d["sex"].unique())
    methods = _ordered(d["method"].unique())
    labels = [_short(m) + (" *" if is_reference(m) else "") for m in methods]
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
        sizes[sex] = f"{sex}: {int(r['n'].max())} held-out people, {int(r['events'].max())} with {what}"
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
def _cumulative_plot(curves: pd.DataFrame, sex: str, title: str,
                     ylabel: str = "new diagnosis (%)") -> Figure:
    """Cumulative share with a new diagnosis by group (1 - Kaplan-Meier, 95% band), one
    panel per method."""
    c = curves[curves["sex"] == sex]
    methods = _ordered(c["method"].unique())
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
        ax.set_title(_short(m), color=METHOD_COLORS.get(m, "black"), fontsize=7.5, pad=2)
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
def _age_share_plot(rows: pd.DataFrame, mode: str = "calibrated") -> Figure:
    """% Lower Risk and % Higher Risk by age group, a line per method, a row per sex."""
    sub = rows[rows["mode"] == mode]
    sexes = sorted(sub["sex"].unique())
    methods = _ordered(sub["method"].unique())
    ages = _age_order(sub["age_group"].astype(str))
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
                        ls=":" if is_reference(m) else "-", label=_short(m))
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
def _distance_plot(rows: pd.DataFrame, thresholds: pd.DataFrame, sex: str,
                   mode: str = "calibrated") -> Figure:
    """Stacked histogram of the score by group, one panel per method, bounds drawn.

    Mode ``calibrated``: the age-standardized score with the Normal (95%) and Lower Risk
    (99%) bounds, one value per method. Mode ``paper``: the distance over the age group's
    Normal upper bound (the intervals differ by age group), 1 = that bound.
    """
    import matplotlib.ticker as mticker

    sub = rows[(rows["sex"] == sex) & (rows["mode"] == mode)]
    methods = _ordered(sub["method"].unique())
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
        ax.set_title(_short(m), color=METHOD_COLORS.get(m, "black"), fontsize=7.5, pad=2)
        if not ok.any():
            continue
        lo = float(np.percentile(x[ok], 0.2))
        hi = max(float(np.percentile(x[ok], 99.8)), *(b[0] * 1.08 for b in bounds))
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
    xlabel = ("age-standardized score: (distance - BFH median) / IQR of the age group "
              "(values beyond the axis are in the last bin)" if mode == "calibrated"
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
def _validation_plot(validation: pd.DataFrame, mode: str) -> Figure:
    """% with any new condition at visit 1 per group and method (Wilson 95% CI)."""
    v = validation[(validation["mode"] == mode) & (validation["condition"] == "any")]
    sexes = sorted(v["sex"].unique())
    fig, axes = new_figure(FULL_WIDTH, 2.0 * max(1, len(sexes)) + 0.55,
                           nrows=max(1, len(sexes)), squeeze=False, left=0.55, top=0.45,
                           bottom=0.42, hspace=0.75)
    for ax, sex in zip(axes[:, 0], sexes, strict=False):
        style_axes(ax)
        s = v[v["sex"] == sex]
        methods = _ordered(s["method"].unique())
        x = np.arange(len(methods))
        for k, g in enumerate(GROUPS):
            r = s[s["group"] == g].set_index("method").reindex(methods)
            y = 100 * r["rate"].to_numpy(float)
            err = np.abs(100 * r[["rate_low", "rate_high"]].to_numpy(float).T - y)
            ax.bar(x + (k - 1) * 0.27, np.nan_to_num(y), 0.27, color=GROUP_COLORS[g], label=g,
                   yerr=np.nan_to_num(err), capsize=1.5, error_kw={"elinewidth": 0.7})
        ax.set_xticks(x, ["\n".join(textwrap.wrap(_short(m), 12)) for m in methods],
                      fontsize=7)
        ax.set_ylabel("any new condition (%)")
        ax.set_title(f"{sex.capitalize()}, mode {mode}: new condition at visit 1, Wilson 95% CI",
                     pad=3)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    _fig_legend(fig, handles, labels, y=0.02, ncol=3, top=True)
    return figure(fig, f"validation {mode}")


# ---------------------------------------------------------------- tables and text


def _definitions(summary: dict[str, Any]) -> str:
    n_lo, n_hi = NORMAL_Q
    l_lo, l_hi = LOWER_Q
    return f"""<ul class="defs">
<li><b>Health distance</b> s(p) = ||G(p) - r<sub>g</sub>||, Euclidean in the space of the method's
representation G, with r<sub>g</sub> = G(P50(B<sub>g</sub>)): the element-wise median of the bona fide
healthy (BFH) training participants of the participant's sex and age group g (real rows only,
never augmented or test rows). Features are the per-sex quantile-normalized values.</li>
<li><b>Methods</b>: Euclidean (raw) = G identity on all normalized features; Mahalanobis =
Euclidean after whitening with the Ledoit-Wolf covariance of the sex's BFH training rows; P0 =
identity on the normalized P0 markers (cholesterol, HDL, LDL, triglycerides, glucose, HbA1c, CRP);
DeepPatient = the fitted stacked denoising autoencoder; SPHR = the NPLB-trained network.</li>
<li><b>Mode <code>paper</code></b> (Appendix B, Eq. A.4 as written): Normal interval
N = [d(G(P{n_lo}), r), d(G(P{n_hi}), r)], Lower Risk interval LR = [d(G(P{l_lo:g}), r),
d(G(P{l_hi:g}), r)], P<sub>q</sub> the element-wise q-th percentile vector of B<sub>g</sub>.</li>
<li><b>Mode <code>calibrated</code></b> (default): the score is the distance standardized per age
group among the training BFH (median and IQR); its bounds are one-sided split-conformal bounds from
the <i>calibration</i> BFH, real participants set aside before any fit: Normal if the score is at
most the 95% bound, Lower Risk up to the 99% bound, Higher Risk beyond. A person closer to healthy
than most healthy people is Normal. With fewer than 99 calibration BFH the 99% bound is a
log-normal prediction bound (column "bound_method" of the thresholds).</li>
<li><b>Groups in mode <code>paper</code></b> (Eq. A.5, closed intervals): Normal if s in N; Lower
Risk if s in LR but not in N; Higher Risk otherwise. Two-sided as written: a participant
<i>closer</i> to the reference than N's lower bound is not Normal (column "closer than Normal
%").</li>
<li><b>Homeostatic dysregulation</b>: Mahalanobis distance to one young reference (training BFH
aged at most 50, all features but age). <b>PhenoAge acceleration</b>: PhenoAge (Levine 2018) minus
its value predicted from age by a line fitted on the training partition. <b>Supervised
XGBoost</b>: cross-fitted prediction of a new diagnosis; it uses the outcome, a ceiling not a
peer.</li>
<li><b>Repairs</b>: an interval whose lower end exceeds its upper end is replaced by [min, max]
("normal_swapped" / "lower_swapped"); LR is widened to the hull of N and LR so that N &sube; LR
("lower_widened").</li>
<li><b>Age groups</b>: an age group with fewer than {summary.get('min_group_size', 10)} real BFH
training members borrows its neighbouring groups' members (nearest first), column
"pooled_groups". Ages outside every group join the nearest group.</li>
<li><b>Validation population</b>: apparently healthy participants (incl. BFH) of the
<code>test</code> partition, whom no fit has seen, with a repeat visit; a new diagnosis =
positive at a repeat visit and negative at baseline (self-report). AUROC: first repeat visit
(instance 1); C-index and the cumulative curves: time to the first visit reporting one
(instances 1-3), censored at the last visit with a known answer. Intervals: participant
bootstrap (AUROC, C-index), Katz (risk ratio), Greenwood log-log (curves), Wilson (shares);
Higher-vs-Normal p-values are Holm-adjusted over the whole table.</li>
</ul>"""


def _discrimination_compact(disc: pd.DataFrame, outcome: str = OUTCOME) -> pd.DataFrame:
    d = disc[disc["outcome"] == outcome].copy()
    d["_o"] = d["method"].map({m: i for i, m in enumerate(_ordered(d["method"].unique()))})
    d = d.sort_values(["sex", "_o"])
    return pd.DataFrame({
        "sex": d["sex"], "method": [_name(m) for m in d["method"]],
        "n / events (visit 1)": [f"{r.n} / {r.events}" for r in d.itertuples()],
        "AUROC [95% CI]": [_ci(r.auroc, r.auroc_low, r.auroc_high) for r in d.itertuples()],
        "n / events (visits 1-3)": [f"{r.n_survival} / {r.events_survival}"
                                    for r in d.itertuples()],
        "C-index [95% CI]": [_ci(r.c_index, r.c_index_low, r.c_index_high)
                             for r in d.itertuples()],
        "AUROC - raw [95% CI], Holm p": [
            "-" if pd.isna(r.auroc_minus_raw) else
            f"{_ci(r.auroc_minus_raw, r.diff_low, r.diff_high)}, p={r.p_diff_holm:.2g}"
            for r in d.itertuples()],
        "risk ratio HR vs N [95% CI]": [_ci(r.rr_higher_vs_normal, r.rr_low, r.rr_high)
                                        for r in d.itertuples()],
        "n Higher / Normal": [f"{r.n_higher} / {r.n_normal}" for r in d.itertuples()]})


def _heldout_compact(heldout: pd.DataFrame) -> pd.DataFrame:
    h = heldout[heldout["partition"] == "test"]
    cell = h.assign(cell=[f"{100 * r.normal_share:.1f}% [{100 * r.low:.1f}-{100 * r.high:.1f}] "
                          f"n={r.n}" for r in h.itertuples()])
    wide = cell.pivot_table(index="method", columns=["mode", "sex"], values="cell",
                            aggfunc="first")
    wide = wide.reindex(_ordered(wide.index))
    wide.index = [_name(m) for m in wide.index]
    wide.columns = [f"{sex}, {mode}" for mode, sex in wide.columns]
    return wide.reset_index().rename(columns={"index": "method"})


def _cohort_table(rows: pd.DataFrame, discrimination: pd.DataFrame | None,
                  linked: dict[str, pd.DataFrame] | None = None) -> pd.DataFrame:
    first = rows.drop_duplicates(["sex", "eid"])
    out = first.groupby("sex").agg(
        participants=("eid", "size"),
        ages=("age_years", lambda a: f"{a.min():.0f}-{a.max():.0f}"),
        train=("partition", lambda p: int((p == "train").sum())),
        calibration=("partition", lambda p: int((p == "calibration").sum())),
        test=("partition", lambda p: int((p == "test").sum())),
        bfh=("label", lambda v: int((v == 2).sum()))).reset_index()
    out = out.rename(columns={"ages": "age range (years)", "bfh": "bona fide healthy",
                              "test": "test (held out)"})
    if discrimination is not None and len(discrimination):
        d = discrimination[discrimination["outcome"] == OUTCOME].groupby("sex")
        out["validated (repeat visit)"] = out["sex"].map(d["n_survival"].max()).fillna(0)
        out["new diagnoses"] = out["sex"].map(d["events_survival"].max()).fillna(0)
        out = out.astype({"validated (repeat visit)": int, "new diagnoses": int})
        if not out["validated (repeat visit)"].any():  # no repeat visits: nothing to say
            out = out.drop(columns=["validated (repeat visit)", "new diagnoses"])
    outcome = main_outcome(linked)
    if outcome is not None and linked.get("discrimination") is not None:
        d = linked["discrimination"]
        d = d[d["outcome"] == outcome].groupby("sex")
        what = outcome.replace("_", " ")
        out[f"test with {what} records"] = out["sex"].map(d["n"].max()).fillna(0).astype(int)
        out[f"{what} events"] = out["sex"].map(d["events"].max()).fillna(0).astype(int)
    return out


def _relative(text: str, run: str) -> str:
    """``text`` with the run folder's absolute path written relative to it: a forwarded
    report does not show where it was made."""
    if not run:
        return text
    for root in {str(Path(run)), str(Path(run).resolve())}:
        text = text.replace(root + "/", "").replace(root, ".")
    return text


def _unscored_table(summary: dict[str, Any]) -> pd.DataFrame:
    """Every method not computed, or not for everyone: sex, method, people left unscored."""
    records = []
    for key, v in summary.get("unscored", {}).items():
        sex, method = key.split("/", 1)
        records.append({"sex": sex, "method": _name(method),
                        "unscored": f"{v['n']:,} of {v['of']:,}"
                                    + (" (everyone)" if v["n"] == v["of"] else ""),
                        "reason": _relative(str(v["reason"]), str(summary.get("run", "")))})
    return pd.DataFrame.from_records(records, columns=["sex", "method", "unscored", "reason"])


def _provenance(path: Path, summary: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, value) lines: export file and date, model version, run, methods, generated."""
    items: list[tuple[str, str]] = []
    ingest = Path(summary.get("run", ".")) / "ingest" / "ingest_report.json"
    if ingest.exists():
        info = json.loads(ingest.read_text())
        source = Path(str(info.get("source", "")))
        stamp = source if source.exists() else ingest
        date = dt.datetime.fromtimestamp(stamp.stat().st_mtime).strftime("%Y-%m-%d")
        n = info.get("participants")
        items.append(("export", f"{source.name} ({info.get('format', '?')}"
                                + (f", {n:,} participants" if isinstance(n, int) else "")
                                + f"), file dated {date}"))
    spec = path.parent / "model" / "risk_model.json"
    version = json.loads(spec.read_text()).get("version", "?") if spec.exists() else "?"
    settings = _settings_line(Path(summary.get("run", ".")))
    if settings:
        items.append(("settings", settings))
    items.append(("model version", f"{version} (model/risk_model.json); run folder "
                                   f"{Path(str(summary.get('run', ''))).name}; report generated "
                                   f"{dt.datetime.now():%Y-%m-%d %H:%M}"))
    return items


def _settings_line(run: Path) -> str | None:
    """Which profile and settings ran (``RUN/run_settings.json``, written by the pipeline's
    main command); None when the stages were run one by one."""
    path = run / "run_settings.json"
    if not path.exists():
        return None
    info = json.loads(path.read_text())
    parts = [f"profile {info.get('profile', '?')}"]
    for key in ("outcomes", "ranges", "config_file"):
        if info.get(key):
            parts.append(f"{key.replace('_', ' ')} {Path(str(info[key])).name}")
    risk = (info.get("stages") or {}).get("risk") or {}
    if risk.get("distance_space"):
        parts.append(f"distance space {risk['distance_space']}")
    for key in ("losses", "retrieval"):
        if key in info:
            parts.append(f"{'loss comparison' if key == 'losses' else key} "
                         f"{'on' if info[key] else 'off'}")
    return "; ".join(parts) + " (run_settings.json)"


def _age_table(rows: pd.DataFrame, mode: str = "calibrated") -> pd.DataFrame:
    """Rows sex x method, a column per age group: "Normal / Lower / Higher" percent."""
    sub = rows[rows["mode"] == mode]
    tab = shares(sub, ["sex", "method", "age_group"])
    tab["cell"] = [f"{r[NORMAL]:.0f} / {r[LOWER_RISK]:.0f} / {r[HIGHER_RISK]:.0f} (n={r['n']})"
                   for _, r in tab.iterrows()]
    wide = tab.pivot_table(index=["sex", "method"], columns="age_group", values="cell",
                           aggfunc="first")
    wide = wide[[c for c in _age_order(wide.columns.astype(str)) if c in wide.columns]]
    wide.columns = [str(c) for c in wide.columns]
    wide = wide.reset_index()
    wide["_o"] = wide["method"].map({m: i for i, m in enumerate(_ordered(wide["method"].unique()))})
    wide = wide.sort_values(["sex", "_o"]).drop(columns="_o")
    wide["method"] = wide["method"].map(_name)
    return wide


def _thresholds_tables(thresholds: pd.DataFrame) -> list[tuple[str, str]]:
    out = []
    cal = thresholds[thresholds["mode"] == "calibrated"]
    if len(cal):
        g = cal.groupby(["sex", "method"], sort=False)
        t = g.agg(n_calibration_bfh=("n_calibration_bfh", "first"),
                  z_normal=("z_normal", "first"), z_lower=("z_lower", "first"),
                  bound_method=("bound_method", "first"),
                  normal_high_min=("normal_high", "min"), normal_high_max=("normal_high", "max"),
                  lower_high_min=("lower_high", "min"), lower_high_max=("lower_high", "max"),
                  ).reset_index()
        t["method"] = t["method"].map(_name)
        out.append(("Mode calibrated: one bound per sex and method on the standardized score "
                    "(z); the distance bounds it implies range over the age groups (min-max).",
                    table(t, "{:.3f}")))
    paper = thresholds[thresholds["mode"] == "paper"]
    if len(paper):
        cols = [c for c in ("sex", "method", "age_group", "n_bfh", "n_reference", "pooled_groups",
                            "normal_low", "normal_high", "lower_low", "lower_high", "repairs")
                if c in paper]
        t = paper[cols].assign(method=paper["method"].map(_name))
        out.append(("Mode paper: the intervals per sex, method and age group.",
                    table(t, "{:.3f}")))
    return out


# ---------------------------------------------------------------- the report


def _read_followup(followup: pd.DataFrame | str | Path | None) -> pd.DataFrame | None:
    if followup is None or isinstance(followup, pd.DataFrame):
        return followup
    path = Path(followup)
    return pd.read_parquet(path) if path.exists() else None


def _central(linked: dict[str, pd.DataFrame] | None, sexes: list[str]
             ) -> tuple[list[Figure], str | None]:
    """The central figures, the cumulative incidence by group of the linked outcome with the
    most events (one per sex), and that outcome (None without linked records)."""
    outcome = main_outcome(linked)
    linked_ci = (linked or {}).get("cumulative_incidence")
    if outcome is None or linked_ci is None or not len(linked_ci):
        return [], outcome
    lc = linked_ci[linked_ci["outcome"] == outcome]
    what = outcome.replace("_", " ")
    return [_cumulative_plot(lc, sex, f"{sex.capitalize()}: cumulative incidence of {what} "
                                      "(linked records) by group",
                             ylabel="cumulative incidence (%)")
            for sex in sexes if (lc["sex"] == sex).any()], outcome


def _followup_figures(rows: pd.DataFrame, fu: pd.DataFrame | None, sexes: list[str]
                      ) -> list[Figure]:
    """The share with a new diagnosis over the repeat visits by group, one per sex."""
    curves = cumulative_new_diagnosis(rows, fu) if fu is not None else None
    if curves is None or curves.empty:
        return []
    return [_cumulative_plot(curves, sex, f"{sex.capitalize()}: share with a new diagnosis "
                                          "(self-reported at visits 1-3) by group, mode calibrated")
            for sex in sexes if (curves["sex"] == sex).any()]


def _validation_section(validation: pd.DataFrame | None, correlation: pd.DataFrame | None,
                        modes: list[str]) -> dict[str, Any] | None:
    """Table 4's shape beside the paper's, Higher Risk vs Normal and the time correlations."""
    if validation is None or not len(validation):
        return None
    wide = wide_table(validation)
    wide["paper N / LR / HR"] = [" / ".join(paper_cell(r.sex, r.method, r.measure, g) or "-"
                                           for g in GROUPS) for r in wide.itertuples()]
    wide["method"] = wide["method"].map(_name)
    return {"figs": [_validation_plot(validation, m) for m in modes],
            "wide": table(wide), "hvn": table(higher_vs_normal(validation)),
            "correlation": table(correlation) if correlation is not None else None,
            "paper_r": ", ".join(f"{k} r={r} (p={p})"
                                 for k, (r, p) in PAPER_TIME_CORRELATION.items())}


def _appendix(rows: pd.DataFrame, thresholds: pd.DataFrame, summary: dict[str, Any],
              heldout: pd.DataFrame, discrimination: pd.DataFrame | None, has_disc: bool,
              sexes: list[str], modes: list[str]) -> dict[str, Any]:
    """The appendix's definitions, tables and the paper mode's figures."""
    return {
        "definitions": _definitions(summary),
        "disc_table": table(_discrimination_compact(discrimination)) if has_disc else None,
        "heldout_compact": table(_heldout_compact(heldout)) if len(heldout) else None,
        "heldout_full": table(heldout, "{:.3f}") if len(heldout) else None,
        "shares_table": table(shares(rows, ["sex", "method", "mode"])),
        "age_table": table(_age_table(rows)) if "calibrated" in modes else None,
        "paper_share_fig": _share_plot(rows, "paper") if "paper" in modes else None,
        "paper_distance_figs": [_distance_plot(rows, thresholds, sex, "paper")
                                for sex in sexes if "paper" in modes],
        "thresholds": _thresholds_tables(thresholds),
        "higher_rows": int((rows["group"] == HIGHER_RISK).sum()),
    }


def write_report(path: Path, *, rows: pd.DataFrame, thresholds: pd.DataFrame,
                 validation: pd.DataFrame | None, correlation: pd.DataFrame | None,
                 summary: dict[str, Any], heldout: pd.DataFrame | None = None,
                 discrimination: pd.DataFrame | None = None,
                 followup: pd.DataFrame | str | Path | None = None,
                 linked: dict[str, pd.DataFrame] | None = None,
                 absolute: tuple[pd.DataFrame | None, ...] | None = None,
                 pdf: bool = True) -> Path:
    """Write ``report.html`` (and ``report.pdf`` next to it, and ``report_summary.png``, the
    central figure).

    ``followup``: ``RUN/ingest/followup.parquet`` (frame or path) for the cumulative
    new-diagnosis curves over the repeat visits; without it that section says so.
    ``linked``: ``sphr.risk.linked.linked_validation``'s frames ("discrimination",
    "hazard_ratio", "cumulative_incidence" with sex, method, outcome, group, time_years,
    cum_inc, low, high); when given, its cumulative incidence by group is the central figure
    and the forest plot follows it. ``absolute``: (candidates, outcomes, metrics, deciles) of
    the absolute-risk models (:mod:`sphr.risk.absolute_report`), a section of their own.
    """
    from sphr.risk.absolute_report import absolute_section

    t0 = time.perf_counter()
    path = Path(path)
    modes = list(dict.fromkeys(rows["mode"]))
    sexes = list(summary.get("sexes") or sorted(rows["sex"].unique()))
    heldout = heldout if heldout is not None else pd.DataFrame(
        columns=["sex", "method", "mode", "partition", "n", "normal_share", "low", "high"])
    # the repeat-visit figures only where somebody validated had a repeat visit
    has_disc = discrimination is not None and len(discrimination) > 0 and \
        _validated(discrimination)
    # the central figure: the linked outcome with the most events when there are linked
    # records, its forest plot, and the repeat visits' forest beside them where they exist
    central, outcome = _central(linked, sexes)
    has_linked = outcome is not None and linked.get("discrimination") is not None
    fu = _read_followup(followup)
    ctx: dict[str, Any] = {
        "title": "Single-visit health risk groups",
        "provenance": _provenance(path, summary),
        "cohort": table(_cohort_table(rows, discrimination, linked), "{:.0f}"),
        "n_rows": len(rows),
        "paragraph": summary_paragraph(discrimination, heldout, rows=rows, linked=linked),
        "share_fig": _share_plot(rows, "calibrated") if "calibrated" in modes else None,
        "outcome": outcome.replace("_", " ") if outcome else None,
        "linked_forest": _linked_forest_plot(linked["discrimination"],
                                             linked.get("hazard_ratio"), outcome)
        if has_linked else None,
        "central": central, "forest": _forest_plot(discrimination) if has_disc else None,
        "unscored": table(_unscored_table(summary)) if summary.get("unscored") else None,
        "linked_tables": [(name.replace("_", " "), table(frame, "{:.3g}"))
                          for name, frame in (linked or {}).items()
                          if name != "cumulative_incidence" and frame is not None and len(frame)],
        "followup_figs": _followup_figures(rows, fu, sexes), "followup_given": fu is not None,
        "age_fig": _age_share_plot(rows) if "calibrated" in modes else None,
        "distance_figs": [_distance_plot(rows, thresholds, sex, "calibrated")
                          for sex in sexes if "calibrated" in modes],
        "validation": _validation_section(validation, correlation, modes),
        "absolute": absolute_section(absolute, rows, summary),
        **_appendix(rows, thresholds, summary, heldout, discrimination, has_disc, sexes, modes),
    }
    out = write_text(render("risk.html.j2", **ctx), path)
    main = central[0] if central else ctx["linked_forest"] or ctx["forest"] or ctx["share_fig"]
    if main is not None:
        write_bytes(main.png, path.with_name(path.stem + "_summary.png"))
    t_html = time.perf_counter() - t0
    if pdf:
        print_pdf(out)
    log.info("risk report: html %.1f s, pdf %.1f s", t_html, time.perf_counter() - t0 - t_html)
    return out
