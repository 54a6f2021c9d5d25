"""The risk report people forward, two files beside each other:

* ``report.html`` / ``report.pdf``: at most four A4 pages (:mod:`sphr.risk.report.main`):
  the verdict, the participant flow and the shipped groups per sex; the Kaplan-Meier curves
  and the gain over age; the risk in percent, its calibration and decision curve;
  definitions, intended use and limitations.
* ``report_appendix.html`` / ``.pdf``: everything else, nothing lost (rendered from
  ``risk_appendix.html.j2``): the group ordering and gain of every score and outcome, the
  earlier edition's summary (every method, the linked records' central figure and forest plot,
  the trust block), the absolute-risk candidates, the repeat visits, shares by age group,
  distance distributions, definitions, discrimination, calibration, validation (Table 4),
  share tables, mode ``paper`` and the thresholds.

The frames the main pages are formatted from are written beside them as CSV
(``report_ordering.csv``, ``report_gain.csv``, ``report_flow.csv``).

:func:`write_report` also prints both PDFs with headless Chromium
(:func:`sphr.report.print_pdf`; skipped with one log line where there is none) and writes
``report_summary.png``, the central figure, for the Dagster asset's metadata.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import pandas as pd

from sphr.beyond_age import GROUP_MIN_EVENTS, GROUP_MIN_N
from sphr.io import write_bytes, write_text
from sphr.report import Figure, print_pdf, render, table
from sphr.risk.calibration import LOWER_LEVEL, NORMAL_LEVEL
from sphr.risk.intervals import GROUPS, HIGHER_RISK
from sphr.risk.paper import PAPER_TIME_CORRELATION, paper_cell
from sphr.risk.report.absolute import absolute_section
from sphr.risk.report.figures import (
    age_share_plot,
    cumulative_plot,
    distance_plot,
    forest_plot,
    linked_forest_plot,
    share_plot,
    validation_plot,
)
from sphr.risk.report.frames import TOO_FEW, ordering_label
from sphr.risk.report.main import main_context
from sphr.risk.report.main_figures import BAND_MIN_N
from sphr.risk.report.names import main_outcome, method_name
from sphr.risk.report.sentences import summary_paragraph, validated
from sphr.risk.report.tables import (
    age_table,
    cohort_table,
    definitions,
    discrimination_compact,
    heldout_compact,
    provenance,
    thresholds_tables,
    unscored_table,
)
from sphr.risk.report.trust import sphr_trust, with_refit_sd
from sphr.risk.validation.absolute import HORIZON
from sphr.risk.validation.curves import cumulative_new_diagnosis, shares
from sphr.risk.validation.groups import higher_vs_normal, holm, wide_table

log = logging.getLogger(__name__)
#: linked tables the appendix shows in their own section, not among "every number": the
#: curves as figures; the yardstick's, suppressed groups blanked (:func:`_ordering_shown`)
SHOWN_APART = frozenset({"cumulative_incidence", "beyond_age", "group_ordering"})


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
    return [cumulative_plot(lc, sex, f"{sex.capitalize()}: cumulative incidence of {what} "
                                      "(linked records) by group",
                             ylabel="cumulative incidence (%)")
            for sex in sexes if (lc["sex"] == sex).any()], outcome


def _followup_figures(rows: pd.DataFrame, fu: pd.DataFrame | None, sexes: list[str]
                      ) -> list[Figure]:
    """The share with a new diagnosis over the repeat visits by group, one per sex."""
    curves = cumulative_new_diagnosis(rows, fu) if fu is not None else None
    if curves is None or curves.empty:
        return []
    return [cumulative_plot(curves, sex, f"{sex.capitalize()}: share with a new diagnosis "
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
    wide["method"] = wide["method"].map(method_name)
    return {"figs": [validation_plot(validation, m) for m in modes],
            "wide": table(wide), "hvn": table(higher_vs_normal(validation)),
            "correlation": table(correlation) if correlation is not None else None,
            "paper_r": ", ".join(f"{k} r={r} (p={p})"
                                 for k, (r, p) in PAPER_TIME_CORRELATION.items())}


def _appendix(rows: pd.DataFrame, thresholds: pd.DataFrame, summary: dict[str, Any],
              heldout: pd.DataFrame, discrimination: pd.DataFrame | None, has_disc: bool,
              sexes: list[str], modes: list[str]) -> dict[str, Any]:
    """The appendix's definitions, tables and the paper mode's figures."""
    return {
        "definitions": definitions(summary),
        "disc_table": table(discrimination_compact(discrimination)) if has_disc else None,
        "heldout_compact": table(heldout_compact(heldout)) if len(heldout) else None,
        "heldout_full": table(heldout, "{:.3f}") if len(heldout) else None,
        "shares_table": table(shares(rows, ["sex", "method", "mode"])),
        "age_table": table(age_table(rows)) if "calibrated" in modes else None,
        "paper_share_fig": share_plot(rows, "paper") if "paper" in modes else None,
        "paper_distance_figs": [distance_plot(rows, thresholds, sex, "paper")
                                for sex in sexes if "paper" in modes],
        "thresholds": thresholds_tables(thresholds),
        "higher_rows": int((rows["group"] == HIGHER_RISK).sum()),
    }


def _trust_block(record: dict[str, Any] | None, rows: pd.DataFrame) -> dict[str, Any] | None:
    """"How far one SPHR fit can be trusted", its table rendered."""
    block = sphr_trust(record, sorted(rows["method"].unique()))
    if block is not None and block["table"] is not None:
        block = {**block, "table": table(block["table"])}
    return block


def _ordering_shown(order: pd.DataFrame) -> pd.DataFrame:
    """The appendix's ordering table: suppressed groups' estimates blanked, display names, the
    hazard ratios' p Holm-adjusted over the table (the multiplicity said)."""
    o = order.copy()
    keys = ["sex", "method", "outcome"]
    # the verdict in the main page's words, "ordered, not beyond chance" included
    labels = {k: ordering_label(b) for k, b in o.groupby(keys, sort=False)}
    o["verdict"] = [labels[k] for k in zip(o["sex"], o["method"], o["outcome"], strict=True)]
    hidden = ~o["shown"].astype(bool)
    o.loc[hidden, ["risk", "hr", "hr_low", "hr_high", "hr_p"]] = float("nan")
    o["hr_p_holm"] = holm(o["hr_p"].to_numpy(float))
    o["method"] = o["method"].map(method_name)
    o["risk"] = [TOO_FEW if h else f"{100 * v:.1f}%" for v, h in zip(o["risk"], hidden,
                                                                   strict=True)]
    return o.drop(columns=["shown"])


def _gain_shown(gain: pd.DataFrame) -> pd.DataFrame:
    cols = ["sex", "outcome", "method", "n", "events", "c_age", "c_age_score", "dc", "dc_low",
            "dc_high", "hr_per_sd", "hr_low", "hr_high", "spearman_age", "spearman_age_bfh"]
    g = gain[[c for c in cols if c in gain]].copy()
    g["method"] = g["method"].map(method_name)
    return g


def _write_frames(path: Path, frames: dict[str, pd.DataFrame]) -> None:
    for name, frame in frames.items():
        write_text(frame.to_csv(index=False), path.with_name(f"{path.stem}_{name}.csv"))


def _common(summary: dict[str, Any], path: Path) -> dict[str, Any]:
    return {"provenance": provenance(path, summary), "horizon": f"{HORIZON:g}",
            "min_n": GROUP_MIN_N, "min_events": GROUP_MIN_EVENTS, "band_min": BAND_MIN_N,
            "levels": (f"{100 * NORMAL_LEVEL:g}%", f"{100 * LOWER_LEVEL:g}%")}


def write_report(path: Path, *, rows: pd.DataFrame, thresholds: pd.DataFrame,
                 validation: pd.DataFrame | None, correlation: pd.DataFrame | None,
                 summary: dict[str, Any], heldout: pd.DataFrame | None = None,
                 discrimination: pd.DataFrame | None = None,
                 followup: pd.DataFrame | str | Path | None = None,
                 linked: dict[str, pd.DataFrame] | None = None,
                 absolute: tuple[pd.DataFrame | None, ...] | None = None,
                 pdf: bool = True) -> Path:
    """Write ``report.html`` (the four main pages), ``report_appendix.html`` (everything
    else), a PDF of each where Chromium is installed, ``report_summary.png`` (the central
    figure) and the main pages' frames as CSV.

    ``followup``: ``RUN/ingest/followup.parquet`` (frame or path) for the cumulative
    new-diagnosis curves over the repeat visits; without it that section says so.
    ``linked``: the risk stage's linked tables (:data:`sphr.risk.pipeline.LINKED_TABLES`:
    "discrimination", "hazard_ratio", "cumulative_incidence", shown in the appendix, and
    "beyond_age", "group_ordering", the main pages' gain over age and group ordering, read as
    the stage wrote them). ``absolute``: (candidates, outcomes, metrics, deciles) of the
    absolute-risk models (:mod:`sphr.risk.report.absolute`); its outcomes
    (``RUN/ingest/outcomes.parquet``) give the Kaplan-Meier curves and the flow.
    """
    t0 = time.perf_counter()
    path = Path(path)
    sexes = list(summary.get("sexes") or sorted(rows["sex"].unique()))
    main = main_context(rows, summary, sexes, absolute, linked)
    frames = main.pop("frames")
    common = _common(summary, path)
    appendix = _appendix_context(path, rows=rows, thresholds=thresholds, validation=validation,
                                 correlation=correlation, summary=summary, heldout=heldout,
                                 discrimination=discrimination, followup=followup,
                                 linked=linked, absolute=absolute, sexes=sexes)
    has = len(frames["ordering"]) > 0
    appendix.update(
        ordering_table=table(_ordering_shown(frames["ordering"]), "{:.3g}") if has else None,
        n_tests=int(frames["ordering"]["hr_p"].notna().sum()) if has else 0,
        gain_table=table(_gain_shown(frames["gain"]), "{:.3f}") if len(frames["gain"]) else None,
        n_gain=main["n_gain"])
    out = write_text(render("risk.html.j2", title="Single-visit health risk groups: the report",
                            **common, **main), path)
    side = write_text(render("risk_appendix.html.j2", **common, **appendix),
                      path.with_name(path.stem + "_appendix.html"))
    _write_frames(path, frames)
    central = main["km"] or appendix.pop("_central_png")
    if central is not None:
        write_bytes(central.png, path.with_name(path.stem + "_summary.png"))
    t_html = time.perf_counter() - t0
    if pdf:
        print_pdf(out)
        print_pdf(side)
    log.info("risk report: html %.1f s, pdf %.1f s", t_html, time.perf_counter() - t0 - t_html)
    return out


def _appendix_context(path: Path, *, rows: pd.DataFrame, thresholds: pd.DataFrame,
                      validation: pd.DataFrame | None, correlation: pd.DataFrame | None,
                      summary: dict[str, Any], heldout: pd.DataFrame | None,
                      discrimination: pd.DataFrame | None,
                      followup: pd.DataFrame | str | Path | None,
                      linked: dict[str, pd.DataFrame] | None,
                      absolute: tuple[pd.DataFrame | None, ...] | None,
                      sexes: list[str]) -> dict[str, Any]:
    """The appendix's context: everything the earlier one-file report held."""
    modes = list(dict.fromkeys(rows["mode"]))
    heldout = heldout if heldout is not None else pd.DataFrame(
        columns=["sex", "method", "mode", "partition", "n", "normal_share", "low", "high"])
    # the repeat-visit figures only where somebody validated had a repeat visit
    has_disc = discrimination is not None and len(discrimination) > 0 and \
        validated(discrimination)
    central, outcome = _central(linked, sexes)
    has_linked = outcome is not None and linked.get("discrimination") is not None
    fu = _read_followup(followup)
    ctx: dict[str, Any] = {
        "title": "Single-visit health risk groups: appendix",
        "cohort": table(cohort_table(rows, discrimination, linked), "{:.0f}"),
        "n_rows": len(rows),
        "paragraph": summary_paragraph(discrimination, heldout, rows=rows, linked=linked),
        "share_fig": share_plot(rows, "calibrated") if "calibrated" in modes else None,
        "outcome": outcome.replace("_", " ") if outcome else None,
        "linked_forest": linked_forest_plot(linked["discrimination"],
                                             linked.get("hazard_ratio"), outcome)
        if has_linked else None,
        "central": central, "forest": forest_plot(discrimination) if has_disc else None,
        "unscored": table(unscored_table(summary)) if summary.get("unscored") else None,
        "sphr_trust": _trust_block(summary.get("sphr"), rows),
        "linked_tables": [(name.replace("_", " "),
                           table(with_refit_sd(frame, summary.get("sphr"))
                                 if name == "discrimination" else frame, "{:.3g}"))
                          for name, frame in (linked or {}).items()
                          if name not in SHOWN_APART and frame is not None and len(frame)],
        "followup_figs": _followup_figures(rows, fu, sexes), "followup_given": fu is not None,
        "age_fig": age_share_plot(rows) if "calibrated" in modes else None,
        "distance_figs": [distance_plot(rows, thresholds, sex, "calibrated")
                          for sex in sexes if "calibrated" in modes],
        "validation": _validation_section(validation, correlation, modes),
        "absolute": absolute_section(absolute, rows, summary),
        **_appendix(rows, thresholds, summary, heldout, discrimination, has_disc, sexes, modes),
    }
    ctx["_central_png"] = (central[0] if central else ctx["linked_forest"] or ctx["forest"]
                           or ctx["share_fig"])
    return ctx
