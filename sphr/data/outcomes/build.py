"""``outcomes.parquet``: one row per participant and outcome, and the outcome part of the
ingest report (docs/OUTCOMES.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sphr.data.outcomes.censoring import censoring_report
from sphr.data.outcomes.collector import LinkedCollector
from sphr.data.outcomes.config import OutcomeConfig
from sphr.data.outcomes.definitions import COUNTRIES, SOURCES
from sphr.data.outcomes.followup import (
    Built,
    first_records,
    follow_up,
    follow_up_stats,
    participants,
)
from sphr.data.outcomes.plan import LinkedPlan

if TYPE_CHECKING:  # polars loads on use
    import polars as pl

OUTCOME_COLUMNS: tuple[str, ...] = (
    "eid", "outcome", "event", "time_years", "prevalent", "source", "event_date",
)


def empty_outcomes() -> pl.DataFrame:
    import polars as pl

    return pl.DataFrame(schema={"eid": pl.Int64, "outcome": pl.String, "event": pl.Int8,
                                "time_years": pl.Float64, "prevalent": pl.Boolean,
                                "source": pl.String, "event_date": pl.Date})


def _gathered(collector: LinkedCollector) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(events, first records of any code) over every block the collector read."""
    import polars as pl

    date_schema = {"eid": pl.Int64, "source": pl.String, "date": pl.Date}
    events = (pl.concat(collector.events) if collector.events else
              pl.DataFrame(schema={"eid": pl.Int64, "outcome": pl.String, **date_schema}))
    any_records = (pl.concat(collector.any_records) if collector.any_records
                   else pl.DataFrame(schema=date_schema))
    return events, any_records



def build_outcomes(baseline: pl.DataFrame, collector: LinkedCollector
                   ) -> tuple[pl.DataFrame, dict]:
    """One row per participant (of ``baseline``: eid, assessment_date) and outcome, and the
    outcome part of the ingest report."""

    collector.flush()
    config, plan = collector.config, collector.plan
    present = plan.sources
    events, any_records = _gathered(collector)
    base, people = participants(baseline, plan, collector.deaths, collector.lost,
                                collector.countries)

    built: list[Built] = []
    skipped = {}
    for o in config.outcomes:
        used = [s for s in o.sources if s in present]
        if used:
            built.append((o, used, {c: min(config.censoring_date(s, c) for s in used)
                                    for c in COUNTRIES}))
        else:
            skipped[o.name] = f"none of its sources ({', '.join(o.sources)}) is in the export"
    report: dict[str, Any] = {
        "written": bool(built), "sources_present": list(present),
        "sources_missing": [s for s in SOURCES if s not in present],
        "censoring_dates": censoring_report(config.censoring), **people,
        "first_occurrence_fields_read": {code: f.id for code, f in
                                         plan.first_occurrence.values()},
        "algorithmic_fields_read": {name: f.id for name, f in plan.algorithmic.values()},
        # values of the "source of report" fields as the export writes them (codes or labels)
        "reported_by": {k: dict(v) for k, v in collector.reported_by.items()},
        "codes_read": {s: collector.codes_read[s] for s in present if collector.codes_read[s]},
        "codes_outside_every_outcome": {s: collector.codes_outside[s] for s in present
                                        if collector.codes_outside[s]},
        "most_common_codes_outside": dict(collector.outside_categories.most_common(15)),
        "codes_without_date": {s: collector.undated[s] for s in present
                               if collector.undated[s]},
        "special_dates": {k: dict(v) for k, v in collector.special_dates.items()},
        "by_outcome": {}, "outcomes_not_built": skipped,
    }
    if not built:
        return empty_outcomes(), report
    f = follow_up(base, built, first_records(built, events, any_records))
    out = _outcome_rows(f)
    report["by_outcome"] = _by_outcome(f, out, built, present, plan, config)
    return out, report


def _outcome_rows(f: pl.DataFrame) -> pl.DataFrame:
    """outcomes.parquet's rows. ``event`` in ``f`` is an incident event; in the table a
    prevalent row has event 1 (the participant has the disease) and time 0, so it is never
    taken for an event-free one."""
    import polars as pl

    shown = pl.col("event") | pl.col("prevalent")
    return f.sort("eid", "_order").select(
        "eid", "outcome", shown.cast(pl.Int8).alias("event"), "time_years", "prevalent",
        pl.when(shown).then(pl.col("first_source")).alias("source"),
        pl.when(shown).then(pl.col("first_date")).alias("event_date"))


def _by_outcome(f: pl.DataFrame, out: pl.DataFrame, built: list[Built], present: tuple[str, ...],
                plan: LinkedPlan, config: OutcomeConfig) -> dict[str, dict]:
    import polars as pl

    from sphr.survival import km_cumulative

    stats, first_source = follow_up_stats(f)
    fo_codes = {code for code, _ in plan.first_occurrence.values()}
    result = {}
    for o, used, censor in built:
        rows = out.filter((pl.col("outcome") == o.name) & ~pl.col("prevalent"))
        entry = {
            **{k: int(v or 0) for k, v in stats[o.name].items()},
            "censoring_date": {c: d.isoformat() for c, d in censor.items()},
            "sources_used": used,
            "sources_missing": [s for s in o.sources if s not in present],
            "first_event_source": {s: first_source.get(o.name, {}).get(s, 0) for s in used},
            "cumulative_incidence_10y": round(km_cumulative(
                rows["time_years"].to_numpy(), rows["event"].to_numpy().astype(bool), 10.0), 4),
        }
        if "first_occurrence" in o.sources:
            # the categories of the set that have a known field, read or not
            known = [c for c in config.first_occurrence_fields if o.matches(c)]
            entry["first_occurrence_codes"] = {"read": sorted(c for c in known if c in fo_codes),
                                               "not_in_export": sorted(c for c in known
                                                                       if c not in fo_codes)}
        result[o.name] = entry
    return result


def no_outcomes_report(config: OutcomeConfig) -> dict:
    return {
        "written": False,
        "why": "the export has none of the linked fields (hospital 41270 + 41280 or 41271 + "
               "41281, cancer registry 40006 + 40005, death registry 40000 [+ 40001, 40002], "
               "First Occurrences (category 1712), algorithmically-defined outcomes (category "
               "42))",
        "sources_present": [], "sources_missing": list(SOURCES),
        "censoring_dates": censoring_report(config.censoring),
    }
