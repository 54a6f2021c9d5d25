"""Each participant's follow-up: where it ends and which first records fall inside it.

Follow-up ends at the earliest of the outcome's sources' censoring dates for the participant's
country (from the baseline assessment centre, 54), the date of death and the date lost to
follow-up (191). A first record on or before the baseline assessment is prevalent.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from sphr.data.fields import ASSESSMENT_CENTRE, CENTRE_COUNTRY, LOST_TO_FOLLOW_UP
from sphr.data.outcomes.cells import LinkedCells
from sphr.data.outcomes.definitions import COUNTRIES, DAYS_PER_YEAR, SOURCES, Outcome
from sphr.data.outcomes.plan import LinkedPlan

if TYPE_CHECKING:  # polars loads on use
    import polars as pl

#: an outcome as built: its definition, the sources the export has, the censoring date per
#: country (the earliest of those sources' dates)
Built = tuple[Outcome, list[str], dict[str, dt.date]]


def lost_to_follow_up(cells: LinkedCells, df: pl.DataFrame, rows: pl.DataFrame,
                      first_row: int, plan: LinkedPlan) -> pl.DataFrame | None:
    """eid, lost_date: the block's participants lost to follow-up (191), None without 191."""
    import polars as pl

    if plan.lost is None:
        return None
    lost = cells.dates(cells.long(df, {plan.lost: 0}, LOST_TO_FOLLOW_UP, first_row,
                                  aligned=True), LOST_TO_FOLLOW_UP, first_row)
    return (lost.filter(pl.col("date").is_not_null()).join(rows, on="row")
            .select("eid", pl.col("date").alias("lost_date")))


def centre_countries(cells: LinkedCells, df: pl.DataFrame, rows: pl.DataFrame,
                     first_row: int, plan: LinkedPlan) -> pl.DataFrame | None:
    """eid, country: from the baseline assessment centre (54-0.0), None without 54."""
    import polars as pl

    col = plan.centre
    if col is None:
        return None
    labels = {v.lower(): k for k, v in (ASSESSMENT_CENTRE.coding or {}).items()}
    text = pl.col("text").str.strip_chars()
    code = pl.coalesce(text.cast(pl.Float64, strict=False).cast(pl.Int64, strict=False),
                       text.str.to_lowercase().replace_strict(labels, default=None,
                                                              return_dtype=pl.Int64))
    centres = (df.select(pl.int_range(pl.len(), dtype=pl.UInt32).alias("row"),
                         pl.col(col).alias("text"))
               .filter(text.is_not_null() & (text != ""))
               .with_columns(country=code.replace_strict(CENTRE_COUNTRY, default=None,
                                                         return_dtype=pl.String)))
    bad = centres.filter(pl.col("country").is_null())
    if not bad.is_empty():
        r = bad.row(0, named=True)
        raise cells.error(f"{r['text'][:60]!r} is not a UK Biobank assessment centre "
                          "(coding 10, e.g. 11010 or 'Leeds')", col, ASSESSMENT_CENTRE,
                          first_row + r["row"])
    return centres.join(rows, on="row").select("eid", "country")


def first_records(built: list[Built], events: pl.DataFrame,
                  any_records: pl.DataFrame) -> pl.DataFrame:
    """(eid, outcome, first_source, first_date): each participant's first record per outcome,
    from the outcome's sources only; on one day, the source earlier in :data:`SOURCES`."""
    import polars as pl

    # every outcome's candidate records in one frame, then each participant's first per outcome
    allowed = pl.DataFrame([(o.name, s) for o, used, _ in built for s in used],
                           schema={"outcome": pl.String, "source": pl.String}, orient="row")
    coded = [o.name for o, _, _ in built if o.has_codes]
    any_of = pl.DataFrame([(o.name, s) for o, used, _ in built if not o.has_codes
                           for s in used],
                          schema={"outcome": pl.String, "source": pl.String}, orient="row")
    cand = pl.concat([
        events.filter(pl.col("outcome").is_in(coded)).join(allowed, on=["outcome", "source"]),
        any_records.join(any_of, on="source").select("eid", "outcome", "source", "date"),
    ])
    priority = {s: i for i, s in enumerate(SOURCES)}
    return (cand.with_columns(prio=pl.col("source").replace_strict(priority,
                                                                   return_dtype=pl.Int8))
            .sort("outcome", "eid", "date", "prio")
            .unique(["outcome", "eid"], keep="first", maintain_order=True)
            .select("eid", "outcome", pl.col("source").alias("first_source"),
                    pl.col("date").alias("first_date")))


def follow_up(base: pl.DataFrame, built: list[Built], first: pl.DataFrame) -> pl.DataFrame:
    """Every participant x outcome with ``prevalent``, ``event`` (incident, before censoring,
    loss to follow-up and death), ``end`` and ``time_years``. ``base``: eid, baseline_date,
    country, death_date, lost_date."""
    import polars as pl

    table = pl.DataFrame(
        [(o.name, i, country, censor[country]) for i, (o, _, censor) in enumerate(built)
         for country in COUNTRIES],
        schema={"outcome": pl.String, "_order": pl.Int16, "country": pl.String,
                "censor": pl.Date}, orient="row")
    f = base.join(table, on="country").join(first, on=["eid", "outcome"], how="left")
    has = pl.col("first_date").is_not_null()
    prevalent = has & (pl.col("first_date") <= pl.col("baseline_date"))
    end = pl.min_horizontal("censor", "death_date", "lost_date")
    f = f.with_columns(prevalent=prevalent, end=end)
    event = has & ~pl.col("prevalent") & (pl.col("first_date") <= pl.col("end"))
    days = (pl.when(pl.col("prevalent")).then(pl.lit(0))
            .when(pl.col("event")).then((pl.col("first_date") - pl.col("baseline_date"))
                                        .dt.total_days())
            .otherwise((pl.col("end") - pl.col("baseline_date")).dt.total_days()))
    return f.with_columns(event=event).with_columns(
        time_years=pl.max_horizontal(days, 0).cast(pl.Float64) / DAYS_PER_YEAR)


def follow_up_stats(f: pl.DataFrame) -> tuple[dict[str, dict], dict[str, dict[str, int]]]:
    """(counts per outcome, events per outcome and first source): what the report says about
    each outcome's censoring, so a wrong censoring date shows."""
    import polars as pl

    has = pl.col("first_date").is_not_null()
    incident = has & ~pl.col("prevalent")
    censored = ~pl.col("event") & ~pl.col("prevalent")
    stats = f.group_by("outcome").agg(
        participants=pl.len(), prevalent=pl.col("prevalent").sum(), events=pl.col("event").sum(),
        after_censoring=(incident & (pl.col("first_date") > pl.col("censor"))).sum(),
        censored_at_death=(censored & (pl.col("end") == pl.col("death_date"))
                           & (pl.col("death_date") < pl.col("censor"))).sum(),
        after_death=(incident & (pl.col("first_date") > pl.col("death_date"))).sum(),
        censored_lost_to_follow_up=(censored & (pl.col("end") == pl.col("lost_date"))
                                    & (pl.col("lost_date") < pl.col("censor"))).sum(),
        after_lost_to_follow_up=(incident & (pl.col("first_date") > pl.col("lost_date"))).sum(),
        censoring_before_baseline=(~pl.col("prevalent")
                                   & (pl.col("end") < pl.col("baseline_date"))).sum(),
    )
    stats = {r.pop("outcome"): r for r in stats.iter_rows(named=True)}
    sources = (f.filter(pl.col("event")).group_by("outcome", "first_source").len()
               .iter_rows())
    first_source: dict[str, dict[str, int]] = {}
    for name, source, count in sources:
        first_source.setdefault(name, {})[source] = int(count)
    return stats, first_source



def participants(baseline: pl.DataFrame, plan: LinkedPlan, deaths: list[pl.DataFrame],
                 lost: list[pl.DataFrame], countries: list[pl.DataFrame]
                 ) -> tuple[pl.DataFrame, dict[str, Any]]:
    """eid, baseline_date, country, death_date, lost_date of every participant with a baseline
    date, and what the report says about them (country, centre, loss to follow-up).
    ``deaths``, ``lost``, ``countries``: the blocks' frames of :func:`death_registry
    <sphr.data.outcomes.sources.death_registry>`, :func:`lost_to_follow_up` and
    :func:`centre_countries`."""
    import polars as pl

    death = (pl.concat(deaths).group_by("eid").agg(pl.col("death_date").min())
             if deaths else pl.DataFrame(schema={"eid": pl.Int64, "death_date": pl.Date}))
    lost_at = (pl.concat(lost).group_by("eid").agg(pl.col("lost_date").min())
               if lost else pl.DataFrame(schema={"eid": pl.Int64, "lost_date": pl.Date}))
    country = (pl.concat(countries).unique("eid", keep="first")
               if countries else pl.DataFrame(schema={"eid": pl.Int64, "country": pl.String}))
    base = baseline.select("eid", pl.col("assessment_date").alias("baseline_date"))
    no_date = int(base["baseline_date"].null_count())
    base = (base.filter(pl.col("baseline_date").is_not_null())
            .join(death, on="eid", how="left").join(lost_at, on="eid", how="left")
            .join(country, on="eid", how="left"))
    without = int(base["country"].null_count())
    # a participant without a centre is followed as in England, the country of most
    base = base.with_columns(pl.col("country").fill_null("england"))
    report = {
        "participants_without_baseline_date": no_date,
        "deaths": int(base["death_date"].is_not_null().sum()),
        "assessment_centre_read": plan.centre is not None,
        "participants_by_country": {c: int((base["country"] == c).sum()) for c in COUNTRIES},
        "participants_without_centre": without,
        "lost_to_follow_up_read": plan.lost is not None,
        "lost_to_follow_up": int(base["lost_date"].is_not_null().sum()),
    }
    return base, report
