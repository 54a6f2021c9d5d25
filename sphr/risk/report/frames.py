"""The frames the main report summarizes, computed from what the report already receives
(risk_groups rows, the linked outcomes): every sentence and table of the main report is
formatted from one of these, never from a number typed into a template.

* :func:`outcome_frame`: one row per held-out person, method and linked outcome (the
  Kaplan-Meier curves and the flow);
* :func:`yardstick`: the risk stage's beyond-age tables (``RUN/risk/linked_beyond_age``,
  ``linked_group_ordering``, :mod:`sphr.risk.validation.beyond`), read, not recomputed: one
  source for
  the report, its appendix and the CSV beside them;
* :func:`ordering`: the group-ordering yardstick per sex, method and outcome, with the
  suppression rule's ``shown``;
* :func:`gain`: the beyond-age gain dC per sex, method and outcome, in the report's order;
* :func:`flow`: the participant flow, export -> scored -> held out -> per group;
* :func:`group_table`: one sex's shipped groups, as the main page prints them.

Suppression (docs/METHODS.md, "The beyond-age yardstick"): no estimate from a group with fewer
than :data:`~sphr.beyond_age.GROUP_MIN_N` people or :data:`~sphr.beyond_age.GROUP_MIN_EVENTS`
events; such a cell reads :data:`TOO_FEW`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from sphr.beyond_age import GROUP_MIN_EVENTS, GROUP_MIN_N
from sphr.risk.config import SHIPPED_SPHR
from sphr.risk.intervals import GROUPS, HIGHER_RISK, LOWER_RISK, NORMAL
from sphr.risk.report.names import is_reference, ordered
from sphr.risk.supervised import is_supervised

#: what a suppressed cell reads
TOO_FEW = "too few"
#: the scores that give no groups of their own to judge beyond age (age is the yardstick)
NOT_GAINED = frozenset({"age"})
#: the verdict of groups ordered by their point estimates whose hazard ratios' 95% intervals
#: do not all lie above 1 (:func:`ordering_label`)
NOT_BEYOND_CHANCE = "ordered, not beyond chance"
#: the risk stage's yardstick tables, as keys of its ``linked`` dict
YARDSTICK: tuple[str, ...] = ("beyond_age", "group_ordering")
#: the group-ordering table's columns (:func:`sphr.beyond_age.ordering_table`)
ORDERING_COLUMNS: tuple[str, ...] = ("sex", "method", "outcome", "group", "n", "events",
                                     "mean_age", "risk", "risk_age_standardized", "hr",
                                     "hr_low", "hr_high", "hr_p", "status", "basis")


def ordering_label(block: pd.DataFrame) -> str:
    """The verdict of one sex, score and outcome (its group rows) as the report prints it:
    the stage's ``status``, where "ordered" (by point estimates) reads
    :data:`NOT_BEYOND_CHANCE` when a hazard ratio the verdict rests on (``basis``: Lower and
    Higher Risk, or the one group named) has a 95% interval that reaches 1."""
    status, basis = str(block["status"].iloc[0]), str(block["basis"].iloc[0])
    if status != "ordered":
        return status
    by = block.set_index("group")
    groups = [LOWER_RISK, HIGHER_RISK] if basis == "Lower and Higher Risk" else [basis]
    if not set(groups) <= set(by.index):
        return status
    low = by.loc[groups, "hr_low"].to_numpy(float)
    return status if bool((low > 1).all()) else NOT_BEYOND_CHANCE


def suppressed(n: Any, events: Any) -> Any:
    """Whether a group is too small for any estimate (elementwise on arrays)."""
    return (np.asarray(n) < GROUP_MIN_N) | (np.asarray(events) < GROUP_MIN_EVENTS)


def outcome_order(outcomes: pd.Series | list[str]) -> list[str]:
    """Death first (the outcome every reader asks about first), the others alphabetically."""
    names = sorted(set(outcomes))
    return sorted(names, key=lambda o: (o != "death", o))


def shipped_method(rows: pd.DataFrame, summary: dict[str, Any]) -> str | None:
    """The score whose groups the main page shows: the shipped SPHR score when this run has
    it, else the paper's SPHR, else the raw distance (the steadier ranking)."""
    record = summary.get("sphr") or {}
    present = set(rows["method"])
    for m in (record.get("shipped_sphr"), SHIPPED_SPHR, "sphr", "raw_euclidean"):
        if m and m in present:
            return m
    return None


def outcome_frame(rows: pd.DataFrame, outcomes: pd.DataFrame | None) -> pd.DataFrame:
    """One row per held-out (test) person, method and linked outcome, mode calibrated, that
    outcome's prevalent cases left out: eid, sex, method, outcome, age_years, score, group,
    bfh, time_years, event. A supervised comparator only on the outcome it was fitted to."""
    cols = ["eid", "sex", "method", "outcome", "age_years", "score", "group", "bfh",
            "time_years", "event"]
    if outcomes is None or outcomes.empty:
        return pd.DataFrame(columns=cols)
    r = rows.loc[(rows["mode"] == "calibrated") & (rows["partition"] == "test")]
    r = r.assign(bfh=r["label"] == 2 if "label" in r else False)
    o = outcomes.loc[~outcomes["prevalent"].astype(bool)]
    o = o.drop_duplicates(["eid", "outcome"])[["eid", "outcome", "time_years", "event"]]
    out = r[["eid", "sex", "method", "age_years", "score", "group", "bfh"]].merge(o, on="eid")
    own = [not is_supervised(m) or m.removeprefix("supervised_") == oc
           for m, oc in zip(out["method"], out["outcome"], strict=True)]
    out = out.loc[own]
    return out.assign(event=out["event"].astype(bool))[cols].reset_index(drop=True)


def yardstick(linked: dict[str, pd.DataFrame] | None) -> dict[str, pd.DataFrame]:
    """``{"beyond_age", "group_ordering"}``: the tables the risk stage wrote
    (``RUN/risk/linked_*.parquet``, handed over in ``linked``), read as they are; none
    without linked outcomes. Never recomputed: a run folder of an older layout, written before
    the stage wrote them, is refused when it is read (:func:`sphr.risk.pipeline.merge_risk`)."""
    linked = linked or {}
    return {k: linked[k] for k in YARDSTICK if linked.get(k) is not None}


def ordering(table: pd.DataFrame | None) -> pd.DataFrame:
    """The stage's group-ordering table (per sex, method and outcome) with ``shown``: whether
    the group's own estimates may be printed (the suppression rule)."""
    if table is None or table.empty:
        return pd.DataFrame(columns=[*ORDERING_COLUMNS, "shown"])
    out = _report_order(table)
    return out.assign(shown=~suppressed(out["n"], out["events"]))


def _report_order(table: pd.DataFrame) -> pd.DataFrame:
    """Rows by sex, outcome (death first) and method (the report's order), each block's
    rows kept in their order."""
    outcome_rank = {o: k for k, o in enumerate(outcome_order(table["outcome"]))}
    method_rank = {m: k for k, m in enumerate(ordered(table["method"].unique()))}
    t = table.assign(_o=table["outcome"].map(outcome_rank), _m=table["method"].map(method_rank))
    return t.sort_values(["sex", "_o", "_m"], kind="stable").drop(columns=["_o", "_m"]) \
        .reset_index(drop=True)


def gain(table: pd.DataFrame | None) -> pd.DataFrame:
    """The stage's beyond-age table: dC = C(age + score) - C(age) with its paired bootstrap
    interval per sex, method and outcome, death first and the methods in the report's order,
    with ``reference`` (PhenoAge, supervised comparators)."""
    if table is None or table.empty:
        return pd.DataFrame(columns=["sex", "method", "outcome", "n", "events", "dc", "dc_low",
                                     "dc_high", "reference"])
    t = _report_order(table.loc[~table["method"].isin(NOT_GAINED)])
    return t.assign(reference=t["method"].map(is_reference).astype(bool))


def crossfitted(rows: pd.DataFrame) -> bool:
    """Whether the rows came from the cross-fit (every participant scored out of fold)."""
    return "fold" in rows.columns and bool(rows["fold"].notna().any())


def reference_mask(rows: pd.DataFrame) -> np.ndarray:
    """The rows of the healthy people the bounds rest on: in a cross-fit every bona fide
    healthy person (out of fold), in the single split the calibration partition's."""
    bfh = (rows["label"] == 2).to_numpy()
    if crossfitted(rows):
        return bfh & rows["fold"].notna().to_numpy()
    return bfh & (rows["partition"] == "calibration").to_numpy()


def healthy_check(rows: pd.DataFrame, method: str) -> dict[str, dict[str, Any]]:
    """Per sex, how ``method``'s calibrated groups split the healthy people no bound saw:
    the bona fide healthy of the ``test`` partition, which in a cross-fit is every one of
    them (each read against centiles fitted without their fold). ``reference``: the healthy
    people the bounds rest on; ``shares``: group -> (share, Wilson 95% interval). A bound
    holds when about 95% / 4% / 1% of them fall in Normal / Lower / Higher Risk."""
    from sphr.risk.validation.groups import wilson

    mine = rows.loc[(rows["method"] == method) & (rows["mode"] == "calibrated")]
    out: dict[str, dict[str, Any]] = {}
    for sex, sub in mine.groupby("sex", sort=True):
        new = sub.loc[(sub["label"] == 2) & (sub["partition"] == "test"), "group"]
        n = len(new)
        shares = {}
        for g in GROUPS:
            k = int((new == g).sum())
            lo, hi = wilson(k, n)
            shares[g] = (k / n if n else np.nan, float(lo), float(hi))
        out[str(sex)] = {"reference": int(reference_mask(sub).sum()), "n": n, "shares": shares}
    return out


def flow(rows: pd.DataFrame, frame: pd.DataFrame, method: str | None,
         summary: dict[str, Any], exported: int | None, outcome: str | None) -> pd.DataFrame:
    """The participant flow per sex, one row a step with the reason people left it:
    export -> in the cohort -> scored by ``method`` -> held out -> with ``outcome`` records
    -> each group."""
    people = rows.drop_duplicates(["sex", "eid"])
    steps: list[dict[str, Any]] = []

    def step(what: str, counts: dict[str, int], why: str = "") -> None:
        steps.append({"step": what, **counts, "left out, and why": why})

    sexes = sorted(people["sex"].unique())
    if exported is not None:
        step("participants in the export", {"all": exported})
    kept = people.groupby("sex")["eid"].size().reindex(sexes, fill_value=0)
    left = summary.get("cohort_left_out") or {}
    why = "; ".join(f"{n:,} {reason.replace('_', ' ')}" for reason, n in left.items() if n)
    step("in the cohort", {**kept.to_dict(), "all": int(kept.sum())},
         "" if exported is None or exported == int(kept.sum()) else
         f"{exported - int(kept.sum()):,} not in a sex's cohort: "
         + (why or "see cohorts/cohort_report.json"))
    m = rows.loc[(rows["method"] == method) & (rows["mode"] == "calibrated")] \
        if method else rows.iloc[:0]
    scored = m.drop_duplicates(["sex", "eid"]).groupby("sex")["eid"].size() \
        .reindex(sexes, fill_value=0)
    unscored = {k.split("/")[0]: v for k, v in (summary.get("unscored") or {}).items()
                if k.split("/", 1)[-1] == method}
    step("scored by the groups' score", {**scored.to_dict(), "all": int(scored.sum())},
         "; ".join(f"{s}: {v['n']:,} ({v['reason']})" for s, v in unscored.items()))
    test = m.loc[m["partition"] == "test"].groupby("sex")["eid"].size() \
        .reindex(sexes, fill_value=0)
    if crossfitted(m):
        step("scored out of fold (cross-fit)", {**test.to_dict(), "all": int(test.sum())},
             "" if int(test.sum()) == int(scored.sum()) else "not scored out of fold")
    else:
        step("held out (test partition)", {**test.to_dict(), "all": int(test.sum())},
             "the rest fitted the models and set the bounds")
    if outcome is not None and method is not None:
        f = frame.loc[(frame["method"] == method) & (frame["outcome"] == outcome)]
        linked = f.groupby("sex")["eid"].size().reindex(sexes, fill_value=0)
        lost = int(test.sum()) - int(linked.sum())
        step(f"with {outcome.replace('_', ' ')} records",
             {**linked.to_dict(), "all": int(linked.sum())},
             f"{lost:,} prevalent cases (the event before baseline)" if lost > 0 else "")
        for g in GROUPS:
            k = f.loc[f["group"] == g].groupby("sex")["eid"].size().reindex(sexes, fill_value=0)
            step(f"  in {g}", {**k.to_dict(), "all": int(k.sum())})
    out = pd.DataFrame(steps)
    cols = ["step", *sexes, "all", "left out, and why"]
    return out.reindex(columns=cols)


def _pct(v: float) -> str:
    return "-" if not np.isfinite(v) else f"{100 * v:.1f}%"


def _cell(r: pd.Series, group: str) -> str:
    """"risk; HR (interval)" of one group and outcome, :data:`TOO_FEW` when suppressed."""
    if not r["shown"]:
        return TOO_FEW
    std = r.get("risk_age_standardized", np.nan)
    risk = _pct(r["risk"]) + (f" (age-standardized {_pct(std)})" if np.isfinite(std) else "")
    if group == NORMAL:
        return f"{risk}; HR 1 (reference)"
    hr = (f"HR {r['hr']:.2f} ({r['hr_low']:.2f}-{r['hr_high']:.2f})" if np.isfinite(r["hr"])
          else f"HR: {TOO_FEW} in Normal")
    return f"{risk}; {hr}"


def group_table(order: pd.DataFrame, sex: str, method: str) -> pd.DataFrame:
    """One sex's shipped groups: n and mean age (the first outcome's held-out people), then per
    outcome one cell "observed 10-year risk (Kaplan-Meier); age-adjusted hazard ratio against
    Normal", :data:`TOO_FEW` under the suppression rule; a last row gives each outcome's
    ordering verdict (:func:`ordering_label`: "not ordered" where the groups are not,
    "ordered, not beyond chance" where only the point estimates are) and its basis."""
    o = order.loc[(order["sex"] == sex) & (order["method"] == method)]
    names = outcome_order(o["outcome"])
    if not names:
        return pd.DataFrame()
    first = o.loc[o["outcome"] == names[0]].set_index("group")
    table = pd.DataFrame({"group": list(GROUPS)})
    table["n"] = [f"{int(first.loc[g, 'n']):,}" for g in GROUPS]
    table["mean age"] = [f"{first.loc[g, 'mean_age']:.1f}" if first.loc[g, "n"] else "-"
                         for g in GROUPS]
    verdict = {"group": "groups ordered?", "n": "", "mean age": ""}
    for name in names:
        by = o.loc[o["outcome"] == name].set_index("group")
        what = name.replace("_", " ")
        table[what] = [_cell(by.loc[g], g) for g in GROUPS]
        label, basis = ordering_label(by.reset_index()), str(by["basis"].iloc[0])
        verdict[what] = label if basis in ("none", "Lower and Higher Risk") \
            else f"{label} (on {basis} only)"
    return pd.concat([table, pd.DataFrame([verdict])], ignore_index=True)
