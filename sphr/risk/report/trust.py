"""The report's "How far one SPHR fit can be trusted" block: which SPHR score ships and the
refit spread measured for the way its network was trained (:mod:`sphr.risk.refits`)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from sphr.risk.report.names import method_name

SEX_NAMES: dict[str, str] = {"female": "women", "male": "men"}
#: where the study behind the spread is written up
STUDY = "docs/notes/SPHR_RISK.md"


def _cell(v: dict[str, float] | None) -> str:
    if not v:
        return "-"
    return f"{v['mean']:.3f}, SD {v['sd']:.3f} [{v['min']:.3f}-{v['max']:.3f}]"


def plain_name(method: str) -> str:
    """The method's display name without the "(shipped)" the name itself may carry."""
    return method_name(method).replace(" (shipped)", "")


def mean_gain(r: dict[str, Any]) -> tuple[float, float, float] | None:
    """A rule entry's mean dC over refits and its 95% interval (the rule by dC); None for an
    entry of the rule before it, or where the interval was not estimable."""
    lo, hi = (r.get("interval") or (None, None))[:2]
    if r.get("mean_dc") is None or lo is None or hi is None:
        return None
    return r["mean_dc"], lo, hi


def spread_table(spread: dict[str, dict[str, dict[str, float]]], shipped: str | None,
                 beyond_age: list[dict[str, Any]] | None = None) -> pd.DataFrame:
    """One row per method of the recorded spread (the shipped SPHR score first, the raw
    distance, the yardstick, last), one column per sex: mean, SD and min-max of the pooled
    death C over refits; with ``beyond_age`` (the record's per-refit yardstick) also what the
    score adds to age, dC, mean and min-max over refits: the figure the rule judges by."""
    methods = list(dict.fromkeys(m for by in spread.values() for m in by))
    methods.sort(key=lambda m: (m != shipped, m == "raw_euclidean", m))
    rows = []
    for m in methods:
        name = method_name(m) + (" (shipped)" if m == shipped and "shipped" not in
                                 method_name(m) else "")
        row = {"method": name}
        for s, by in spread.items():
            row[f"{SEX_NAMES.get(s, s)}: C over refits"] = _cell(by.get(m))
            if beyond_age:
                row[f"{SEX_NAMES.get(s, s)}: dC over refits"] = _gain_cell(beyond_age, s, m)
        rows.append(row)
    return pd.DataFrame(rows)


def _gain_cell(beyond_age: list[dict[str, Any]], sex: str, method: str) -> str:
    """Mean dC over the refits and its min-max, or "-" where a refit lacks it."""
    dc = [(refit.get(sex) or {}).get(method, {}).get("dc") for refit in beyond_age]
    if not dc or any(d is None or d[0] is None for d in dc):
        return "-"
    gains = [float(d[0]) for d in dc]
    return (f"{sum(gains) / len(gains):+.3f} [{min(gains):+.3f} to {max(gains):+.3f}]")


def refit_sd(record: dict[str, Any] | None) -> dict[tuple[str, str], float]:
    """(sex, method) -> the measured refit SD of the death C (empty when not measured)."""
    spread = ((record or {}).get("spread") or {}).get("spread") or {}
    return {(sex, m): v["sd"] for sex, by in spread.items() for m, v in by.items()}


def sphr_trust(record: dict[str, Any] | None, methods: list[str]) -> dict[str, Any] | None:
    """The block's sentence and table (a frame: the page renders it); None when no SPHR
    score is in the report."""
    from sphr.risk.refits import SPHR_METHODS

    if not record or not any(m in SPHR_METHODS for m in methods):
        return None
    shipped = record.get("shipped_sphr")
    training = record.get("training") or {}
    profile, candidate = training.get("profile"), training.get("candidate")
    how = (f"the {profile} profile" if profile else "training settings of no profile") + \
        ("" if candidate in (None, "default") else f" with {candidate}")
    first = (f"The shipped SPHR score is {plain_name(shipped)}." if shipped else
             "The shipped SPHR score was not computed in this run.")
    entry = record.get("spread")
    if not entry:
        return {"sentence": f"{first} Its refit spread has not been measured for {how}: how far "
                            f"one fit of SPHR can be trusted is not known here ({STUDY}).",
                "table": None}
    sentence = (
        f"{first} SPHR changes from fit to fit. On the development set ({entry['n']:,} "
        f"people, {entry['deaths']:,} deaths) every person was scored by a model fitted "
        f"without them, {entry['k']} times with other seeds ({entry['folds']}-fold "
        f"cross-fit, {how}, {entry['space']} space): the table gives each score's Harrell's C "
        f"for death over those refits, mean, SD and range"
        + (", and what it adds to age, dC = C(age + score) - C(age), mean and range"
           if entry.get("beyond_age") else "")
        + f". A score whose range straddles 0.5 "
        f"can rank death one way in one fit and the other way in the next. Measured "
        f"{entry['date']} at {entry['commit']} by \"{entry['command']}\" ({STUDY}).")
    return {"sentence": sentence + _verdict(entry.get("rule"), shipped),
            "table": spread_table(entry["spread"], shipped, entry.get("beyond_age"))}


def _verdict(rule: dict[str, Any] | None, shipped: str | None) -> str:
    """The pre-registered rule's verdict on the shipped score, per sex: the rule by dC, or
    for a record measured before it, the stability rule (the refit spread of C)."""
    if not rule or not shipped:
        return ""
    parts, failed = [], []
    for sex, by in rule.items():
        r = by.get(shipped)
        if r is None:
            continue
        why = [] if r["passes"] else _reasons(r)
        g = mean_gain(r)
        gain = f" (mean dC {g[0]:+.3f} [{g[1]:+.3f}, {g[2]:+.3f}])" if g else ""
        parts.append(f"in {SEX_NAMES.get(sex, sex)} it " + (
            f"passes{gain}" if r["passes"] else "does not pass (" + "; ".join(why) + ")"))
        if not r["passes"]:
            failed.append(SEX_NAMES.get(sex, sex))
    if not parts:
        return ""
    # what a reader forwarding the report should do with a score that did not pass
    caution = "" if not failed else (
        f" So in {' and '.join(failed)} its groups are one fit's ordering, which the next fit "
        f"of the same data may not keep; {method_name('raw_euclidean')}, measured over the same "
        f"refits, is the steadier ranking.")
    by_dc = any("mean_dc" in r for by in rule.values() for r in by.values())
    name = ("\"Higher risk for your age\": what it adds to age, dC = C(age + score) - C(age)"
            if by_dc else "\"SPHR's stability from fit to fit\"")
    return (f" By the project's pre-registered rule (docs/METHODS.md, {name}), the shipped "
            "score: " + "; ".join(parts) + "." + caution)


def _reasons(r: dict[str, Any]) -> list[str]:
    """Why a score did not pass: the rule by dC (every refit's gain over age, its interval,
    the refit spread of C) or, for a record measured before it, the refit-SD rule."""
    if "mean_dc" in r:
        lo = r["interval"][0]
        return (([] if r["dc_interval_above_0"] else
                 [f"its mean gain over age, dC {r['mean_dc']:+.3f}, has an interval reaching "
                  f"{lo:+.3f}" if lo is not None else "its gain over age was not estimable"])
                + ([] if r["every_refit_dc_above_0"] else ["a refit's dC is not above 0"])
                + ([] if r["c_sd_at_most"] else
                   [f"its refit SD of C ({r['c_sd']:.3f}) exceeds 0.02"]))
    return (([] if r["above_half"] else ["its interval reaches 0.5"])
            + ([] if r["sd_at_most_raw"] else
               [f"its refit SD ({r['sd']:.3f}) exceeds the raw distance's ({r['raw_sd']:.3f})"]))


def with_refit_sd(frame: pd.DataFrame, record: dict[str, Any] | None) -> pd.DataFrame:
    """A linked-records table with a column of the measured refit SD of the death C beside
    each SPHR row (blank elsewhere); unchanged when nothing was measured."""
    sds = refit_sd(record)
    if not sds or not {"sex", "method"} <= set(frame.columns):
        return frame
    out = frame.copy()
    out["refit SD of death C (development set)"] = [
        sds.get((str(s), str(m)), float("nan")) for s, m in zip(out["sex"], out["method"],
                                                                 strict=True)]
    return out
