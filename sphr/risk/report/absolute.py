"""The risk report's absolute-risk section: the calibration figure, every candidate's numbers
and one sentence a person can read per risk group (docs/METHODS.md, "Absolute risk and the
risk-equivalent age").

Everything here is about the held-out test partition: :func:`absolute_tables` chooses those
rows and evaluates them (:mod:`sphr.risk.validation.absolute`); the figure and sentences
read its output.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from sphr.report import FULL_WIDTH, Figure, figure, new_figure, style_axes, styled, table
from sphr.risk.absolute import ANCHOR, shipped
from sphr.risk.config import DISPLAY, SHIPPED_SPHR, RiskConfig
from sphr.risk.intervals import GROUPS
from sphr.risk.validation.absolute import HORIZON, absolute_validation, with_outcome
from sphr.survival import kaplan_meier

LABELS: dict[str, str] = {
    "age": "Cox: age", "age_distance": "Cox: age + raw Euclidean distance",
    "age_phenoage": "Cox: age + PhenoAge xb", "ridge_markers": "ridge Cox: age + markers",
    ANCHOR: "PhenoAge's own 10-year formula (anchor)"}
#: the same, short enough for a legend
SHORT: dict[str, str] = {
    "age": "Cox: age", "age_distance": "Cox: age + distance", "age_phenoage": "Cox: age + xb",
    "ridge_markers": "ridge Cox: markers", ANCHOR: "PhenoAge's formula"}
#: the risk groups the sentences describe: the shipped SPHR score's, else the raw distance's
GROUP_METHODS: tuple[str, ...] = (SHIPPED_SPHR, "raw_euclidean")


def absolute_tables(candidates: pd.DataFrame, outcomes: pd.DataFrame, config: RiskConfig
                    ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(metrics, deciles) of every candidate on the test partition (nobody a fit saw)."""
    test = candidates.loc[candidates["partition"] == "test"]
    return absolute_validation(test, outcomes, n_bootstrap=config.n_bootstrap_linked,
                               seed=config.seed)


def _pct(v: float) -> str:
    """A risk as people read it: whole percent from 10%, one decimal below."""
    return f"{100 * v:.0f}%" if v >= 0.095 else f"{100 * v:.1f}%"


def _outcome(metrics: pd.DataFrame) -> str | None:
    if metrics.empty:
        return None
    return "death" if (metrics["outcome"] == "death").any() else str(metrics["outcome"].iloc[0])


def _series(deciles: pd.DataFrame, method: str, outcome: str, recal: bool) -> pd.DataFrame:
    d = deciles.loc[(deciles["method"] == method) & (deciles["outcome"] == outcome)]
    has = d["recalibrated"].astype(bool)
    return d.loc[has == (recal and has.any())]


@styled
def calibration_plot(metrics: pd.DataFrame, deciles: pd.DataFrame, method: str, recal: bool,
                     outcome: str) -> Figure:
    """Predicted against observed 10-year risk by tenth of predicted risk, one panel per sex:
    the shipped candidate and PhenoAge's formula, Kaplan-Meier 95% intervals."""
    sexes = sorted(deciles.loc[deciles["outcome"] == outcome, "sex"].unique())
    fig, axes = new_figure(FULL_WIDTH, 3.0, ncols=max(1, len(sexes)), squeeze=False,
                           left=0.55, bottom=0.5, top=0.35, wspace=0.5)
    for ax, sex in zip(axes[0], sexes, strict=False):
        style_axes(ax)
        top = 0.0
        for m, colour, marker in ((method, "#1f77b4", "o"), (ANCHOR, "#7f7f7f", "s")):
            d = _series(deciles.loc[deciles["sex"] == sex], m, outcome, recal and m == method)
            if d.empty:
                continue
            r = metrics.loc[(metrics["sex"] == sex) & (metrics["method"] == m)
                            & (metrics["outcome"] == outcome)]
            r = r.loc[r["recalibrated"].astype(bool) == bool(d["recalibrated"].iloc[0])].iloc[0]
            x, y = 100 * d["predicted"].to_numpy(), 100 * d["observed"].to_numpy()
            err = 100 * np.vstack([d["observed"] - d["low"], d["high"] - d["observed"]])
            ax.errorbar(x, y, yerr=np.clip(err, 0, None), fmt=marker, color=colour, ms=3.5,
                        lw=0.9, capsize=1.5,
                        label=f"{SHORT[m]} (n={r.n:,})\nslope {r.slope:.2f}, O/E {r.oe:.2f}, "
                              f"C {r.c_index:.2f}")
            top = max(top, float(np.nanmax(np.r_[x, y])))
        top = max(5.0, 1.15 * top)  # the points decide; a long interval runs off the top
        ax.plot([0, top], [0, top], color="black", lw=0.7, ls=":")
        ax.set_xlim(0, top)
        ax.set_ylim(0, top)
        ax.set_xlabel(f"predicted {HORIZON:g}-year risk (%), mean per tenth of it")
        ax.set_ylabel("observed (Kaplan-Meier, %)")
        ax.set_title(f"{sex}: {outcome.replace('_', ' ')}, held-out people", pad=3)
        ax.legend(loc="lower right", fontsize=6.3, handlelength=1.0, labelspacing=0.6,
                  frameon=True, framealpha=0.9, edgecolor="none")
    return figure(fig, f"calibration of the {HORIZON:g}-year risk of {outcome}")


def _metrics_table(metrics: pd.DataFrame) -> pd.DataFrame:
    m = metrics.copy()

    def ci(v: str, f: str) -> list[str]:
        return [f"{r[v]:{f}} [{r[v + '_low']:{f}}, {r[v + '_high']:{f}}]" for _, r in m.iterrows()]

    out = pd.DataFrame({
        "sex": m["sex"], "outcome": m["outcome"].str.replace("_", " "),
        "candidate": m["method"].map(LABELS),
        "baseline": np.where(m["method"] == ANCHOR, "none (not fitted)",
                             np.where(m["recalibrated"], "recalibrated", "training")),
        "n (events)": [f"{n:,} ({e})" for n, e in zip(m["n"], m["events"], strict=True)],
        "C": ci("c_index", ".3f"), "slope": ci("slope", ".2f"), "O/E": ci("oe", ".2f"),
        "Brier": ci("brier", ".4f")})
    return out.sort_values(["outcome", "sex"], kind="stable")


def group_sentences(absolute_rows: pd.DataFrame, rows: pd.DataFrame, outcomes: pd.DataFrame,
                    outcome: str, min_n: int = 5) -> list[str]:
    """One sentence per sex and risk group of the test partition: the group's median person's
    10-year risk with its interval and risk-equivalent age, and the group's observed risk.
    A group of fewer than ``min_n`` held-out people gets no sentence."""
    groups = rows.loc[(rows["mode"] == "calibrated") & (rows["partition"] == "test")]
    method = next((m for m in GROUP_METHODS if (groups["method"] == m).any()), None)
    if method is None:
        return []
    groups = groups.loc[groups["method"] == method, ["eid", "sex", "group"]]
    a = absolute_rows.loc[(absolute_rows["outcome"] == outcome)
                          & (absolute_rows["partition"] == "test")]
    data = with_outcome(a.merge(groups, on=["eid", "sex"]), outcomes)
    out, what = [], outcome.replace("_", " ")
    for sex in sorted(data["sex"].unique()):
        who = {"female": "woman", "male": "man"}.get(sex, "person")
        for g in GROUPS:
            d = data.loc[(data["sex"] == sex) & (data["group"] == g)].sort_values("risk_10y")
            if len(d) < min_n:
                continue
            p = d.iloc[(len(d) - 1) // 2]
            obs, lo, hi = (float(v[0]) for v in kaplan_meier(
                d["time"].to_numpy(float), d["event"].to_numpy(bool), np.array([HORIZON])))
            age = (f", that of a typical {who} of {p.risk_age:.0f}"
                   + (" (outside the fitted ages: clipped)" if p.risk_age_outside else "")
                   if np.isfinite(p.risk_age) else "")
            # an interval that rounds to the point itself says nothing: left out
            interval = (f" ({_pct(p.risk_10y_low)[:-1]}-{_pct(p.risk_10y_high)})"
                        if np.isfinite(p.risk_10y_low)
                        and _pct(p.risk_10y_low) != _pct(p.risk_10y_high) else "")
            seen = (f"Observed in the group: {_pct(obs)} ({_pct(lo)[:-1]}-{_pct(hi)})"
                    if d["event"].any() else f"Observed in the group: no {what} by 10 years")
            out.append(f"{sex.capitalize()}, {g} ({len(d):,} held-out people, groups of "
                       f"{DISPLAY.get(method, method)}): the middle person's 10-year risk of "
                       f"{what} is {_pct(p.risk_10y)}{interval}{age}. {seen}.")
    return out


def absolute_section(absolute: tuple[pd.DataFrame | None, ...] | None, rows: pd.DataFrame,
                     summary: dict[str, Any]) -> dict[str, Any] | None:
    """The template's ``absolute`` block from (candidates, outcomes, metrics, deciles), or None
    without linked outcomes."""
    candidates, outcomes, metrics, deciles = absolute or (None,) * 4
    if candidates is None or metrics is None or metrics.empty or outcomes is None:
        return None
    outcome = _outcome(metrics)
    method, recal = summary["absolute_method"], summary["absolute_recalibrate"]
    if not (metrics["method"] == method).any():
        return {"skipped": f"{LABELS.get(method, method)}: not fitted (risk_report.json, "
                           "skipped)", "table": table(_metrics_table(metrics))}
    ship = shipped(candidates, method, recal)
    return {"method": LABELS[method], "outcome": outcome.replace("_", " "),
            "recalibrated": recal,
            "fig": calibration_plot(metrics, deciles, method, recal, outcome),
            "sentences": group_sentences(ship, rows, outcomes, outcome),
            "table": table(_metrics_table(metrics))}
