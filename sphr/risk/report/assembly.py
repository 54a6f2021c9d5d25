"""The risk report people forward: ``report.html`` (self-contained) and ``report.pdf`` (A4).

Rendered from ``sphr/report/templates/risk.html.j2``; inline CSS, every figure a
PNG data URI, no network reference. Reading order (the reader first, the
method's bookkeeping last):

1. **Summary**: the cohort (n per sex, ages, export file and date, model
   version), the share of people in each group per sex, and the figure that
   answers "does Higher Risk develop more new disease than Normal, per method?"
   (a forest plot of AUROC, C-index and risk ratio with 95% CIs, references
   marked; or, when linked records are given, their cumulative incidence by
   group), with a paragraph generated from the numbers
   (:func:`~sphr.risk.report.sentences.summary_sentences`).
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

import logging
import time
from pathlib import Path
from typing import Any

import pandas as pd

from sphr.io import write_bytes, write_text
from sphr.report import Figure, print_pdf, render, table
from sphr.risk.curves import cumulative_new_diagnosis, shares
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
from sphr.risk.validation import higher_vs_normal, wide_table

log = logging.getLogger(__name__)


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
    the absolute-risk models (:mod:`sphr.risk.report.absolute`), a section of their own.
    """
    t0 = time.perf_counter()
    path = Path(path)
    modes = list(dict.fromkeys(rows["mode"]))
    sexes = list(summary.get("sexes") or sorted(rows["sex"].unique()))
    heldout = heldout if heldout is not None else pd.DataFrame(
        columns=["sex", "method", "mode", "partition", "n", "normal_share", "low", "high"])
    # the repeat-visit figures only where somebody validated had a repeat visit
    has_disc = discrimination is not None and len(discrimination) > 0 and \
        validated(discrimination)
    # the central figure: the linked outcome with the most events when there are linked
    # records, its forest plot, and the repeat visits' forest beside them where they exist
    central, outcome = _central(linked, sexes)
    has_linked = outcome is not None and linked.get("discrimination") is not None
    fu = _read_followup(followup)
    ctx: dict[str, Any] = {
        "title": "Single-visit health risk groups",
        "provenance": provenance(path, summary),
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
                          if name != "cumulative_incidence" and frame is not None and len(frame)],
        "followup_figs": _followup_figures(rows, fu, sexes), "followup_given": fu is not None,
        "age_fig": age_share_plot(rows) if "calibrated" in modes else None,
        "distance_figs": [distance_plot(rows, thresholds, sex, "calibrated")
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
