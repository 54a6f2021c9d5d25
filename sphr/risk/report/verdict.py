"""The main report's verdict box: 3-5 sentences, each formatted from one frame of
:mod:`sphr.risk.report.frames` (change the frame, the sentence changes; no number is typed
into a template).

1. :func:`ordering_sentence`: are the shipped score's groups ordered by risk of the first
   outcome (death), per sex, with the hazard ratio the verdict rests on;
2. :func:`across_sentence`: how many (sex, score, outcome) have ordered groups;
3. :func:`gain_sentence`: how much the scores add to age (dC);
4. :func:`stability_sentence`: whether the shipped SPHR passed its pre-registered rule, and where
   that was measured (the development set, not this cohort);
5. :func:`population_sentence`: who is scored outside the ages the bounds were set on;
6. :func:`higher_risk_sentence`: where the shipped score's Higher Risk group is nearly empty
   because its bound is a parametric fallback, that it is and why.

"Ordered" is read from the stage's group-ordering table; where the point estimates are
ordered but a hazard ratio the verdict rests on has a 95% interval that reaches 1, the
sentence says "ordered, not beyond chance" (:func:`~sphr.risk.report.frames.ordering_label`,
the same words as the table's cell).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from sphr.risk.report.frames import NOT_BEYOND_CHANCE, ordering_label, outcome_order
from sphr.risk.report.names import is_reference
from sphr.risk.report.trust import SEX_NAMES, mean_gain, plain_name


def _who(sex: str) -> str:
    return SEX_NAMES.get(sex, sex)


def _hr_text(by: pd.DataFrame, group: str) -> str:
    r = by.loc[group]
    return f"{group} {r['hr']:.2f} ({r['hr_low']:.2f}-{r['hr_high']:.2f})"


def ordering_sentence(order: pd.DataFrame, method: str, outcome: str, *,
                      people: str = "held-out people of this cohort") -> str | None:
    """Whether ``method``'s groups are ordered by risk of ``outcome``, per sex, with the
    age-adjusted hazard ratios against Normal that the verdict rests on; ``people``: whose
    outcomes they are."""
    o = order.loc[(order["method"] == method) & (order["outcome"] == outcome)]
    if o.empty:
        return None
    parts = []
    for sex, sub in o.groupby("sex", sort=True):
        by = sub.set_index("group")
        status, basis = ordering_label(sub), str(sub["basis"].iloc[0])
        if basis == "Lower and Higher Risk":
            why = f"{_hr_text(by, 'Lower Risk')}, {_hr_text(by, 'Higher Risk')}"
        elif basis in by.index:
            why = _hr_text(by, basis)
        else:
            why = f"fewer than {int(by['events'].min())} events in a group"
        # "ordered, not beyond chance, in women": the label's own comma closed
        sep = ", " if "," in status else " "
        parts.append(f"{status}{sep}in {_who(str(sex))} ({why})")
    return (f"Is Higher Risk at higher risk? The groups of {plain_name(method)}, the shipped "
            f"score, are {' and '.join(parts)} for {outcome.replace('_', ' ')}: age-adjusted "
            f"hazard ratio against Normal, {people}.")


def across_sentence(order: pd.DataFrame) -> str | None:
    """How many (sex, score, outcome) have ordered groups (and how many of those only by
    their point estimates), and under which scores the groups of the first outcome are
    ordered in every sex."""
    if order.empty:
        return None
    keys = ["sex", "method", "outcome"]
    labels = {k: ordering_label(b) for k, b in order.groupby(keys, sort=False)}
    v = order.drop_duplicates(keys)
    v = v.assign(label=[labels[(r.sex, r.method, r.outcome)] for r in v.itertuples()])
    counts = v["status"].value_counts()
    chance = int((v["label"] == NOT_BEYOND_CHANCE).sum())
    first = outcome_order(v["outcome"])[0]
    f = v.loc[v["outcome"] == first]
    names = [plain_name(m) + (" (not beyond chance)" if (s["label"] == NOT_BEYOND_CHANCE).any()
                          else "")
             for m, s in f.groupby("method", sort=True) if (s["status"] == "ordered").all()]
    what = first.replace("_", " ")
    return (f"Across every score with groups and every linked outcome ({len(v)} sex, score and "
            f"outcome combinations), the groups are ordered in {int(counts.get('ordered', 0))}"
            + (f" ({chance} of them not beyond chance)" if chance else "") + ", "
            f"not ordered in {int(counts.get('not ordered', 0))} and too few to tell in "
            f"{int(counts.get('too few', 0))}; for {what}, ordered in every sex under "
            + (", ".join(names) if names else "no score") + ".")


def _dc(r: pd.Series) -> str:
    return f"{r['dc']:+.3f} ({r['dc_low']:+.3f} to {r['dc_high']:+.3f})"


def gain_sentence(gain: pd.DataFrame, outcome: str) -> str | None:
    """The largest gain over age in C for ``outcome`` among the distances, per sex, and the
    scores whose interval lies above 0."""
    g = gain.loc[(gain["outcome"] == outcome) & ~gain["reference"].astype(bool)]
    g = g.dropna(subset=["dc"])
    if g.empty:
        return None
    parts, above = [], []
    for sex, sub in g.groupby("sex", sort=True):
        best = sub.loc[sub["dc"].idxmax()]
        parts.append(f"{plain_name(best['method'])} in {_who(str(sex))}, {_dc(best)}")
        above += [f"{plain_name(m)} ({_who(str(sex))})"
                  for m in sub.loc[sub["dc_low"] > 0, "method"]]
    return (f"Beyond age, the largest gain in Harrell's C for {outcome.replace('_', ' ')} "
            f"(dC = C(age + score) - C(age), 95% interval) is {'; '.join(parts)}; "
            + ("interval above 0: " + ", ".join(above) if above
               else "no distance's interval lies above 0") + ".")


def stability_sentence(record: dict[str, Any] | None, method: str | None) -> str | None:
    """The pre-registered rule's verdict on the shipped SPHR score, naming where it was
    measured (the development set), or that it was not measured. A record of the rule by dC
    names it by what the score adds to age and gives each sex's mean dC; an older record's
    rule (the refit spread of C) is named the stability rule, as it was."""
    if not record or not method or not method.startswith("sphr"):
        return None
    entry = record.get("spread") or {}
    rule = entry.get("rule") or {}
    verdicts = {sex: by[method] for sex, by in rule.items() if method in by}
    if not verdicts:
        return (f"The stability of {plain_name(method)} from fit to fit has not been measured for "
                "this run's training settings (docs/METHODS.md, \"SPHR's stability from fit "
                "to fit\").")
    said = [f"{'passes' if r['passes'] else 'does not pass'} in {_who(sex)}{_mean_gain(r)}"
            for sex, r in sorted(verdicts.items())]
    where = (f"measured on the development set (NHANES, {entry['n']:,} people, "
             f"{entry['deaths']:,} deaths), not on this cohort" if "n" in entry
             else "measured on the development set, not on this cohort")
    by_dc = any("mean_dc" in r for r in verdicts.values())
    name = "rule of what it adds to age" if by_dc else "stability rule"
    return (f"By the pre-registered {name}, {where}, {plain_name(method)} "
            f"{' and '.join(said)}.")


def _mean_gain(r: dict[str, Any]) -> str:
    """`` (mean dC +0.056, 95% interval +0.022 to +0.089)`` of one sex's rule entry, or ''."""
    g = mean_gain(r)
    return f" (mean dC {g[0]:+.3f}, 95% interval {g[1]:+.3f} to {g[2]:+.3f})" if g else ""


#: one person of a sex, in a sentence
ONE_PERSON = {"female": "woman", "male": "man"}
#: fewer held-out people than this in a sex's Higher Risk group: the verdict says why
FEW_HIGHER = 10


def higher_risk_sentence(held: dict[str, int], calibration: dict[str, int], tail: str, *,
                         people: str = "the held-out people") -> str | None:
    """Where the shipped score's Higher Risk group holds fewer than :data:`FEW_HIGHER` of
    ``people`` in a sex (``held``, per sex) and its 99% bound rests on fewer calibration BFH
    (``calibration``, per sex) than a conformal bound needs: the counts, and that the bound is
    the ``tail`` fallback, which is conservative on standardized scores (docs/METHODS.md, "The
    Higher Risk bound with fewer than 99 calibration BFH")."""
    from sphr.risk.calibration import LOWER_LEVEL, TAIL_NAMES, conformal_rank

    fallback = {s for s, n in calibration.items() if conformal_rank(n, LOWER_LEVEL) > n}
    if not any(held.get(s, 0) < FEW_HIGHER for s in fallback):
        return None
    counts = " and ".join(f"{held.get(s, 0):,} "
                          + (ONE_PERSON.get(str(s), str(s)) if held.get(s, 0) == 1
                             else _who(str(s))) for s in sorted(calibration))
    cal = " / ".join(f"{calibration[s]:,}" for s in sorted(calibration))
    return (f"Higher Risk holds {counts} among {people}: its 99% bound rests on {cal} "
            f"calibration BFH, fewer than the 99 a conformal bound needs, so it is the "
            f"{TAIL_NAMES[tail]} fallback ([risk] tail_bound), which leaves few people above it "
            "on standardized scores; where a group is that small the verdict above rests on "
            "Lower Risk.")


def in_higher_risk(rows: pd.DataFrame, method: str, partition: str | None = None
                   ) -> dict[str, int]:
    """Per sex, the people of ``rows`` (of ``partition`` where given) in ``method``'s
    calibrated Higher Risk group."""
    from sphr.risk.intervals import HIGHER_RISK

    mine = rows.loc[(rows["method"] == method) & (rows["mode"] == "calibrated")]
    if partition is not None:
        mine = mine.loc[mine["partition"] == partition]
    return {str(sex): int((sub["group"] == HIGHER_RISK).sum())
            for sex, sub in mine.groupby("sex", sort=True)}


def calibration_bfh(rows: pd.DataFrame, method: str) -> dict[str, int]:
    """Per sex, the calibration BFH that set ``method``'s calibrated bounds (the risk stage's
    rows)."""
    from sphr.labels import BONA_FIDE_HEALTHY
    from sphr.risk.report.frames import reference_mask

    mine = rows.loc[(rows["method"] == method) & (rows["mode"] == "calibrated")]
    mine = mine.loc[reference_mask(mine)]
    return {str(sex): int((sub["label"] == BONA_FIDE_HEALTHY).sum())
            for sex, sub in mine.groupby("sex", sort=True)}


def population_sentence(ages: pd.DataFrame) -> str | None:
    """Who among the held-out people lies outside the ages of the healthy people that set the
    bounds (``ages``: sex, age_years, role in {"reference", "scored"})."""
    if ages.empty or not (ages["role"] == "scored").any():
        return None
    parts, outside, total = [], 0, 0
    for sex, sub in ages.groupby("sex", sort=True):
        ref = sub.loc[sub["role"] == "reference", "age_years"].to_numpy(float)
        scored = sub.loc[sub["role"] == "scored", "age_years"].to_numpy(float)
        if not ref.size:
            continue
        k = int(((scored < ref.min()) | (scored > ref.max())).sum())
        outside, total = outside + k, total + scored.size
        parts.append(f"{_who(str(sex))} {np.min(ref):.0f}-{np.max(ref):.0f}")
    if not parts:
        return None
    share = 100 * outside / max(total, 1)
    return (f"The model is applied here to the held-out part of the cohort it was fitted on; "
            f"{outside:,} of {total:,} held-out people ({share:.1f}%) are outside the ages of "
            f"the healthy people who set the bounds ({'; '.join(parts)}) and take the nearest "
            "age group's bounds.")


def reading_line(gain: pd.DataFrame, sex: str) -> str | None:
    """The forest plot's one-line reading for one sex: per outcome, the distances whose dC
    interval lies above 0."""
    g = gain.loc[(gain["sex"] == sex) & ~gain["method"].map(is_reference).astype(bool)]
    if g.empty:
        return None
    parts = []
    for outcome in outcome_order(g["outcome"]):
        sub = g.loc[(g["outcome"] == outcome)].dropna(subset=["dc"])
        if sub.empty:  # no distance had enough events for this outcome: say nothing of it
            continue
        up = [plain_name(m) for m in sub.loc[sub["dc_low"] > 0, "method"]]
        parts.append(f"{outcome.replace('_', ' ')}: "
                     + (", ".join(up) if up else f"none of {len(sub)}"))
    if not parts:
        return None
    return f"{_who(sex).capitalize()}, distances adding to age beyond chance: " \
        + "; ".join(parts) + "."
