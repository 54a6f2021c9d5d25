"""The summary's sentences, generated from the numbers (:func:`summary_sentences`): the
shares per group, the held-out BFH in Normal, discrimination against the references and
the linked outcomes."""

from __future__ import annotations

import pandas as pd

from sphr.risk.intervals import GROUPS, HIGHER_RISK, LOWER_RISK, NORMAL
from sphr.risk.report.names import (
    SHORT,
    is_reference,
    main_outcome,
    method_name,
    ordered,
    short_name,
)
from sphr.risk.validation.curves import OUTCOME


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
        text += (f" ({short_name(shipped)} {100 * s[NORMAL]:.0f} / {100 * s[LOWER_RISK]:.0f} / "
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
    above = [method_name(m) for m in ordered(peers.loc[peers["auroc_low"] > 0.5, "method"])]
    text = (f"At the first repeat visit (n={int(best['n'])}, {int(best['events'])} new "
            f"diagnoses) the highest AUROC is {method_name(best['method'])} at {best['auroc']:.2f} "
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
    above = [method_name(m) for m in ordered(g.loc[g["c_index_low"] > 0.5, "method"])]
    return (f"Over visits 1-3 ({int(best['n_survival'])} people, "
            f"{int(best['events_survival'])} new diagnoses) the best C-index is "
            f"{method_name(best['method'])} {best['c_index']:.2f} "
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
    from sphr.beyond_age import GROUP_MIN_N

    est = est.set_index("method").loc[ordered(est["method"])].reset_index()
    # no estimate from a group of fewer than GROUP_MIN_N people (the report's one rule)
    small = est.loc[est["n_higher"] < GROUP_MIN_N, "method"]
    est = est.loc[est["n_higher"] >= GROUP_MIN_N]
    parts = [f"{method_name(r.method)} {r.rr_higher_vs_normal:.2f} ({r.rr_low:.2f}-"
             f"{r.rr_high:.2f}, {int(r.n_higher)} in Higher Risk)" for r in est.itertuples()]
    text = ("Risk ratio Higher Risk vs Normal (Katz interval, not adjusted for multiplicity; "
            "whether Higher Risk develops more disease is judged by the one-sided exact test "
            "with Holm's correction in the table below): " + "; ".join(parts) + "."
            if parts else "")
    if len(small):
        text += (f" Too few in Higher Risk for an estimate (under {GROUP_MIN_N} people): "
                 f"{', '.join(method_name(m) for m in small)}.")
    if len(g) > len(est) + len(small):
        text += f" The other {len(g) - len(est) - len(small)} method(s) had nobody in Higher Risk."
    return text.strip() or None


def _reference_sentence(d: pd.DataFrame) -> str | None:
    parts = []
    for m in ("supervised_xgboost", "phenoage", "age"):
        r = d[d["method"] == m]
        if r.empty:
            continue
        r = r.iloc[0]
        for col, what in (("auroc", "AUROC"), ("c_index", "C-index")):
            if col in r and pd.notna(r[col]):
                name = SHORT.get(m, method_name(m)).lower() if m != "phenoage" \
                    else method_name(m)
                parts.append(f"{name} {what} {r[col]:.2f}")
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
        text += (f"the best C-index among the distances is {method_name(best['method'])} "
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
        above = [method_name(m) for m in ordered(g.loc[g["hr_outside_low"] > 1, "method"])]
        text += (". Outside Normal vs Normal, age-adjusted hazard ratio above 1 for "
                 + (", ".join(above) if above else "no distance method"))
    return text + "."


def validated(disc: pd.DataFrame) -> bool:
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
        if d is not None and len(d) and validated(d):
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
