"""The risk stage's descriptive numbers that report.html draws and the Dagster asset shows.

Computations, not rendering: :func:`shares` (percent of participants per group) and
:func:`cumulative_new_diagnosis` (Kaplan-Meier share with a new diagnosis by group over the
repeat visits, :func:`sphr.survival.km_curve`). :mod:`sphr.risk.report` only renders them.
"""

from __future__ import annotations

import pandas as pd

from sphr.risk.intervals import GROUPS
from sphr.risk.validation.discrimination import outcome_frames
from sphr.survival import km_curve

__all__ = ["CURVE_COLUMNS", "OUTCOME", "cumulative_new_diagnosis", "shares"]

#: the outcome of the report's summary ("any" new diagnosis)
OUTCOME = "any"
CURVE_COLUMNS: tuple[str, ...] = ("sex", "method", "outcome", "group", "time_years", "cum_inc",
                                  "low", "high", "n", "events")


def shares(rows: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Percent of participants in each group, plus the "closer than Normal" percent."""
    counts = rows.groupby([*by, "group"]).size().unstack("group", fill_value=0)
    counts = counts.reindex(columns=list(GROUPS), fill_value=0)
    counts.columns.name = None
    n = counts.sum(axis=1)
    out = (100 * counts.div(n, axis=0)).round(2)
    below = (rows["distance"] < rows["normal_low"]).groupby([rows[c] for c in by]).mean()
    out["closer than Normal %"] = (100 * below).round(2)
    out.insert(0, "n", n)
    return out.reset_index()


def cumulative_new_diagnosis(rows: pd.DataFrame, followup: pd.DataFrame | None,
                             outcome: str = OUTCOME, mode: str = "calibrated") -> pd.DataFrame:
    """Share with a new diagnosis by group over the repeat visits (instances 1-3).

    Population: apparently healthy participants of the ``test`` partition (the validation
    population), ``mode``'s groups. Kaplan-Meier: time = years from baseline to the first
    visit reporting the diagnosis, censored at the last visit with a known answer (people
    attend different visits); the curve stops where fewer than 5 people are still followed.
    Columns :data:`CURVE_COLUMNS`: the shape of ``sphr.risk.validation.linked``'s cumulative
    incidence.
    """
    cols = list(CURVE_COLUMNS)
    pop = rows.loc[(rows["mode"] == mode) & (rows["partition"] == "test")
                   & rows["label"].isin((1, 2)), ["eid", "sex", "method", "group"]]
    if pop.empty or followup is None or followup.empty:
        return pd.DataFrame(columns=cols)
    _, surv = outcome_frames(followup)
    surv = surv[["eid", f"time_{outcome}", f"event_{outcome}"]].dropna()
    data = pop.merge(surv, on="eid", how="inner")
    frames = []
    for (sex, method, group), g in data.groupby(["sex", "method", "group"]):
        curve = km_curve(g[f"time_{outcome}"].to_numpy(float),
                         g[f"event_{outcome}"].to_numpy(bool))
        frames.append(curve.assign(sex=sex, method=method, outcome=outcome, group=group,
                                   n=len(g), events=int(g[f"event_{outcome}"].sum())))
    return pd.concat(frames, ignore_index=True)[cols] if frames else pd.DataFrame(columns=cols)
