"""The main report's four pages (``report.html`` / ``.pdf``): the template context of
``risk.html.j2`` from the frames of :mod:`sphr.risk.report.frames`.

1. a synthetic-cohort banner, the verdict box (:mod:`sphr.risk.report.verdict`), the
   participant flow and one table per sex of the shipped groups;
2. Kaplan-Meier curves of the shipped groups and the forest plot of the gain over age;
3. calibration of the 10-year risk with its numbers per tenth, the decision curve and the
   risk-equivalent age;
4. definitions, intended use and limitations.

Everything else is in the appendix (``report_appendix.html``, :mod:`.assembly`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sphr.beyond_age import GROUP_MIN_N
from sphr.report import table
from sphr.risk.absolute import shipped
from sphr.risk.calibration import LOWER_LEVEL, NORMAL_LEVEL
from sphr.risk.intervals import HIGHER_RISK, LOWER_RISK, NORMAL
from sphr.risk.report import frames as fr
from sphr.risk.report import verdict as vd
from sphr.risk.report.absolute import LABELS, calibration_plot, group_sentences
from sphr.risk.report.decision import net_benefit
from sphr.risk.report.main_figures import decision_plot, gain_plot, km_plot
from sphr.risk.report.names import method_name
from sphr.risk.report.tables import tail_of
from sphr.risk.validation.absolute import HORIZON, with_outcome


def _json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text()) if path.exists() else {}


def cohort_facts(summary: dict[str, Any]) -> dict[str, Any]:
    """What the run folder says of the cohort: synthetic or not, participants exported, the
    registries' censoring dates (the era of follow-up)."""
    run = Path(str(summary.get("run", ".")))
    ingest = _json(run / "ingest" / "ingest_report.json")
    settings = _json(run / "run_settings.json")
    stages = settings.get("stages") or {}
    source = str(ingest.get("source", ""))
    # the run's own record first: a run on an export names it (every run's settings list the
    # synth stage, used or not); without that record, the synthetic export's file name
    if "synthetic" in summary:
        synthetic = bool(summary["synthetic"])
    elif settings:
        synthetic = settings.get("export") is None
    else:
        synthetic = "synthetic" in Path(source).name
    return {"synthetic": synthetic, "exported": ingest.get("participants"),
            "censoring": (stages.get("ingest") or {}).get("censoring") or {},
            "source": Path(source).name or None}


def reference_ages(rows: pd.DataFrame, method: str | None) -> pd.DataFrame:
    """sex, age_years, role: the calibration bona fide healthy who set the bounds
    ("reference") and the held-out people scored ("scored")."""
    r = rows.loc[(rows["mode"] == "calibrated") & (rows["method"] == method)]
    if r.empty or "label" not in r:
        return pd.DataFrame(columns=["sex", "age_years", "role"])
    ref = r.loc[fr.reference_mask(r)]
    test = r.loc[r["partition"] == "test"]
    return pd.concat([ref[["sex", "age_years"]].assign(role="reference"),
                      test[["sex", "age_years"]].assign(role="scored")], ignore_index=True)


def decile_table(deciles: pd.DataFrame, method: str, outcome: str) -> pd.DataFrame:
    """Predicted and observed 10-year risk per tenth of predicted risk, a row each per sex;
    an observed cell of a tenth with fewer than 5 events reads "too few"."""
    d = deciles.loc[(deciles["method"] == method) & (deciles["outcome"] == outcome)
                    & ~deciles["recalibrated"].astype(bool)]
    rows = []
    for sex, sub in d.groupby("sex", sort=True):
        sub = sub.sort_values("bin")
        cols = [f"{int(b)}" for b in sub["bin"]]
        rows.append({"sex": sex, "%": "predicted",
                     **dict(zip(cols, (f"{100 * v:.1f}" for v in sub["predicted"]),
                                strict=True))})
        rows.append({"sex": sex, "%": "observed",
                     **dict(zip(cols, (fr.TOO_FEW if hide else f"{100 * v:.1f}" for v, hide in
                                       zip(sub["observed"], fr.suppressed(sub["n"],
                                                                          sub["events"]),
                                           strict=True)), strict=True))})
        rows.append({"sex": sex, "%": "people / events",
                     **dict(zip(cols, (f"{n}/{e}" for n, e in zip(sub["n"], sub["events"],
                                                                  strict=True)), strict=True))})
    return pd.DataFrame(rows).fillna("")


def _absolute_block(absolute: tuple | None, rows: pd.DataFrame, summary: dict[str, Any],
                    groups_from: str | None) -> dict[str, Any] | None:
    """Page 3: calibration, numbers per tenth, decision curve, risk-equivalent age."""
    candidates, outcomes, metrics, deciles = absolute or (None,) * 4
    method = summary.get("absolute_method")
    if candidates is None or metrics is None or metrics.empty or outcomes is None \
            or not (metrics["method"] == method).any():
        return None
    outcome = "death" if (metrics["outcome"] == "death").any() else str(metrics["outcome"].iloc[0])
    ship = shipped(candidates, method, bool(summary.get("absolute_recalibrate")))
    test = with_outcome(ship.loc[(ship["partition"] == "test") & (ship["outcome"] == outcome)],
                        outcomes)
    curves = pd.concat([net_benefit(s["time"], s["event"], s["risk_10y"], HORIZON).assign(sex=sex)
                        for sex, s in test.groupby("sex", sort=True)], ignore_index=True)
    # the sentences obey the suppression rule: a group of at least GROUP_MIN_N people
    sentences = group_sentences(ship, rows, outcomes, outcome, min_n=GROUP_MIN_N)
    label = LABELS.get(method, method)
    return {
        "outcome": outcome.replace("_", " "), "label": label,
        "fig": calibration_plot(metrics, deciles, method, False, outcome),
        "deciles": table(decile_table(deciles, method, outcome)),
        "decision": decision_plot(curves, label, outcome),
        "which": (f"The groups come from {method_name(groups_from or '?')}: a distance from "
                  f"healthy people of the same sex and age, so they say how far from healthy a "
                  f"person is for their age, not how likely an event is. The absolute risk "
                  f"comes from {label}, a Cox model fitted to {outcome.replace('_', ' ')} on "
                  + ("the other folds for each person's fold" if fr.crossfitted(rows)
                     else "the training partition")
                  + ": a risk in percent needs a model of the outcome."),
        "risk_age": ("The risk-equivalent age is the age at which a person of the same sex "
                     "with the markers of the healthy reference (the training bona fide "
                     "healthy's medians) has the same predicted 10-year risk. Per sex and "
                     "group:" if sentences else ""),
        "risk_age_lines": sentences,
    }


#: the share of healthy people each group holds when its bounds hold (95% / 4% / 1%)
EXPECTED_HEALTHY = {NORMAL: NORMAL_LEVEL, LOWER_RISK: LOWER_LEVEL - NORMAL_LEVEL,
                    HIGHER_RISK: 1.0 - LOWER_LEVEL}


def _with_healthy(t: pd.DataFrame, check: dict[str, Any] | None) -> pd.DataFrame:
    """The group table with the column "healthy people in it": each group's share of the
    healthy people no bound saw (Wilson 95% interval), beside the share it holds when the
    bounds hold."""
    if check is None or not check["n"]:
        return t
    def cell(group: str) -> str:
        share, lo, hi = check["shares"][group]
        return (f"{100 * share:.1f}% ({100 * lo:.1f}-{100 * hi:.1f}; expected "
                f"{100 * EXPECTED_HEALTHY[group]:g}%)")

    cells = [cell(g) if g in EXPECTED_HEALTHY else f"n = {check['n']:,}" for g in t["group"]]
    return t.assign(**{"healthy people in it": cells})


def _group_tables(order: pd.DataFrame, rows: pd.DataFrame, method: str | None,
                  sexes: list[str]) -> list[tuple[str, str, str | None]]:
    """Per sex: its name, the group table and the line saying what the bounds rest on."""
    out = []
    checks = fr.healthy_check(rows, method) if method else {}
    for sex in sexes:
        t = fr.group_table(order, sex, method) if method else pd.DataFrame()
        if not len(t):
            continue
        check = checks.get(sex)
        rest = (f"The bounds rest on {check['reference']:,} bona fide healthy "
                f"{vd.SEX_NAMES.get(sex, sex)}; the last column splits the {check['n']:,} "
                "healthy people no bound saw (Wilson 95% interval)." if check and check["n"]
                else None)
        out.append((vd.SEX_NAMES.get(sex, sex).capitalize(),
                    table(_with_healthy(t, check), nowrap=False), rest))
    return out


def main_context(rows: pd.DataFrame, summary: dict[str, Any], sexes: list[str],
                 absolute: tuple | None, linked: dict[str, pd.DataFrame] | None = None
                 ) -> dict[str, Any]:
    """The template context of the main report's four pages, and the frames it was formatted
    from (``frames``: ordering, gain, flow; written beside the report as CSV). The group
    ordering and the gain over age are the risk stage's tables in ``linked``
    (:func:`~sphr.risk.report.frames.yardstick`)."""
    outcomes = absolute[1] if absolute else None
    facts = cohort_facts(summary)
    method = fr.shipped_method(rows, summary)
    frame = fr.outcome_frame(rows, outcomes)
    tables = fr.yardstick(linked)
    order = fr.ordering(tables.get("group_ordering"))
    gain = fr.gain(tables.get("beyond_age"))
    first = fr.outcome_order(frame["outcome"])[0] if len(frame) else None
    flow = fr.flow(rows, frame, method, summary, facts["exported"], first)
    sentences = [vd.ordering_sentence(order, method, first) if method and first else None,
                 vd.across_sentence(order),
                 vd.gain_sentence(gain, first) if first else None,
                 vd.stability_sentence(summary.get("sphr"), method),
                 vd.population_sentence(reference_ages(rows, method)),
                 vd.higher_risk_sentence(vd.in_higher_risk(rows, method, "test"),
                                         vd.calibration_bfh(rows, method), tail_of(summary))
                 if method else None]
    return {
        "facts": facts,
        "crossfit": fr.crossfitted(rows),
        "shipped": method_name(method).replace(" (shipped)", "") if method else None,
        "verdict": [s for s in sentences if s],
        "flow": table(flow.fillna("").rename(columns=lambda c: vd.SEX_NAMES.get(c, c))),
        "group_tables": _group_tables(order, rows, method, sexes),
        "km": km_plot(frame, method, first, HORIZON) if method and first else None,
        "gain_fig": gain_plot(gain) if len(gain) else None,
        "readings": [r for s in sexes if (r := vd.reading_line(gain, s))],
        "n_gain": int(gain["dc"].notna().sum()) if len(gain) else 0,
        "absolute_main": _absolute_block(absolute, rows, summary, method),
        "population": _population(rows, facts),
        "frames": {"ordering": order, "gain": gain, "flow": flow},
    }


def _population(rows: pd.DataFrame, facts: dict[str, Any]) -> dict[str, str]:
    """Page 4's facts: who was scored, the era of follow-up."""
    people = rows.drop_duplicates(["sex", "eid"])
    ages = people["age_years"].to_numpy(float)
    cens = facts["censoring"]
    per_sex = ", ".join(f"{n:,} {vd.SEX_NAMES.get(s, s)}"
                        for s, n in people["sex"].value_counts().sort_index().items())
    return {"who": (f"{len(people):,} people ({per_sex}), "
                    f"aged {np.nanmin(ages):.0f}-{np.nanmax(ages):.0f} at baseline"),
            "era": ("follow-up to " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in
                                                 sorted(cens.items())))
            if cens else "follow-up dates: not recorded in run_settings.json"}
