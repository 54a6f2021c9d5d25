"""The verdict of the plain pages of ``sphr score`` and the refresh, in the main report's
structure (:mod:`sphr.risk.report.main`): the verdict first, then one group-ordering table
per sex of the shipped groups ("not ordered" where they are not), then what each score adds
to age (dC). Formatted from the yardstick tables of the people scored
(:func:`sphr.risk.validation.beyond.scored_tables`), with the main report's own functions
(:mod:`sphr.risk.report.frames`, :mod:`sphr.risk.report.verdict`): the same words and the
same suppression rule.

Without linked records the page says that the ordering cannot be judged on this export, and
why. Blocks as :func:`sphr.risk.report.pages.render_page` takes them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from sphr.beyond_age import GROUP_MIN_EVENTS, GROUP_MIN_N
from sphr.risk.report import frames as fr
from sphr.risk.report import verdict as vd
from sphr.risk.report.names import is_reference, method_name, ordered
from sphr.risk.validation.beyond import HORIZON

Block = tuple[str, Any]


def dc_table(gain: pd.DataFrame) -> pd.DataFrame:
    """One row per outcome (death first) and score, one column per sex: dC with its 95%
    interval, :data:`~sphr.risk.report.frames.TOO_FEW` where it was not estimated."""
    if gain.empty:
        return pd.DataFrame()
    sexes = sorted(gain["sex"].unique())
    rows = []
    for outcome in fr.outcome_order(gain["outcome"]):
        sub = gain.loc[gain["outcome"] == outcome]
        for method in ordered(sub["method"].unique()):
            row = {"outcome": outcome.replace("_", " "),
                   "score": method_name(method) + (" *" if is_reference(method) else "")}
            for sex in sexes:
                r = sub.loc[(sub["method"] == method) & (sub["sex"] == sex)]
                dc = r.iloc[0] if len(r) else None
                row[vd.SEX_NAMES.get(sex, sex)] = (
                    f"{dc['dc']:+.3f} ({dc['dc_low']:+.3f} to {dc['dc_high']:+.3f})"
                    if dc is not None and np.isfinite(dc["dc"]) else fr.TOO_FEW)
            rows.append(row)
    return pd.DataFrame(rows)


def _notes() -> tuple[str, str]:
    groups = (f"Each outcome's cell: the observed {HORIZON:g}-year risk (Kaplan-Meier); HR, the "
              "age-adjusted hazard ratio against Normal (Cox, Wald 95% interval). \"too few\": "
              f"fewer than {GROUP_MIN_N} people or {GROUP_MIN_EVENTS} events, no estimate. "
              "Ordered: both hazard ratios above 1 and Higher Risk's at least Lower Risk's; "
              f"\"{fr.NOT_BEYOND_CHANCE}\" where so by the point estimates but a ratio's 95% "
              "interval reaches 1; \"not ordered\" otherwise. The groups are relative to age: "
              "Higher Risk means farther from healthy people of the same sex and age.")
    gain = ("dC = C(age + score) - C(age): the gain in Harrell's C when the score joins age in "
            "a Cox model (cross-fitted; paired bootstrap 95% interval, not adjusted for the "
            "number of scores). *: references, not peers (PhenoAge acceleration; a supervised "
            "model sees the outcome).")
    return groups, gain


def _higher_risk(rows: pd.DataFrame, method: str | None,
                 bounds: dict[str, dict[str, dict[str, Any]]] | None, people: str
                 ) -> str | None:
    """The sentence on a nearly empty Higher Risk group (:func:`~sphr.risk.report.verdict.
    higher_risk_sentence`, as in the main report) for the people scored, its calibration BFH
    read from the model's bounds."""
    if not method or not bounds:
        return None
    made = {sex: by[method] for sex, by in bounds.items() if method in by}
    if not made:
        return None
    tail = next(iter(made.values()))["tail"]  # one setting for the whole model
    return vd.higher_risk_sentence(vd.in_higher_risk(rows, method),
                                   {sex: m["n"] for sex, m in made.items()}, tail,
                                   people=people)


def verdict_blocks(tables: dict[str, pd.DataFrame] | None, rows: pd.DataFrame,
                   record: dict[str, Any] | None, *, people: str, why_not: str,
                   bounds: dict[str, dict[str, dict[str, Any]]] | None = None) -> list[Block]:
    """The verdict, the group tables per sex and the dC table of the people scored.
    ``tables``: ``{"beyond_age", "group_ordering"}`` or None (no linked records: the page
    says ``why_not``); ``record``: the model's SPHR record (which SPHR score ships);
    ``people``: whose outcomes these are, as the verdict names them; ``bounds``: per sex and
    method, how the 99% bound was made (:func:`sphr.risk.serve.apply.higher_risk_bounds`), for the
    sentence on a nearly empty Higher Risk group."""
    head: list[Block] = [("h2", "Verdict")]
    order = fr.ordering((tables or {}).get("group_ordering"))
    method = fr.shipped_method(rows, {"sphr": record}) if len(rows) else None
    if order.empty:
        few = _higher_risk(rows, method, bounds, people)
        return [*head, ("p", "Whether the groups are ordered by risk cannot be judged on this "
                             f"export: {why_not}."), *([("p", few)] if few else [])]
    gain = fr.gain(tables.get("beyond_age"))
    first = fr.outcome_order(order["outcome"])[0]
    sentences = [vd.ordering_sentence(order, method, first, people=people) if method else None,
                 vd.across_sentence(order), vd.gain_sentence(gain, first),
                 _higher_risk(rows, method, bounds, people)]
    blocks = head + [("p", s) for s in sentences if s]
    groups_note, gain_note = _notes()
    if method:
        blocks += [("h2", f"The groups of {method_name(method)}, by sex"), ("p", groups_note)]
        for sex in sorted(order["sex"].unique()):
            t = fr.group_table(order, sex, method)
            if len(t):
                blocks += [("p", vd.SEX_NAMES.get(sex, sex).capitalize() + ":"), ("table", t)]
    blocks += [("h2", "What each score adds to age"), ("p", gain_note),
               ("table", dc_table(gain))]
    return blocks
