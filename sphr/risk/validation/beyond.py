"""Higher risk *for your age*, measured on linked outcomes: the beyond-age yardstick
(:mod:`sphr.beyond_age`) of every score and the ordering of every method's groups, for each
sex and outcome, on the people the linked validation uses (held-out participants, each
outcome's prevalent cases left out).

* ``beyond_age``: sex, method, outcome, n, events, C of age alone and of age + score, dC with
  its paired bootstrap interval, the age-adjusted hazard ratio per SD, Spearman of the score
  with age among everyone and among the bona fide healthy (``label`` 2; NaN without labels);
* ``group_ordering``: sex, method, outcome, group (Normal, Lower Risk, Higher Risk, outside
  Normal), n, events, mean age, Kaplan-Meier risk by 10 years, the age-adjusted hazard ratio
  against Normal, and the verdict (``status``: ordered / not ordered / too few; ``basis``).

A score is judged by what it adds to age because the groups are relative to age: a score that
tracks age gains or loses C through age, not through health (docs/METHODS.md, "Higher risk for
your age").
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

import numpy as np
import pandas as pd

from sphr.beyond_age import BeyondAge, ordering_table, paired_figures
from sphr.labels import BONA_FIDE_HEALTHY
from sphr.survival import resample_counts

#: the columns of the ``beyond_age`` table
BEYOND_COLUMNS: tuple[str, ...] = ("sex", "method", "outcome", *BeyondAge.__dataclass_fields__)
#: the horizon of the groups' risk
HORIZON = 10.0


def _outcome_rows(outcomes: pd.DataFrame, name: str) -> pd.DataFrame:
    oc = outcomes.loc[(outcomes["outcome"] == name) & ~outcomes["prevalent"].astype(bool)]
    return oc.drop_duplicates("eid").set_index("eid")


def beyond_age_tables(scores: pd.DataFrame, outcomes: pd.DataFrame, *, n_bootstrap: int,
                      seed: int, evaluated_on: Callable[[str, str], bool] | None = None
                      ) -> dict[str, pd.DataFrame]:
    """``{"beyond_age", "group_ordering"}`` (module docstring). ``scores``: eid, sex, method,
    score, group, age_years and, where known, label; ``outcomes``: outcomes.parquet."""
    rule = evaluated_on or (lambda method, outcome: True)
    rows, orders = [], []
    for sex in sorted(scores["sex"].unique(), key=str):
        sub = scores.loc[scores["sex"] == sex]
        for name in dict.fromkeys(outcomes["outcome"]):
            oc = _outcome_rows(outcomes, name)
            people = sub.loc[sub["eid"].isin(oc.index)]
            if people.empty:
                continue
            people = people.assign(time_years=oc.loc[people["eid"], "time_years"].to_numpy(float),
                                   event=oc.loc[people["eid"], "event"].to_numpy(int) == 1)
            rows += _beyond_rows(people, sex, name, n_bootstrap, seed, rule)
            grouped = people.dropna(subset=["group"])
            grouped = grouped.loc[[rule(m, name) for m in grouped["method"]]]
            if len(grouped):
                orders.append(ordering_table(grouped.assign(outcome=name),
                                             keys=["sex", "method", "outcome"],
                                             age="age_years", horizon=HORIZON))
    ordering = (pd.concat(orders, ignore_index=True) if orders
                else ordering_table(pd.DataFrame(columns=["sex", "method", "outcome", "group",
                                                          "time_years", "event", "age_years"]),
                                    keys=["sex", "method", "outcome"], age="age_years"))
    return {"beyond_age": pd.DataFrame.from_records(rows, columns=list(BEYOND_COLUMNS)),
            "group_ordering": ordering}


def _beyond_rows(people: pd.DataFrame, sex: str, outcome: str, n_bootstrap: int, seed: int,
                 rule: Callable[[str, str], bool]) -> list[dict]:
    """One row per method: the yardstick on one sex's people of one outcome, every method on
    the same resamples of the same people (paired)."""
    wide = people.pivot_table(index="eid", columns="method", values="score", aggfunc="first")
    first = people.drop_duplicates("eid").set_index("eid").loc[wide.index]
    bfh = (first["label"].to_numpy() == BONA_FIDE_HEALTHY) if "label" in first else None
    rng = np.random.default_rng([seed, zlib.crc32(str(sex).encode()),
                                 zlib.crc32(outcome.encode()), 0xBE7])
    counts = resample_counts(rng, len(wide), n_bootstrap)
    figures = paired_figures(first["time_years"], first["event"], first["age_years"],
                             {m: wide[m] for m in wide.columns if rule(m, outcome)}, bfh=bfh,
                             resamples=counts, seed=seed)
    return [{"sex": sex, "method": m, "outcome": outcome, **fig.as_dict()}
            for m, (fig, _) in figures.items()]


def scored_tables(rows: pd.DataFrame, outcomes: pd.DataFrame, *, n_bootstrap: int, seed: int,
                  partition: str | None = None) -> dict[str, pd.DataFrame]:
    """:func:`beyond_age_tables` of ``risk_groups`` rows (mode calibrated; of ``partition``
    only when given) against their people's ``outcomes`` (an ``outcomes.parquet`` frame): how
    the risk stage (its held-out people), ``sphr score`` and the refresh judge the groups the
    same way (a supervised comparator on its own outcome only)."""
    from sphr.risk.supervised import evaluated_on

    pop = rows.loc[rows["mode"] == "calibrated"]
    if partition is not None:
        pop = pop.loc[pop["partition"] == partition]
    pop = pop[[c for c in ("eid", "sex", "method", "score", "group", "age_years", "label")
               if c in pop]]
    outcomes = outcomes.loc[outcomes["eid"].isin(pop["eid"])]
    return beyond_age_tables(pop, outcomes, n_bootstrap=n_bootstrap, seed=seed,
                             evaluated_on=evaluated_on)


def judged_groups(rows: pd.DataFrame, outcomes: pd.DataFrame | None, why_not: str, *,
                  n_bootstrap: int, seed: int
                  ) -> tuple[dict[str, pd.DataFrame] | None, dict[str, object]]:
    """(the :func:`scored_tables` of the people scored, or None; what ``score_report.json`` /
    ``refresh.json`` say of it): judged against ``outcomes`` where there are any and someone
    scored into a group has a record, else not judged and why (``why_not``: why there are no
    records)."""
    if outcomes is None or outcomes.empty:
        return None, {"judged": False, "why": why_not}
    tables = scored_tables(rows, outcomes, n_bootstrap=n_bootstrap, seed=seed)
    if tables["group_ordering"].empty:
        return None, {"judged": False, "why": "no person scored into a group has linked "
                                              "records of an outcome"}
    return tables, {"judged": True,
                    "outcomes": sorted(tables["group_ordering"]["outcome"].unique())}
